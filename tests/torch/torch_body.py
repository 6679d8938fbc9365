"""Test bodies run in a subprocess by the pytest files, with or without LD_PRELOAD=libuvmchunk.so,
on the simulated CUDA runtime (tests/sim). Each prints one line `RESULT <json>` on stdout; the
library's `uvmchunk: stats:` line appears on stderr at exit. Only copies and allocations are
used: no op here launches a kernel (the simulator cannot run one).

usage: python torch_body.py bind|random|launch_env|managed|plain|capture|dcp|dcp_dist|staging|dcp3|planner [--size BYTES] [--dir DIR]
                            [--mode save|async|planner|stock]
"""
import argparse
import ctypes
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
from uvmc_managed import managed_empty as _managed_empty  # noqa: E402  (the harness's allocator)


def result(**kw):
    # One write(2) of one line: torchrun's ranks share the pipe, and print() writes the text and
    # the newline separately, so two ranks' lines could interleave.
    os.write(1, ("RESULT " + json.dumps(kw) + "\n").encode())


def quiet_dcp():
    """torch.distributed.checkpoint, its warnings silenced (a body's stderr holds only what it checks)."""
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    return dcp


def views_taken():
    """uvmchunk.dcp.views_taken(): the views taken so far in this process, on save and on load
    (zeros without the package)."""
    try:
        from uvmchunk.dcp import views_taken as taken
        return taken()
    except ImportError:
        return {"save": 0, "load": 0}


def mapped_libs():
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if "/lib" in line and ".so" in line})


def sim_driver():
    """The simulated driver as loaded in this process (its control API, uvmsim.h)."""
    paths = [p for p in mapped_libs() if os.path.basename(p) == "libcuda.so.1"]
    if not paths:
        return None
    drv = ctypes.CDLL(paths[0])
    if not hasattr(drv, "uvmsim_calls"):
        return None
    drv.uvmsim_calls.restype = ctypes.c_ulonglong
    drv.uvmsim_calls.argtypes = [ctypes.c_char_p]
    drv.uvmsim_pinned_peak.restype = ctypes.c_ulonglong
    drv.uvmsim_pinned_bytes.restype = ctypes.c_ulonglong
    drv.uvmsim_copies.restype = ctypes.c_ulonglong
    return drv


def bound_cudart():
    """The libcudart torch is bound to. On the simulator (UVMC_SIM_RT_DIR set by conftest.sim_env)
    the simulated libcudart.so.13 or .so.12: torch may also map the wheel's own copy privately
    (nothing binds to it), and /proc/self/maps lists them in address order, so pick ours by its
    directory, never the first one found. On a GPU, the one runtime mapped."""
    sim = os.environ.get("UVMC_SIM_RT_DIR") or os.environ.get("UVMC_SIM_DIR")
    rt = [p for p in mapped_libs() if os.path.basename(p).startswith("libcudart.so.")]
    if sim:
        rt = [p for p in rt if os.path.dirname(os.path.realpath(p)) == os.path.realpath(sim)]
    return ctypes.CDLL(rt[0])


def memory_type(t):
    """cudaPointerGetAttributes(t.data_ptr()).type: 1 host, 2 device, 3 managed."""
    lib = bound_cudart()
    buf = (ctypes.c_byte * 256)()  # struct cudaPointerAttributes (88 bytes in CUDA 13): type first
    rc = lib.cudaPointerGetAttributes(buf, ctypes.c_void_p(t.data_ptr()))
    return rc, ctypes.c_int.from_buffer(buf, 0).value


def managed_empty(nbytes):
    """A uint8 CUDA tensor in managed memory with FBGEMM's advice (integration/uvmc_managed.py)."""
    return _managed_empty((nbytes,), torch.uint8)


def pattern(nbytes, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=g)


def cuda_from(cpu, managed):
    """A copy of the uint8 CPU tensor `cpu` (any shape) on the GPU, in managed memory or not."""
    t = managed_empty(cpu.numel()) if managed else torch.empty(cpu.numel(), dtype=torch.uint8, device="cuda")
    t.copy_(cpu.reshape(-1))  # host-to-device copy: no kernel
    torch.cuda.synchronize()
    return t.view(cpu.shape)


def body_bind(a):
    drv = sim_driver()
    before = drv.uvmsim_calls(b"cudaMalloc") if drv else None
    avail, count = torch.cuda.is_available(), torch.cuda.device_count()
    props = torch.cuda.get_device_properties(0)
    t = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    after = drv.uvmsim_calls(b"cudaMalloc") if drv else None
    launch_error = None
    try:
        torch.ones(4, device="cuda")  # a fill kernel: must fail clearly, not crash
        torch.cuda.synchronize()
    except Exception as e:  # torch.AcceleratorError (a RuntimeError)
        launch_error = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    # the failed launch leaves no sticky error: copies still work
    c = pattern(4096, 1)
    t2 = cuda_from(c, managed=False)
    ok_after = torch.equal(t2.cpu(), c)
    libs = mapped_libs()
    result(available=avail, count=count, name=props.name, major=props.major, total=props.total_memory,
           torch=torch.__version__, torch_cuda=torch.version.cuda,
           cudart=[p for p in libs if "libcudart" in p], cuda=[p for p in libs if "libcuda.so" in p],
           cudamalloc_before=before, cudamalloc_after=after, ptr=t.data_ptr(),
           launch_error=launch_error, ok_after_launch=ok_after)


def body_random(a):
    """A random kernel, whose launch code sizes its grid from the device's properties: with the
    default UVMSIM_KERNELS the launch fails with a clear error (a zero property used to kill the
    process with SIGFPE before it got there)."""
    error = None
    try:
        torch.empty(100, device="cuda").uniform_()
        torch.cuda.synchronize()
    except Exception as e:  # torch.AcceleratorError (a RuntimeError)
        error = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    props = torch.cuda.get_device_properties(0)
    result(error=error, multi_processor_count=props.multi_processor_count,
           max_threads_per_multi_processor=props.max_threads_per_multi_processor)


def body_managed(a):
    src = pattern(a.size, 2)
    t = managed_empty(a.size)
    rc, mtype = memory_type(t)
    t.copy_(src)
    torch.cuda.synchronize()
    out = t.to("cpu", non_blocking=True)
    torch.cuda.current_stream().synchronize()
    drv = sim_driver()
    result(equal=torch.equal(out, src), pinned=out.is_pinned(), attr_rc=rc, memory_type=mtype,
           pinned_peak=drv.uvmsim_pinned_peak() if drv else None)


def body_plain(a):
    src = pattern(a.size, 3)
    t = cuda_from(src, managed=False)
    rc, mtype = memory_type(t)
    out = t.to("cpu", non_blocking=True)
    torch.cuda.current_stream().synchronize()
    result(equal=torch.equal(out, src), attr_rc=rc, memory_type=mtype)


def body_capture(a):
    # torch.cuda.CUDAGraph.capture_begin seeds the RNG with a fill kernel, which the simulator
    # cannot run: capture the stream through the runtime itself (the same libcudart torch uses),
    # and issue PyTorch's own copy on it while the capture is active.
    rt = bound_cudart()
    src = pattern(a.size, 4)
    t = cuda_from(src, managed=True)
    dst = torch.empty(a.size, dtype=torch.uint8, pin_memory=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    h = ctypes.c_void_p(s.cuda_stream)
    status, graph = ctypes.c_int(-1), ctypes.c_void_p()
    begin = rt.cudaStreamBeginCapture(h, 0)  # cudaStreamCaptureModeGlobal
    with torch.cuda.stream(s):
        dst.copy_(t, non_blocking=True)  # captured: recorded into the graph, not run
    rt.cudaStreamIsCapturing(h, ctypes.byref(status))
    end = rt.cudaStreamEndCapture(h, ctypes.byref(graph))
    nodes = ctypes.c_size_t(0)
    rt.cudaGraphGetNodes(graph, None, ctypes.byref(nodes))
    rt.cudaGraphDestroy(graph)
    torch.cuda.synchronize()
    captured_untouched = not torch.equal(dst, src)
    dst.copy_(t, non_blocking=True)  # the same copy outside any capture
    torch.cuda.synchronize()
    result(begin=begin, capturing=status.value, end=end, graph_nodes=nodes.value,
           captured_untouched=captured_untouched, equal_after=torch.equal(dst, src))


def dcp_roundtrip(state_src, ckpt_dir):
    import torch.distributed.checkpoint as dcp
    state = {k: cuda_from(v, managed=True) for k, v in state_src.items()}
    dcp.save(state, checkpoint_id=ckpt_dir)
    # load into CPU tensors: the save's copy out of managed memory is then the only large
    # device-to-host copy of the process
    back = {k: torch.zeros_like(v) for k, v in state_src.items()}
    dcp.load(back, checkpoint_id=ckpt_dir)
    return all(torch.equal(back[k], state_src[k]) for k in state_src)


def body_dcp(a):
    import warnings
    warnings.filterwarnings("ignore")
    state = {"table": pattern(a.size, 5), "small": pattern(4096, 6)}
    ok = dcp_roundtrip(state, a.dir)
    drv = sim_driver()
    result(equal=ok, pinned_peak=drv.uvmsim_pinned_peak() if drv else None)


def body_dcp_dist(a):
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed as dist
    dist.init_process_group("gloo")
    torch.cuda.set_device(0)  # two ranks, one (simulated) GPU: gloo, never NCCL
    rank = dist.get_rank()
    state = {f"table_rank{rank}": pattern(a.size, 10 + rank), "small": pattern(4096, 6)}
    ok = dcp_roundtrip(state, a.dir)
    dist.barrier()
    dist.destroy_process_group()
    result(rank=rank, equal=ok)


def body_launch_env(a):
    """One worker of a multi-agent torchrun job: what the launcher's environment gave it (the
    library first in LD_PRELOAD and mapped, UVMCHUNK_CONFIG), its place in the job (the gloo group
    spans every agent's workers), and one managed-table copy that the library splits."""
    import torch.distributed as dist
    dist.init_process_group("gloo")
    torch.cuda.set_device(0)
    world = torch.tensor([1])
    dist.all_reduce(world)  # every worker of every agent takes part
    lib = os.environ.get("UVMC_LIB", "")
    preload = os.environ.get("LD_PRELOAD", "").replace(":", " ").split()
    src = pattern(a.size, 70 + dist.get_rank())
    t = managed_empty(a.size)
    t.copy_(src)
    torch.cuda.synchronize()
    out = t.to("cpu", non_blocking=True)
    torch.cuda.current_stream().synchronize()
    dist.barrier()
    result(rank=dist.get_rank(), world=dist.get_world_size(), all_reduce=int(world.item()),
           node=int(os.environ["GROUP_RANK"]), local_rank=int(os.environ["LOCAL_RANK"]),
           preload_first=os.path.realpath(preload[0]) if preload else None, lib=os.path.realpath(lib) if lib else None,
           lib_mapped=any(os.path.basename(p) == "libuvmchunk.so" for p in mapped_libs()),
           config=os.environ.get("UVMCHUNK_CONFIG"), equal=torch.equal(out, src))
    dist.destroy_process_group()


def body_staging(a):
    """A large pinned tensor used as an ordinary staging buffer (issue: lazy pinning keeps every
    promise of pinned memory): filled on the CPU, copied to the device without waiting, back."""
    drv = sim_driver()
    drv.uvmsim_device_access.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    src = pattern(a.size, 21)
    p = torch.empty(a.size, dtype=torch.uint8, pin_memory=True)
    locked_before_use = drv.uvmsim_pinned_bytes()
    p.copy_(src)
    pinned = p.is_pinned()
    d = torch.empty(a.size, dtype=torch.uint8, device="cuda")
    drv.uvmsim_set_op_delay_us(200000)
    d.copy_(p, non_blocking=True)
    returned_early = not torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    drv.uvmsim_set_op_delay_us(0)
    access = drv.uvmsim_device_access(p.data_ptr(), a.size)
    back = d.cpu()
    result(is_pinned=pinned, returned_before_landing=returned_early, device_access=access,
           equal=torch.equal(back, src), locked_before_use=locked_before_use,
           locked_after=drv.uvmsim_pinned_bytes())


def _clear_hwm():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _status_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def body_dcp3(a):
    """dcp.save (or async_save with a pinned DefaultStager) of three managed tables: peak resident
    host memory of the save above the state before it, page-locked bytes, reload bitwise equal."""
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    drv = sim_driver()
    sizes = [a.size, a.size * 3 // 2, a.size * 2]
    src = {f"table{i}": pattern(n, 30 + i) for i, n in enumerate(sizes)}
    state = {k: cuda_from(v, managed=True) for k, v in src.items()}
    del src  # the CPU copies would hide the save's own memory; regenerated for the check
    drv.uvmsim_reset()
    _clear_hwm()
    rss0 = _status_kib("VmRSS")
    if a.mode == "async":
        try:
            from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
        except ImportError:  # torch 2.8: the writer is the stager, pinned when it keeps its staged copy
            from torch.distributed.checkpoint import FileSystemWriter
            writer = FileSystemWriter(a.dir, cache_staged_state_dict=True)
            dcp.async_save(state, storage_writer=writer).result()
        else:
            stager = DefaultStager(StagingOptions(use_pinned_memory=True, use_shared_memory=False,
                                                  use_async_staging=False, use_non_blocking_copy=True))
            resp = dcp.async_save(state, checkpoint_id=a.dir, async_stager=stager)
            fut = getattr(resp, "upload_completion", resp)
            fut.result()
            stager.close()
    else:
        dcp.save(state, checkpoint_id=a.dir)
    peak_kib = _status_kib("VmHWM") - rss0
    kept_kib = _status_kib("VmRSS") - rss0  # what PyTorch's host cache still holds
    locked_peak = drv.uvmsim_pinned_peak()
    locked_after = drv.uvmsim_pinned_bytes()
    torch.cuda.synchronize()
    back = {f"table{i}": torch.zeros(n, dtype=torch.uint8) for i, n in enumerate(sizes)}
    dcp.load(back, checkpoint_id=a.dir)
    equal = all(torch.equal(back[f"table{i}"], pattern(n, 30 + i)) for i, n in enumerate(sizes))
    after = drv.uvmsim_pinned_bytes()
    del back
    torch._C._host_emptyCache()
    result(equal=equal, tables_bytes=sum(sizes), peak_extra_bytes=peak_kib * 1024, locked_peak=locked_peak,
           kept_after_save_bytes=kept_kib * 1024, kept_after_empty_cache_bytes=(_status_kib("VmRSS") - rss0) * 1024,
           locked_after_save=locked_after, locked_after_load=after,
           locked_after_empty_cache=drv.uvmsim_pinned_bytes())


class _MemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


def unset_cpu_preference(t):
    """Managed memory without FBGEMM's advice (cudaMemAdviseUnsetPreferredLocation). CUDA 13's
    cudaMemAdvise takes a cudaMemLocation, CUDA 12's a device number."""
    rt = bound_cudart()
    n = t.numel() * t.element_size()
    if torch.version.cuda.startswith("12."):
        rt.cudaMemAdvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
        rc = rt.cudaMemAdvise(ctypes.c_void_p(t.data_ptr()), n, 4, 0)
    else:
        rt.cudaMemAdvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, _MemLocation]
        rc = rt.cudaMemAdvise(ctypes.c_void_p(t.data_ptr()), n, 4, _MemLocation(2, 0))
    assert rc == 0, rc


ROW = 512  # bytes per row of the 2-D tables (an embedding table's row: 128 float32)


def sharded_from(t, rank, world):
    """A ShardedTensor of `world` row blocks shaped like `t`, whose local shard (rank's) is `t`."""
    from torch.distributed._shard.sharded_tensor import Shard, init_from_local_shards
    return init_from_local_shards([Shard.from_tensor_and_offsets(t, [rank * t.shape[0], 0], rank)],
                                  world * t.shape[0], t.shape[1])


def body_planner(a):
    """dcp.save / load of three managed tables (FBGEMM's advice), an ordinary CUDA tensor, a view
    with a storage offset and a table without CPU preference; --mode: planner
    (ZeroCopy planners), stock (DCP's own), async (dcp.async_save with the planner). Peak resident
    host memory of the save above the state before it; which tensors the planner took as views."""
    import warnings
    warnings.filterwarnings("ignore")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import torch.distributed.checkpoint as dcp
    from uvmchunk.dcp import ZeroCopyLoadPlanner, ZeroCopySavePlanner
    drv = sim_driver()
    rank = 0
    if "RANK" in os.environ:  # under torchrun: gloo, both ranks on the one (simulated) GPU
        import torch.distributed as dist
        dist.init_process_group("gloo")
        torch.cuda.set_device(0)
        rank = dist.get_rank()
    sizes = [a.size, a.size * 3 // 2, a.size * 2]
    expect = {f"table{i}": pattern(n, 40 + i + 10 * rank) for i, n in enumerate(sizes)}
    state = {k: cuda_from(v, managed=True) for k, v in expect.items()}
    expect["dense"] = pattern(1 << 20, 50)
    state["dense"] = cuda_from(expect["dense"], managed=False)
    base = cuda_from(pattern(3 << 20, 51), managed=True)
    state["offset_view"] = base[4096:4096 + (1 << 20)]  # contiguous, storage offset 4096
    expect["offset_view"] = base[4096:4096 + (1 << 20)].cpu()
    # A strided view is never taken as a view (DCP's copy of one needs a kernel, which the
    # simulator cannot run: checked on the planner's test alone).
    grid = cuda_from(pattern(1 << 20, 52), managed=True).view(1024, 1024)
    from uvmchunk._views import Viewer as _Viewer
    strided_taken = _Viewer(False).eligible(grid[::2])
    expect["no_cpu_pref"] = pattern(2 << 20, 53)
    state["no_cpu_pref"] = cuda_from(expect["no_cpu_pref"], managed=True)
    unset_cpu_preference(state["no_cpu_pref"])
    # table0 rewritten on a side stream just before the save, with no synchronisation by the user
    expect["table0"] = pattern(sizes[0], 60)
    side = torch.cuda.Stream()
    # resident memory before the side copy: the simulator stages its pageable source (64 MiB) until
    # it lands, during the save; what is kept after the save is measured against this
    rss_before = _status_kib("VmRSS")
    drv.uvmsim_set_op_delay_us(100000)
    with torch.cuda.stream(side):
        state["table0"].copy_(expect["table0"], non_blocking=True)
    if a.mode == "async":  # async_save stages on its own stream at once: the caller must sync first
        torch.cuda.synchronize()
    if rank or "RANK" in os.environ:  # each rank saves its own tensors under its own names
        expect = {f"r{rank}.{k}": v for k, v in expect.items()}
        state = {f"r{rank}.{k}": v for k, v in state.items()}
    if a.dtensor:  # one DTensor sharded over the ranks, each local shard a managed table
        # Rows of 512 bytes, like an embedding table: DTensor's own offset computation allocates
        # 8 bytes per row of the local shard (torch.arange in _get_shard_size_and_offsets), so a
        # 1-D byte tensor would cost 8x its size in transient host memory whatever the planner.
        from torch.distributed.tensor import DTensor, Shard, init_device_mesh
        mesh = init_device_mesh("cuda", (dist.get_world_size(),))
        shard = pattern(a.size // 2, 70 + rank).view(-1, ROW)
        state["dtensor"] = DTensor.from_local(cuda_from(shard, managed=True), mesh, [Shard(0)], run_check=False)
        expect["dtensor"] = shard
        # and a ShardedTensor whose local shard is a managed table
        piece = pattern(a.size // 4, 80 + rank).view(-1, ROW)
        state["sharded"] = sharded_from(cuda_from(piece, managed=True), rank, dist.get_world_size())
        expect["sharded"] = piece
    # auto, auto_async: no planner argument; the package's automatic views (when installed, the
    # library loaded and dcp_views on) do what the planners do
    planner = ZeroCopySavePlanner() if a.mode in ("planner", "async") else None
    _clear_hwm()
    rss0 = _status_kib("VmRSS")
    if a.mode in ("async", "auto_async"):
        resp = dcp.async_save(state, checkpoint_id=a.dir, planner=planner)
        getattr(resp, "upload_completion", resp).result()
        import time
        time.sleep(1)  # the upload thread drops the staged copy just after the future completes
    else:
        dcp.save(state, checkpoint_id=a.dir, planner=planner)
    peak_kib = _status_kib("VmHWM") - rss0
    kept_kib = _status_kib("VmRSS") - rss_before  # what is still held once save returned
    locked_after_save = drv.uvmsim_pinned_bytes()
    drv.uvmsim_set_op_delay_us(0)
    torch.cuda.synchronize()
    # reload with the stock reader into CPU tensors, and with the planner into managed targets
    def fresh(k, v, managed):
        t = cuda_from(torch.zeros_like(v), managed)  # zeroed by a host-to-device copy, no kernel
        if k == "dtensor":
            from torch.distributed.tensor import DTensor
            return DTensor.from_local(t, state["dtensor"].device_mesh, state["dtensor"].placements, run_check=False)
        if k == "sharded":
            return sharded_from(t, rank, dist.get_world_size())
        return t

    def local(t):
        if hasattr(t, "to_local"):
            return t.to_local()
        if hasattr(t, "local_shards"):
            return t.local_shards()[0].tensor
        return t

    back = {k: fresh(k, v, True) if k in ("dtensor", "sharded") else torch.zeros_like(v) for k, v in expect.items()}
    dcp.load(back, checkpoint_id=a.dir)
    stock_equal = {k: torch.equal(local(back[k]).cpu(), expect[k]) for k in expect}
    targets = {k: fresh(k, v, not k.endswith("dense")) for k, v in expect.items()}
    auto = a.mode.startswith("auto")
    from uvmchunk.dcp import views_taken
    load_views0 = views_taken()["load"]
    lp = None if auto else ZeroCopyLoadPlanner()
    dcp.load(targets, checkpoint_id=a.dir, planner=lp)
    torch.cuda.synchronize()
    planner_equal = {k: torch.equal(local(targets[k]).cpu(), expect[k]) for k in expect}
    if "RANK" in os.environ:
        import torch.distributed as dist
        dist.barrier()
        dist.destroy_process_group()
    result(rank=rank, mode=a.mode, peak_extra_bytes=peak_kib * 1024, tables_bytes=sum(sizes),
           kept_after_save_bytes=kept_kib * 1024, locked_after_save=locked_after_save,
           save_views=planner.zero_copy.views if planner else views_taken()["save"],
           load_views=lp.zero_copy.views if lp else views_taken()["load"] - load_views0,
           stock_equal=stock_equal, planner_equal=planner_equal, locked_peak=drv.uvmsim_pinned_peak(),
           strided_taken=strided_taken)


def body_planner_edges(a):
    """What the save planner must not take as a view, in one process: conjugate and negative views
    (the raw bytes lack the bit), a second name for the same table (tied weights: safetensors refuses
    two tensors on one memory); and a planner of the older set_up_planner signature under the mixin.
    Both tied names reload equal. --mode no-runtime: the planner finds no runtime."""
    import warnings
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
    from uvmchunk.dcp import ZeroCopySaveMixin, ZeroCopySavePlanner
    from uvmchunk._cuda import Runtime as _Runtime
    from uvmchunk._views import Viewer as _Viewer
    if a.mode == "no-runtime":
        _Runtime.probe = "cudaNoSuchFunction"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = cuda_from(pattern(4 << 20, 90).view(-1, ROW), managed=True)
        z = cuda_from(pattern(1 << 20, 91), managed=True).view(torch.complex64)
        f = cuda_from(pattern(1 << 20, 92), managed=True).view(torch.float32)
        v = _Viewer(False)
        taken = {"plain": v.eligible(f), "conj": v.eligible(z.conj()), "neg": v.eligible(torch._neg_view(f))}

        class Legacy(DefaultSavePlanner):  # the signature before storage_meta (DCP warns, then calls it so)
            def set_up_planner(self, state_dict, is_coordinator):
                super().set_up_planner(state_dict, None, is_coordinator)

        class LegacyZeroCopy(ZeroCopySaveMixin, Legacy):
            pass

        views = {}
        for name, planner in (("tied", ZeroCopySavePlanner()), ("legacy_mixin", LegacyZeroCopy())):
            path = os.path.join(a.dir, name)
            dcp.save({"embed": table, "lm_head": table}, checkpoint_id=path, planner=planner, no_dist=True)
            back = {k: torch.zeros(table.shape, dtype=table.dtype) for k in ("embed", "lm_head")}
            dcp.load(back, checkpoint_id=path, no_dist=True)
            assert all(torch.equal(t, table.cpu()) for t in back.values()), name
            views[name] = planner.zero_copy.views
    result(taken=taken, views=views,
           warnings=[str(w.message) for w in caught if str(w.message).startswith("uvmchunk:")])
    # the package's own refusals are one uvmchunk: line on stderr each (the test counts them), never a
    # Python warning


def body_auto_edges(a):
    """The automatic path's choices, in one process with the library and the package: a planner of
    the user's own derived from DefaultSavePlanner gets views; one that overrides resolve_data is
    left untouched; a small view of a table listed (and resolved) before the table leaves the table
    on the view path; a pinned tensor in use survives the release after a save; keyword arguments
    reach the patched methods; a load planner overriding commit_tensor, and a storage writer that is
    not PyTorch's FileSystemWriter, get no views."""
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
    from uvmchunk.dcp import views_taken

    class Own(DefaultSavePlanner):
        pass

    class Overriding(DefaultSavePlanner):
        def resolve_data(self, write_item):
            return super().resolve_data(write_item)

    table = cuda_from(pattern(8 << 20, 95).view(-1, ROW), managed=True)
    out = {}
    for name, planner in (("own_subclass_views", Own()), ("overriding_views", Overriding()),
                          ("overriding_again", Overriding())):
        before = views_taken()["save"]
        dcp.save({"t": table}, checkpoint_id=os.path.join(a.dir, name), planner=planner, no_dist=True)
        out[name] = views_taken()["save"] - before
    # the small view first in the state dict (DCP resolves in plan order)
    small = table[:16]
    viewed = {}

    planner = DefaultSavePlanner()
    orig = type(planner).resolve_data

    def spy(self, write_item):  # what DCP receives per key (not an override: set on the instance)
        obj = orig(self, write_item)
        viewed[write_item.index.fqn] = obj.device.type == "cpu"
        return obj

    planner.resolve_data = spy.__get__(planner)
    path = os.path.join(a.dir, "small_first")
    pinned = torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True)
    pinned.copy_(pattern(1 << 20, 96))
    dcp.save({"a_small_view": small, "table": table}, checkpoint_id=path, planner=planner, no_dist=True)
    back = {"a_small_view": torch.zeros(small.shape, dtype=small.dtype),
            "table": torch.zeros(table.shape, dtype=table.dtype)}
    dcp.load(back, checkpoint_id=path, no_dist=True)
    reload_equal = torch.equal(back["table"], table.cpu()) and torch.equal(back["a_small_view"], small.cpu())
    # PyTorch's keyword names reach the patched methods; a load planner whose commit_tensor expects
    # what resolve_tensor returned, and a storage other than PyTorch's file system, get no views
    from torch.distributed.checkpoint import FileSystemWriter, StorageWriter
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

    class Keywords(DefaultSavePlanner):
        def resolve_data(self, write_item):
            return super().resolve_data(write_item=write_item)

    class Committing(DefaultLoadPlanner):
        def commit_tensor(self, read_item, tensor):
            super().commit_tensor(read_item, tensor)

    fs = FileSystemWriter(os.path.join(a.dir, "other_storage"))

    class OtherStorage(StorageWriter):  # delegates everything to a FileSystemWriter
        def __getattribute__(self, name):
            return getattr(fs, name) if not name.startswith("__") else object.__getattribute__(self, name)

    for m in StorageWriter.__abstractmethods__:
        setattr(OtherStorage, m, None)
    OtherStorage.__abstractmethods__ = frozenset()
    before = views_taken()
    dcp.save({"t": table}, checkpoint_id=os.path.join(a.dir, "keywords"), planner=Keywords(), no_dist=True)
    back = {"t": cuda_from(torch.zeros(table.shape, dtype=table.dtype), managed=True)}
    dcp.load(back, checkpoint_id=os.path.join(a.dir, "keywords"), planner=Committing(), no_dist=True)
    commit_equal = torch.equal(back["t"].cpu(), table.cpu())
    dcp.save({"t": table}, storage_writer=OtherStorage(), no_dist=True)
    after = views_taken()
    result(own_subclass_views=out["own_subclass_views"], overriding_views=out["overriding_views"] + out["overriding_again"],
           small_first=viewed, reload_equal=reload_equal,
           pinned_in_use_survives=pinned.is_pinned() and torch.equal(pinned, pattern(1 << 20, 96)),
           keywords_views=after["save"] - before["save"], committing_views=after["load"] - before["load"],
           commit_equal=commit_equal)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("body")
    p.add_argument("--size", type=int, default=200 << 20)
    p.add_argument("--dir")
    p.add_argument("--mode", default="save")
    p.add_argument("--dtensor", action="store_true", help="planner body under torchrun: add a DTensor")
    a = p.parse_args()
    globals()["body_" + a.body](a)


if __name__ == "__main__":
    main()
