"""Bodies of tests/torch/test_spill.py (dcp.async_save's spill, python/uvmchunk/_spill.py), run in a
subprocess on the simulated runtime with or without the library, like torch_body.py (whose helpers
they use). Prints one line `RESULT <json>`.

usage: python spill_body.py spill --dir CKPT --watch DIR [--size BYTES] [--mode default|writer|pinned]
                            [--no-overwrite] [--hold] [--cached] [--no-cpu-preference] [--cpu BYTES]
       python spill_body.py sharded --dir CKPT --watch DIR [--size BYTES] [--mode default|writer]
       python spill_body.py strict --dir CKPT --watch DIR [--size BYTES]

A small managed table (8 MiB), a large one (--size) and a 4 MiB ordinary CUDA tensor are saved with
dcp.async_save while the upload is held back (FileSystemWriter.write_data waits for the body). Right
after async_save returns both tables are overwritten (unless --no-overwrite); while the upload waits,
the spill files mapped from --watch and the names in it are recorded; then the upload runs and the
checkpoint is loaded back. RssAnon (/proc/self/status) is sampled every 2 ms from before the call
until after the upload (with --cached, also the spill files' page cache, by mincore). --hold: print
HOLDING once the upload waits and sleep (the test kills it)."""
import gc
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from torch_body import _status_kib, cuda_from, pattern, result, unset_cpu_preference  # noqa: E402

MIB = 1 << 20
FILL = 0x5A


def spill_maps(folder):
    """[count, bytes, resident bytes] of this process's mappings of deleted files in `folder`
    (/proc/self/smaps)."""
    n = size = rss = 0
    prefix = os.path.realpath(folder).rstrip("/") + "/"
    ours = False
    with open("/proc/self/smaps") as f:
        for line in f:
            parts = line.split(None, 5)
            if parts and "-" in parts[0] and len(parts) >= 5:  # a mapping's header line
                ours = len(parts) == 6 and parts[5].startswith(prefix) and parts[5].rstrip().endswith("(deleted)")
                if ours:
                    lo, hi = (int(x, 16) for x in parts[0].split("-"))
                    n += 1
                    size += hi - lo
            elif ours and parts[0] == "Rss:":
                rss += int(parts[1]) * 1024
    return [n, size, rss]


def spill_cached(folder):
    """Bytes of the spill files mapped from `folder` that are in the page cache, mapped or not
    (mincore(2) of each mapping: for a file mapping it asks the file's page cache)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    page = os.sysconf("SC_PAGE_SIZE")
    prefix = os.path.realpath(folder).rstrip("/") + "/"
    total = 0
    with open("/proc/self/maps") as f:
        ranges = [tuple(int(x, 16) for x in parts[0].split("-")) for parts in (line.split(None, 5) for line in f)
                  if len(parts) == 6 and parts[5].startswith(prefix) and parts[5].rstrip().endswith("(deleted)")]
    for lo, hi in ranges:
        vec = (ctypes.c_ubyte * ((hi - lo) // page))()
        if libc.mincore(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), vec) == 0:
            total += (len(vec) - bytes(vec).count(0)) * page  # bit 0 set: resident; the others are 0
    return total


class Sampler(threading.Thread):
    """Peak RssAnon (bytes) from start() to stop(); with `cached` (a folder), also the peak of its
    spill files' page cache (spill_cached) in .peak_cached."""

    def __init__(self, cached=None):
        super().__init__(daemon=True)
        self.peak, self.done = 0, threading.Event()
        self.cached, self.peak_cached = cached, 0

    def run(self):
        while not self.done.is_set():
            self.peak = max(self.peak, _status_kib("RssAnon") * 1024)
            if self.cached:
                self.peak_cached = max(self.peak_cached, spill_cached(self.cached))
            time.sleep(0.002)

    def stop(self):
        self.done.set()
        self.join()
        self.peak = max(self.peak, _status_kib("RssAnon") * 1024)
        return self.peak


def body_spill(a):
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemWriter

    sizes = {"small": 8 * MIB, "table": a.size}
    state = {k: cuda_from(pattern(n, i + 1), managed=True) for i, (k, n) in enumerate(sizes.items())}
    state["dense"] = cuda_from(pattern(4 * MIB, 9), managed=False)
    if a.cpu:  # an ordinary CPU tensor: part of the checkpoint, never staged
        state["cpu"] = pattern(a.cpu, 10)
    if a.no_cpu_preference:  # the CPU may not read it while the device works: copied, not written by pwrite
        unset_cpu_preference(state["table"])
    fill = torch.full((4 * MIB,), FILL, dtype=torch.uint8)
    gate, writing = threading.Event(), threading.Event()
    orig_write = FileSystemWriter.write_data

    cached_written = []

    def write_data(self, *args, **kwargs):  # the upload waits until the body has looked
        writing.set()
        gate.wait(120)
        out = orig_write(self, *args, **kwargs)
        if a.cached:  # every item written, the spill not yet released (that waits for the future)
            cached_written.append(spill_cached(a.watch))
        return out

    FileSystemWriter.write_data = write_data
    kwargs, stager = {"checkpoint_id": a.dir}, None
    if a.mode == "writer":
        kwargs = {"storage_writer": FileSystemWriter(a.dir)}
    elif a.mode == "pinned":
        try:
            from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
        except ImportError:  # 2.8: the writer is the stager, pinned when it caches its staged copy
            kwargs = {"storage_writer": FileSystemWriter(a.dir, cache_staged_state_dict=True)}
        else:
            stager = DefaultStager(StagingOptions(use_pinned_memory=True, use_shared_memory=False,
                                                  use_async_staging=False, use_non_blocking_copy=True))
            kwargs["async_stager"] = stager
    gc.collect()
    torch.cuda.synchronize()
    base = _status_kib("RssAnon") * 1024
    sampler = Sampler(a.watch if a.cached else None)
    sampler.start()
    t0 = time.monotonic()
    try:
        resp = dcp.async_save(state, **kwargs)
    except Exception as e:  # noqa: BLE001  (async_spill = required, refused)
        sampler.stop()
        result(refused=f"{type(e).__name__}: {e}"[:300], names_after=sorted(os.listdir(a.watch)),
               maps_after=spill_maps(a.watch),
               tables_now={k: torch.equal(state[k].cpu(), pattern(n, i + 1)) for i, (k, n) in enumerate(sizes.items())})
        return
    stall = time.monotonic() - t0
    if not a.no_overwrite:  # the next training step: every byte of both tables rewritten at once
        for k in sizes:
            flat = state[k].view(-1)
            for off in range(0, flat.numel(), fill.numel()):
                n = min(fill.numel(), flat.numel() - off)
                flat[off:off + n].copy_(fill[:n])
        torch.cuda.synchronize()
    fut = getattr(resp, "upload_completion", resp)
    writing.wait(120)
    cached_staging = sampler.peak_cached  # the spill's page cache at most, before the upload reads it
    names_during = sorted(os.listdir(a.watch))
    maps_during = spill_maps(a.watch)
    if a.hold:
        os.write(1, f"HOLDING {maps_during[0]} {maps_during[1]} {maps_during[2]}\n".encode())
        time.sleep(300)
    gate.set()
    error = None
    try:
        fut.result()
    except BaseException as e:  # noqa: BLE001  (DCP's CheckpointException is one; the test compares it with stock's)
        error = f"{type(e).__name__}: {e}"[:300]
    upload = time.monotonic() - t0
    for _ in range(50):  # the upload thread drops the staged copy just after the future completes
        gc.collect()
        if spill_maps(a.watch)[0] == 0:
            break
        time.sleep(0.1)
    peak = sampler.stop() - base
    maps_after = spill_maps(a.watch)
    names_after = sorted(os.listdir(a.watch))
    if stager is not None:
        stager.close()
    del kwargs, stager, resp, fut  # a caching stager (2.8's writer) keeps its staged copy until dropped
    gc.collect()
    maps_dropped = spill_maps(a.watch)
    from uvmchunk import _accounting
    spilled = _accounting.totals().get("dcp.async_save", {}).get("spilled_bytes", 0)
    expect = {k: (torch.full((n,), FILL, dtype=torch.uint8) if not a.no_overwrite else pattern(n, i + 1))
              for i, (k, n) in enumerate(sizes.items())}
    tables_now = {k: torch.equal(state[k].cpu(), expect[k]) for k in sizes}
    loaded = None
    if error is None:
        back = {k: torch.zeros(n, dtype=torch.uint8) for k, n in sizes.items()}
        back["dense"] = torch.zeros(4 * MIB, dtype=torch.uint8)
        dcp.load(back, checkpoint_id=a.dir)
        loaded = {k: torch.equal(back[k], pattern(n, i + 1)) for i, (k, n) in enumerate(sizes.items())}
        loaded["dense"] = torch.equal(back["dense"], pattern(4 * MIB, 9))
        if a.cpu:
            back = {"cpu": torch.zeros(a.cpu, dtype=torch.uint8)}
            dcp.load(back, checkpoint_id=a.dir)
            loaded["cpu"] = torch.equal(back["cpu"], pattern(a.cpu, 10))
    result(peak_anon_extra=peak, table=a.size, stall_s=round(stall, 3), upload_s=round(upload, 3),
           names_during=names_during, maps_during=maps_during, maps_after=maps_after, maps_dropped=maps_dropped, names_after=names_after,
           spilled_bytes=spilled, error=error, tables_now=tables_now, loaded=loaded,
           peak_cached_staging=cached_staging, peak_cached=sampler.peak_cached,
           cached_written=max(cached_written, default=None))


def _sharded_state(size, zero):
    """A ShardedTensor of two managed row blocks (`size` bytes each, rows of 512 bytes) and a DTensor
    on a one-device mesh whose local tensor is a managed table of `size` bytes, in a one-rank gloo
    group: the leaves TorchRec hands DCP. Patterns 21, 22, 23 (zeros with `zero`)."""
    import torch.distributed as dist
    from torch.distributed._shard.sharded_tensor import Shard, init_from_local_shards
    from torch.distributed.tensor import DTensor, Shard as Placement, init_device_mesh
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    rows = size // 512

    def table(seed):
        cpu = torch.zeros(size, dtype=torch.uint8) if zero else pattern(size, seed)
        return cuda_from(cpu.view(rows, 512), managed=True)
    st = init_from_local_shards([Shard.from_tensor_and_offsets(table(21), [0, 0], 0),
                                 Shard.from_tensor_and_offsets(table(22), [rows, 0], 0)], 2 * rows, 512)
    mesh = init_device_mesh("cuda", (1,))
    dt = DTensor.from_local(table(23), mesh, [Placement(0)], run_check=False)
    return {"sharded": st, "dtensor": dt}


def body_sharded(a):
    """dcp.async_save of a ShardedTensor (two managed shards) and a DTensor (a managed local tensor),
    --size bytes each, with the default stager or the FileSystemWriter as stager (--mode writer):
    peak extra RssAnon, spilled bytes, and whether the checkpoint reloads bitwise."""
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemWriter
    state = _sharded_state(a.size, zero=False)
    kwargs = {"storage_writer": FileSystemWriter(a.dir)} if a.mode == "writer" else {"checkpoint_id": a.dir}
    gc.collect()
    torch.cuda.synchronize()
    base = _status_kib("RssAnon") * 1024
    sampler = Sampler()
    sampler.start()
    try:
        resp = dcp.async_save(state, **kwargs)
        getattr(resp, "upload_completion", resp).result()
    except Exception as e:  # noqa: BLE001  (2.11+'s DefaultStager cannot stage a ShardedTensor: stock's error)
        sampler.stop()
        result(error=f"{type(e).__name__}: {str(e)[:120]}")
        return
    del resp, kwargs
    gc.collect()
    peak = sampler.stop() - base
    back = _sharded_state(a.size, zero=True)
    dcp.load(back, checkpoint_id=a.dir)
    shards = back["sharded"].local_shards()
    loaded = {"sharded": all(torch.equal(s.tensor.cpu().view(-1), pattern(a.size, 21 + i)) for i, s in enumerate(shards)),
              "dtensor": torch.equal(back["dtensor"].to_local().cpu().view(-1), pattern(a.size, 23))}
    from uvmchunk import _accounting
    spilled = _accounting.totals().get("dcp.async_save", {}).get("spilled_bytes", 0)
    result(error=None, peak_anon_extra=peak, spilled_bytes=spilled, loaded=loaded, managed_bytes=3 * a.size)


def body_strict(a):
    """Subclasses users write, each override with the exact signature PyTorch's base declares and
    nothing more (no **kwargs): a save planner, a load planner, a FileSystemWriter (2.8's stager
    too), a FileSystemReader and, on 2.11+, a DefaultStager whose _stage takes only the state dict
    (async staging on its thread, then on the caller's). dcp.save, dcp.load and dcp.async_save of a
    managed table (--size bytes) and a 4 MiB ordinary CUDA tensor through them: each call's outcome
    ("ok" or the exception's type and text), whether the loads read back the values, and the bytes
    spilled (a stager's staging may run on its own thread: the spill must reach it there)."""
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import (DefaultLoadPlanner, DefaultSavePlanner, FileSystemReader,
                                              FileSystemWriter)

    class SavePlanner(DefaultSavePlanner):
        def set_up_planner(self, state_dict, storage_meta=None, is_coordinator=False):
            super().set_up_planner(state_dict, storage_meta, is_coordinator)

        def resolve_data(self, write_item):
            return super().resolve_data(write_item)

    class LoadPlanner(DefaultLoadPlanner):
        def set_up_planner(self, state_dict, metadata=None, is_coordinator=False):
            super().set_up_planner(state_dict, metadata, is_coordinator)

        def resolve_tensor(self, read_item):
            return super().resolve_tensor(read_item)

        def commit_tensor(self, read_item, tensor):
            super().commit_tensor(read_item, tensor)

    class Writer(FileSystemWriter):
        def prepare_local_plan(self, plan):
            return super().prepare_local_plan(plan)

        def write_data(self, plan, planner):
            return super().write_data(plan, planner)

    if hasattr(FileSystemWriter, "stage"):  # 2.8 (and 2.11): the writer is a BlockingAsyncStager
        Writer.stage = lambda self, state_dict: FileSystemWriter.stage(self, state_dict)

    class Reader(FileSystemReader):
        def read_data(self, plan, planner):
            return super().read_data(plan, planner)

    sizes = {"table": a.size, "dense": 4 * MIB}
    state = {"table": cuda_from(pattern(a.size, 1), managed=True), "dense": cuda_from(pattern(4 * MIB, 2), managed=False)}
    outcomes, loaded = {}, {}

    def attempt(name, fn):
        try:
            fn()
            outcomes[name] = "ok"
        except BaseException as e:  # noqa: BLE001  (compared with stock's; DCP's CheckpointException is one)
            outcomes[name] = f"{type(e).__name__}: {e}"[:300]

    def load_back(name, folder):
        back = {k: torch.zeros(n, dtype=torch.uint8) for k, n in sizes.items()}
        attempt(f"load {name}", lambda: dcp.load(back, storage_reader=Reader(folder), planner=LoadPlanner()))
        loaded[name] = all(torch.equal(back[k], pattern(n, i + 1)) for i, (k, n) in enumerate(sizes.items()))

    def async_save(folder, **kwargs):
        resp = dcp.async_save(state, storage_writer=Writer(folder), planner=SavePlanner(), **kwargs)
        getattr(resp, "upload_completion", resp).result()

    attempt("save", lambda: dcp.save(state, storage_writer=Writer(f"{a.dir}/save"), planner=SavePlanner()))
    load_back("save", f"{a.dir}/save")
    attempt("async_save writer", lambda: async_save(f"{a.dir}/writer"))
    load_back("async_save writer", f"{a.dir}/writer")
    try:
        from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
    except ImportError:  # 2.8: no DefaultStager
        DefaultStager = None
    if DefaultStager is not None:
        class Stager(DefaultStager):
            def _stage(self, state_dict):
                return super()._stage(state_dict)

        for threaded in (True, False):
            name = f"async_save stager {'thread' if threaded else 'caller'}"
            stager = Stager(StagingOptions(use_pinned_memory=False, use_shared_memory=False,
                                           use_async_staging=threaded, use_non_blocking_copy=False))
            attempt(name, lambda: async_save(f"{a.dir}/{name[-6:]}", async_stager=stager))
            stager.close()
            load_back(name, f"{a.dir}/{name[-6:]}")
    from uvmchunk import _accounting
    result(outcomes=outcomes, loaded=loaded,
           spilled_bytes=_accounting.totals().get("dcp.async_save", {}).get("spilled_bytes", 0))


def main():
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("body")
    p.add_argument("--size", type=int, default=64 * MIB)
    p.add_argument("--dir", required=True)
    p.add_argument("--watch", required=True)
    p.add_argument("--mode", default="default")
    p.add_argument("--no-overwrite", action="store_true")
    p.add_argument("--cpu", type=int, default=0)  # bytes of an ordinary CPU tensor saved too
    p.add_argument("--hold", action="store_true")
    p.add_argument("--cached", action="store_true")  # sample the spill files' page cache too
    p.add_argument("--no-cpu-preference", action="store_true")  # the large table without FBGEMM's advice
    a = p.parse_args()
    globals()["body_" + a.body](a)


if __name__ == "__main__":
    main()
