"""Bodies of test_report.py: a job that saves, loads and async-saves managed tables with
torch.distributed.checkpoint and no code change of ours, measuring each call itself as the harness
does (integration/checkpoint_job.py: VmHWM reset with /proc/self/clear_refs just before, VmRSS
before and after, wall time), so the test can hold the package's per-checkpoint line and JSON
record against it. argv: table size (bytes), checkpoint folder, optionally the ranks whose tables
are managed memory (comma-separated; default all, the others' are ordinary CUDA tensors). One
RESULT line per rank."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from torch_body import _clear_hwm, _status_kib, cuda_from, pattern, result  # noqa: E402

MIB = 1 << 20


def measured(fn):
    """(seconds, peak bytes above the resident size before, bytes left resident after) of fn()."""
    _clear_hwm()
    rss0 = _status_kib("VmRSS") * 1024
    t0 = time.monotonic()
    fn()
    secs = time.monotonic() - t0
    return {"seconds": secs, "peak": _status_kib("VmHWM") * 1024 - rss0, "after": _status_kib("VmRSS") * 1024 - rss0}


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
    managed = len(sys.argv) < 4 or str(rank) in sys.argv[3].split(",")  # argv[3]: the ranks with managed tables
    state = {f"r{rank}.table{i}": cuda_from(pattern(size * (i + 2) // 2, 10 * rank + i), managed=managed)
             for i in range(2)}
    state[f"r{rank}.dense"] = cuda_from(pattern(1 * MIB, 5 + rank), managed=False)
    own = {"dcp.save": measured(lambda: dcp.save(state, checkpoint_id=ckpt + "/a"))}
    fresh = {k: torch.empty_like(v) if k.endswith("dense") else cuda_from(torch.zeros_like(v.cpu()), managed=managed)
             for k, v in state.items()}
    own["dcp.load"] = measured(lambda: dcp.load(fresh, checkpoint_id=ckpt + "/a"))
    equal = all(torch.equal(fresh[k].cpu(), state[k].cpu()) for k in state)

    def async_save():
        r = dcp.async_save(state, checkpoint_id=ckpt + "/b")
        getattr(r, "upload_completion", r).result()
    own["dcp.async_save"] = measured(async_save)
    time.sleep(0.5)  # the report of an async save is finished by the upload's done callback
    cuda_bytes = sum(v.numel() for v in state.values())
    result(rank=rank, pid=os.getpid(), own=own, equal=equal, cuda_bytes=cuda_bytes, managed=managed,
           managed_bytes=sum(v.numel() for k, v in state.items() if "table" in k and managed), executable=sys.executable)
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
