"""Bodies of test_report.py: a job that saves, loads and async-saves managed tables with
torch.distributed.checkpoint and no code change of ours, measuring each call itself as the harness
does (integration/checkpoint_job.py: VmHWM reset with /proc/self/clear_refs just before, VmRSS
before and after, wall time), so the test can hold the package's per-checkpoint line and JSON
record against it; also RssAnon before and after, and the bytes of the files each call wrote or
read. argv: table size (bytes), checkpoint folder, optionally the ranks whose tables are managed
memory (comma-separated; default all, the others' are ordinary CUDA tensors; "all" for all), and
"--extra": then a save and a load through uvmchunk.dcp's planners (mixins), a save of CPU tensors
only and a save that raises follow. One RESULT line per rank."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from torch_body import _clear_hwm, _status_kib, cuda_from, pattern, result  # noqa: E402

MIB = 1 << 20


def _end_reading():
    """(VmRSS, RssAnon, VmHWM) in bytes now."""
    return _status_kib("VmRSS") * 1024, _status_kib("RssAnon") * 1024, _status_kib("VmHWM") * 1024


def measured(fn, folder=None):
    """(seconds, peak bytes above the resident size before, bytes left resident and anonymous bytes
    left after, bytes of the files under `folder`) of fn(); "raised": the type name of what fn
    raised (not raised on). fn may return the call's end reading (_end_reading's tuple) where the call
    ends elsewhere than on this thread (dcp.async_save); else it is read when fn returns."""
    _clear_hwm()
    rss0, anon0 = _status_kib("VmRSS") * 1024, _status_kib("RssAnon") * 1024
    t0 = time.monotonic()
    raised = end = None
    try:
        end = fn()
    except BaseException as e:  # noqa: BLE001  (DCP's CheckpointException is a BaseException)
        raised = type(e).__name__
    secs = time.monotonic() - t0
    rss1, anon1, hwm = end if isinstance(end, tuple) else _end_reading()  # dcp.save returns its Metadata
    return {"seconds": secs, "peak": hwm - rss0, "after": rss1 - rss0, "anon_after": anon1 - anon0,
            "files": _file_bytes(folder), "raised": raised}


def _file_bytes(folder):
    """Bytes of the files under `folder` (a checkpoint), 0 when there is none."""
    if not folder or not os.path.isdir(folder):
        return 0
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs)


def main():
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    size, ckpt = int(sys.argv[1]), sys.argv[2]
    rank = 0
    if "RANK" in os.environ:
        dist.init_process_group("gloo")
        torch.cuda.set_device(0)
        rank = dist.get_rank()
    managed = len(sys.argv) < 4 or sys.argv[3] == "all" or str(rank) in sys.argv[3].split(",")  # argv[3]: the ranks with managed tables
    state = {f"r{rank}.table{i}": cuda_from(pattern(size * (i + 2) // 2, 10 * rank + i), managed=managed)
             for i in range(2)}
    state[f"r{rank}.dense"] = cuda_from(pattern(1 * MIB, 5 + rank), managed=False)
    own = {"dcp.save": measured(lambda: dcp.save(state, checkpoint_id=ckpt + "/a"), ckpt + "/a")}
    fresh = {k: torch.empty_like(v) if k.endswith("dense") else cuda_from(torch.zeros_like(v.cpu()), managed=managed)
             for k, v in state.items()}
    own["dcp.load"] = measured(lambda: dcp.load(fresh, checkpoint_id=ckpt + "/a"), ckpt + "/a")
    equal = all(torch.equal(fresh[k].cpu(), state[k].cpu()) for k in state)

    def async_save():
        # The call ends in its upload's done callbacks, on the uploading thread: the package's report
        # takes its last reading in the one it registered inside the call, and the staged copy is
        # freed after them. The job reads in the next callback (concurrent.futures runs them in
        # the order added), so both readings end the same call, before that release and before
        # anything this thread does once result() returns.
        r = dcp.async_save(state, checkpoint_id=ckpt + "/b")
        upload, end = getattr(r, "upload_completion", r), []
        upload.add_done_callback(lambda _f: end.append(_end_reading()))
        upload.result()
        return end[0] if end else None
    own["dcp.async_save"] = measured(async_save, ckpt + "/b")
    time.sleep(0.5)  # the report of an async save is finished by the upload's done callback
    if "--extra" in sys.argv:
        own.update(extra(state, fresh, ckpt))
    cuda_bytes = sum(v.numel() for v in state.values())
    result(rank=rank, pid=os.getpid(), own=own, equal=equal, cuda_bytes=cuda_bytes, managed=managed,
           managed_bytes=sum(v.numel() for k, v in state.items() if "table" in k and managed), executable=sys.executable,
           preload=os.environ.get("LD_PRELOAD", ""))
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


class Releasing:
    """A Stateful (torch.distributed.checkpoint.stateful) that drops an 8 MiB cache of its own when
    DCP asks for its state: host memory that goes down during the save."""

    def __init__(self):
        self.cache = bytearray(b"x" * (8 * MIB))  # one mapping of its own (malloc's mmap threshold)

    def state_dict(self):
        self.cache = None
        return {"position": torch.tensor(3)}

    def load_state_dict(self, state):
        pass


def extra(state, fresh, ckpt):
    """The calls after the three: "mixin.save" / "mixin.load" through uvmchunk.dcp's planners,
    "cpu.save" of CPU tensors only (a step counter, 1 MiB of weights and a loader's position, the
    loader releasing 8 MiB meanwhile), "failed.save" into a
    checkpoint folder that is a file (DCP raises)."""
    import torch.distributed.checkpoint as dcp
    from uvmchunk.dcp import ZeroCopyLoadPlanner, ZeroCopySavePlanner
    own = {"mixin.save": measured(lambda: dcp.save(state, checkpoint_id=ckpt + "/c", planner=ZeroCopySavePlanner()),
                                  ckpt + "/c")}
    own["mixin.load"] = measured(lambda: dcp.load(fresh, checkpoint_id=ckpt + "/c", planner=ZeroCopyLoadPlanner()),
                                 ckpt + "/c")
    cpu = {"step": torch.tensor(7), "w": torch.ones(1 << 18), "loader": Releasing()}
    own["cpu.save"] = measured(lambda: dcp.save(cpu, checkpoint_id=ckpt + "/d"), ckpt + "/d")
    with open(ckpt + "/e", "w") as f:
        f.write("a file, not a folder")
    own["failed.save"] = measured(lambda: dcp.save(cpu, checkpoint_id=ckpt + "/e"))
    return own


if __name__ == "__main__":
    main()
