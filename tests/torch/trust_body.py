"""Bodies of tests/torch/test_trust.py, run in a subprocess with or without LD_PRELOAD=libuvmchunk.so
on the simulated CUDA runtime (tests/sim), each printing one line `RESULT <json>`: the automatic
path never saves older bytes than stock, leaves no CUDA error behind, costs what stock costs where
it does nothing, recognises the save async_save runs, and copies a table that sits on the device.

usage: python trust_body.py stale|attr_fail|cost|no_cycle|async_marker|residency|stacked|
                            cpu_save|cpu_load|no_collect|pinned_kept|pending_error --dir DIR
"""
import argparse
import ctypes
import gc
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_body import cuda_from, pattern, quiet_dcp, result, sim_driver, views_taken  # noqa: E402

MIB = 1 << 20


_dcp = quiet_dcp


def _views():
    """Views taken on save so far in this process (0 without the package's automatic path)."""
    return views_taken()["save"]


def _filled(nbytes, value):
    return torch.full((nbytes,), value, dtype=torch.uint8)


def _values(t):
    return sorted(torch.unique(t).tolist())


def _main_thread_late(writer):
    """The writer with the caller's thread 0.3 s late to open its file, so a writer thread resolves
    its item first (what a busy caller, holding the GIL or waiting on I/O, makes happen by chance:
    FileSystemWriter starts its threads before the caller takes its own share of the files,
    torch/distributed/checkpoint/filesystem.py). Still PyTorch's FileSystemWriter."""
    import contextlib
    import threading
    opened = writer.fs.create_stream

    @contextlib.contextmanager
    def create_stream(path, mode):
        if threading.current_thread() is threading.main_thread():
            time.sleep(0.3)
        with opened(path, mode) as stream:
            yield stream

    writer.fs.create_stream = create_stream
    return writer


def body_stale(a):
    """Two managed tables hold 1; a write of 2 into each is queued on the caller's current (side)
    stream behind slow work; dcp.save with FileSystemWriter(thread_count=2) then runs with that
    stream current. What the checkpoint holds per table (its distinct byte values)."""
    dcp = _dcp()
    from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
    drv = sim_driver()
    state = {k: cuda_from(_filled(8 * MIB, 1), managed=True) for k in ("a", "b")}
    side = torch.cuda.Stream()
    twos = _filled(8 * MIB, 2)
    scratch = torch.empty(4096, dtype=torch.uint8, device="cuda")
    drv.uvmsim_set_op_delay_us(150000)  # every queued op sleeps 0.15 s before it runs
    with torch.cuda.stream(side):
        for _ in range(3):  # slow work ahead of the writes, on the side stream only
            scratch.copy_(twos[:4096], non_blocking=True)
        for t in state.values():
            t.copy_(twos, non_blocking=True)
        dcp.save(state, storage_writer=_main_thread_late(FileSystemWriter(a.dir, thread_count=2)), no_dist=True)
    drv.uvmsim_set_op_delay_us(0)
    torch.cuda.synchronize()
    back = {k: torch.zeros(8 * MIB, dtype=torch.uint8) for k in state}
    dcp.load(back, storage_reader=FileSystemReader(a.dir), no_dist=True)
    result(saved={k: _values(v) for k, v in back.items()}, views=_views())


def body_attr_fail(a):
    """The next cudaDeviceGetAttribute fails (101, cudaErrorInvalidDevice) just before a save of a
    managed table; then an unrelated fill of a dense tensor (a kernel: UVMSIM_KERNELS=noop) and a
    second save."""
    dcp = _dcp()
    drv = sim_driver()
    table = cuda_from(pattern(8 * MIB, 1), managed=True)
    dense = torch.zeros(1024, device="cuda")
    drv.uvmsim_fail_nth(b"cudaDeviceGetAttribute", 1, 101)
    calls0 = drv.uvmsim_calls(b"cudaDeviceGetAttribute")
    v0 = _views()
    dcp.save({"t": table}, checkpoint_id=os.path.join(a.dir, "first"), no_dist=True)
    v1 = _views()
    calls1 = drv.uvmsim_calls(b"cudaDeviceGetAttribute")
    fill_error = None
    try:
        dense.fill_(1.0)
        torch.cuda.synchronize()
    except Exception as e:  # torch.AcceleratorError (a RuntimeError)
        fill_error = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    dcp.save({"t": table}, checkpoint_id=os.path.join(a.dir, "second"), no_dist=True)
    back = {"t": torch.zeros(8 * MIB, dtype=torch.uint8)}
    dcp.load(back, checkpoint_id=os.path.join(a.dir, "second"), no_dist=True)
    result(fill_error=fill_error, first_views=v1 - v0, second_views=_views() - v1,
           attribute_calls_in_first_save=int(calls1 - calls0), equal=torch.equal(back["t"], table.cpu()))


def body_pending_error(a):
    """An error the job has not read yet (cudaSetDevice of a device that does not exist: 101, not
    sticky) when dcp.save and dcp.load of a managed table begin, with the next range-attribute
    query set to fail (a query of the library's own that fails clears its error, and with it the
    job's): what the runtime's cudaGetLastError returns afterwards (stock: the job's error)."""
    dcp = _dcp()
    drv = sim_driver()
    table = cuda_from(pattern(8 * MIB, 2), managed=True)
    torch.cuda.synchronize()
    cudart = ctypes.CDLL(None)  # the simulated runtime, preloaded in the global scope
    seen = []
    for what in ("save", "load"):
        rc = cudart.cudaSetDevice(4096)
        drv.uvmsim_fail_nth(b"cudaMemRangeGetAttribute", 1, 1)  # asked by the library, not by PyTorch
        if what == "save":
            dcp.save({"t": table}, checkpoint_id=a.dir, no_dist=True)
        else:
            dcp.load({"t": table}, checkpoint_id=a.dir, no_dist=True)
        seen.append([rc, cudart.cudaGetLastError()])
    result(set_device_and_after=seen, views=_views())


def body_cost(a):
    """A 4 KiB CPU tensor saved and loaded with CUDA initialised and 1.5 million live Python objects
    (a data set's index): median seconds per save and per load over five rounds."""
    dcp = _dcp()
    torch.empty(1, device="cuda")  # CUDA initialised
    index = [[i] for i in range(1_500_000)]  # gc-tracked objects, as a job's heap holds
    state = {"x": torch.arange(1024, dtype=torch.float32)}
    saves, loads = [], []
    for i in range(6):
        d = os.path.join(a.dir, str(i))
        t0 = time.perf_counter()
        dcp.save(state, checkpoint_id=d, no_dist=True)
        t1 = time.perf_counter()
        back = {"x": torch.zeros(1024)}
        dcp.load(back, checkpoint_id=d, no_dist=True)
        t2 = time.perf_counter()
        if i:  # the first round imports and warms up
            saves.append(t1 - t0)
            loads.append(t2 - t1)
    saves.sort()
    loads.sort()
    result(save_s=saves[len(saves) // 2], load_s=loads[len(loads) // 2], objects=len(index),
           equal=torch.equal(back["x"], state["x"]))


def body_cpu_save(a):
    """A checkpoint of one CPU tensor in a.dir, for body_cpu_load."""
    _dcp().save({"x": torch.arange(1024, dtype=torch.float32)}, checkpoint_id=a.dir, no_dist=True)
    result(saved=True)


def body_cpu_load(a):
    """dcp.load of body_cpu_save's CPU tensor in a process that never used CUDA: whether CUDA got
    initialised (stock's FileSystemReader does not initialise it)."""
    back = {"x": torch.zeros(1024)}
    _dcp().load(back, checkpoint_id=a.dir, no_dist=True)
    result(cuda_initialized=torch.cuda.is_initialized(), equal=torch.equal(back["x"], torch.arange(1024.0)))


def body_no_collect(a):
    """With the collector off and CUDA initialised but nothing page-locked: the garbage collections
    run during three saves and loads of a CPU tensor (only explicit gc.collect calls can run)."""
    dcp = _dcp()
    torch.empty(1, device="cuda")
    gc.disable()
    runs = []
    gc.callbacks.append(lambda phase, info: runs.append(info["generation"]) if phase == "start" else None)
    state = {"x": torch.arange(1024, dtype=torch.float32)}
    for i in range(3):
        d = os.path.join(a.dir, str(i))
        dcp.save(state, checkpoint_id=d, no_dist=True)
        dcp.load({"x": torch.zeros(1024)}, checkpoint_id=d, no_dist=True)
    result(collections=runs)


def body_pinned_kept(a):
    """The job's own page-locked block, freed into PyTorch's host cache (a DataLoader's pinned
    batch), then a save and a load of a CPU tensor, then the job's next batch: how many blocks the
    host allocator page-locked in all (stock: the next batch reuses the cached block)."""
    dcp = _dcp()
    batch = torch.empty(8 * MIB, dtype=torch.uint8).pin_memory()
    del batch
    d = os.path.join(a.dir, "ckpt")
    dcp.save({"x": torch.arange(1024, dtype=torch.float32)}, checkpoint_id=d, no_dist=True)
    dcp.load({"x": torch.zeros(1024)}, checkpoint_id=d, no_dist=True)
    batch = torch.empty(8 * MIB, dtype=torch.uint8).pin_memory()
    result(host_allocations=int(torch._C._cuda_hostMemoryStats()["num_host_alloc"]))


def body_no_cycle(a):
    """With the collector off for the whole run: a save that copies (a managed table without views,
    an ordinary CUDA tensor) leaves no staged CPU tensor alive and nothing page-locked once it
    returned, i.e. reference counting alone frees what it staged."""
    gc.disable()
    dcp = _dcp()
    drv = sim_driver()
    n = 16 * MIB
    state = {"table": cuda_from(pattern(n, 3), managed=True), "dense": cuda_from(pattern(n, 4), managed=False)}
    dcp.save(state, checkpoint_id=a.dir, no_dist=True)
    alive = [o for o in gc.get_objects()
             if isinstance(o, torch.Tensor) and o.device.type == "cpu" and o.numel() * o.element_size() == n]
    result(staged_alive=len(alive), pinned_after_save=drv.uvmsim_pinned_bytes(), collections=gc.get_count())


def body_async_marker(a):
    """dcp.async_save of a managed table with a planner of ours (so its state after the inner save
    can be read): whether that inner save set up views, which releases ran inside it, and whether a
    later ordinary save still takes views (the marker does not outlive the async save)."""
    dcp = _dcp()
    from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
    table = cuda_from(pattern(8 * MIB, 5), managed=True)
    releases = []
    try:
        import inspect

        import uvmchunk._auto as auto
        # where the automatic path asks for a release (it then skips it when the checkpoint
        # page-locked nothing: 2.8's async_save stages in pageable memory)
        real = auto._release_quietly

        def spy(device=None, *rest):
            in_inner = any(f.function == "entry" and f.frame.f_locals.get("name") == "save"
                           for f in inspect.stack(0))
            releases.append({"device": device, "in_inner_save": in_inner})
            return real(device, *rest)

        auto._release_quietly = spy
    except ImportError:
        auto = None
    planner = DefaultSavePlanner()
    resp = dcp.async_save({"t": table}, checkpoint_id=os.path.join(a.dir, "async"), planner=planner)
    getattr(resp, "upload_completion", resp).result()
    time.sleep(0.5)  # the done callbacks run just after the future completes
    inner_viewer = planner.__dict__.get("_uvmchunk_auto") is not None
    pending = len(auto._async_pending) if auto and hasattr(auto, "_async_pending") else 0
    async_releases = list(releases)
    v0 = _views()
    dcp.save({"t": table}, checkpoint_id=os.path.join(a.dir, "sync"), no_dist=True)
    back = {"t": torch.zeros(8 * MIB, dtype=torch.uint8)}
    dcp.load(back, checkpoint_id=os.path.join(a.dir, "async"), no_dist=True)
    result(inner_viewer=inner_viewer, releases=async_releases, pending_after=pending, later_views=_views() - v0,
           table_device=table.device.index, equal=torch.equal(back["t"], table.cpu()))


def body_residency(a):
    """Two managed tables with FBGEMM's advice, one then prefetched to device 0: which got a view,
    the 2 MiB blocks migrated to the host during the save, and the bytes saved."""
    dcp = _dcp()
    drv = sim_driver()
    drv.uvmsim_stat.restype = ctypes.c_ulonglong
    expect = {"host": pattern(8 * MIB, 6), "device": pattern(8 * MIB, 7)}
    state = {k: cuda_from(v, managed=True) for k, v in expect.items()}
    # the legacy int form of the driver's prefetch (both CUDA majors export it)
    rc = drv.cuMemPrefetchAsync(ctypes.c_uint64(state["device"].data_ptr()), ctypes.c_size_t(8 * MIB), 0,
                                ctypes.c_void_p(0))
    torch.cuda.synchronize()
    resident = drv.uvmsim_residency(ctypes.c_void_p(state["device"].data_ptr()))
    viewed = {}
    try:
        from uvmchunk import _views
        real = _views.Viewer.view

        def spy(self, t, what):  # which tables the viewer really handed DCP as views
            out = real(self, t, what)
            viewed[next(k for k, v in state.items() if v.data_ptr() == t.data_ptr())] = out is not t
            return out

        _views.Viewer.view = spy
    except ImportError:
        pass
    m0 = drv.uvmsim_stat(b"migrations_to_host")
    dcp.save(state, checkpoint_id=a.dir, no_dist=True)
    migrated = drv.uvmsim_stat(b"migrations_to_host") - m0
    back = {k: torch.zeros(8 * MIB, dtype=torch.uint8) for k in state}
    dcp.load(back, checkpoint_id=a.dir, no_dist=True)
    result(prefetch_rc=rc, resident_before=resident, viewed=viewed, migrations_to_host=int(migrated),
           equal={k: torch.equal(back[k], expect[k]) for k in expect})


def _defining_object(symbol):
    """The path of the object whose definition of `symbol` the global scope binds (dladdr)."""
    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                    ("saddr", ctypes.c_void_p)]
    libc = ctypes.CDLL(None)
    addr = ctypes.cast(getattr(libc, symbol), ctypes.c_void_p).value
    info = DlInfo()
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    return os.path.basename(info.fname.decode()) if libc.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) else None


def body_stacked(a):
    """torch-memory-saver's preload library in LD_PRELOAD beside libuvmchunk (the test sets the
    order): a managed table and an ordinary CUDA tensor (allocated through its cudaMalloc hook,
    outside any region: passed to the runtime) saved and loaded back into CPU tensors and into CUDA
    targets; which object defines cudaMalloc and the library's cudaMemcpyAsync."""
    dcp = _dcp()
    from torch_memory_saver import torch_memory_saver as tms
    tms._ensure_initialized()  # its Python side finds its preload library in LD_PRELOAD and loads it
    in_region = int(tms._impl._binary_wrapper.cdll.tms_get_interesting_region())  # its C side answers
    expect = {"table": pattern(8 * MIB, 8), "dense": pattern(MIB, 9)}
    state = {"table": cuda_from(expect["table"], managed=True), "dense": cuda_from(expect["dense"], managed=False)}
    v0 = _views()
    dcp.save(state, checkpoint_id=a.dir, no_dist=True)
    views = _views() - v0
    back = {k: torch.zeros_like(v) for k, v in expect.items()}
    dcp.load(back, checkpoint_id=a.dir, no_dist=True)
    targets = {k: cuda_from(torch.zeros_like(v), managed=(k == "table")) for k, v in expect.items()}
    dcp.load(targets, checkpoint_id=a.dir, no_dist=True)
    torch.cuda.synchronize()
    result(views=views, saved_equal={k: torch.equal(back[k], expect[k]) for k in expect},
           loaded_equal={k: torch.equal(targets[k].cpu(), expect[k]) for k in expect},
           tms_in_region=in_region, cuda_malloc=_defining_object("cudaMalloc"),
           cuda_memcpy_async=_defining_object("cudaMemcpyAsync"))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("body")
    p.add_argument("--dir", default="/tmp/uvmc-trust")
    args = p.parse_args()
    globals()["body_" + args.body](args)
