"""Bodies of tests/torch/test_load.py: dcp.load into managed tables through direct reads
(python/uvmchunk/_reads.py), on the simulated CUDA runtime. Each prints one `RESULT <json>` line.
No op launches a kernel: tables are filled and compared through host-to-device / device-to-host
copies.

usage: python load_body.py big|reshard|errors|world --dir DIR [--size BYTES] [--mode stock|auto|planner] [--chunk BYTES]
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_body import _clear_hwm, _status_kib, cuda_from, pattern, result, sim_driver  # noqa: E402

ROW = 512  # bytes per row: an embedding row of 128 float32

torch_loads = [0]


def count_torch_load():
    """Counts torch.load calls (FileSystemReader.read_data's whole-item read calls torch.load once
    per tensor item, through the torch module's attribute)."""
    orig = torch.load

    def counted(*args, **kwargs):
        torch_loads[0] += 1
        return orig(*args, **kwargs)

    torch.load = counted


def planner_for(mode):
    if mode == "planner":
        from uvmchunk.dcp import ZeroCopyLoadPlanner
        return ZeroCopyLoadPlanner()
    return None


def direct_totals():
    try:
        from uvmchunk import _accounting
    except ImportError:
        return {}
    return _accounting.totals().get("dcp.load", {})


def set_chunk(a):
    if a.chunk:
        from uvmchunk import _streams
        _streams.chunk_size = a.chunk


def body_big(a):
    """One managed table of --size bytes saved, then loaded into a fresh managed table: the load's
    peak resident memory above the state before it (VmHWM reset just before dcp.load), its time,
    torch.load calls, bitwise equality."""
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    set_chunk(a)
    src = pattern(a.size, 7)
    table = cuda_from(src.view(-1, ROW), managed=True)
    del src
    dcp.save({"t": table}, checkpoint_id=a.dir)
    del table
    back = cuda_from(torch.zeros(a.size // ROW, ROW, dtype=torch.uint8), managed=True)
    count_torch_load()
    torch._C._host_emptyCache()
    _clear_hwm()
    rss0 = _status_kib("VmRSS")
    t0 = time.monotonic()
    dcp.load({"t": back}, checkpoint_id=a.dir, planner=planner_for(a.mode))
    seconds = time.monotonic() - t0
    peak = (_status_kib("VmHWM") - rss0) * 1024
    equal = torch.equal(back.cpu().view(-1), pattern(a.size, 7))
    from uvmchunk.dcp import views_taken
    result(equal=equal, peak_extra_bytes=peak, seconds=seconds, torch_loads=torch_loads[0],
           load_views=views_taken()["load"], table_bytes=a.size, **{k: direct_totals().get(k, 0)
                                                                     for k in ("direct_read_bytes", "bounce_bytes")})


def _single_process_group():
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())


def _sharded(full, dim, parts):
    """A ShardedTensor shaped like `full` (a CPU tensor), cut into `parts` pieces along `dim`, all
    local to this one rank, each piece a managed table holding its part of `full` (zeros when
    zero=True)."""
    from torch.distributed._shard.sharded_tensor import Shard, init_from_local_shards
    shards, start = [], 0
    n = full.shape[dim]
    for i in range(parts):
        length = n // parts + (1 if i < n % parts else 0)
        piece = full.narrow(dim, start, length).contiguous()
        t = cuda_from(piece.view(torch.uint8).reshape(-1), managed=True).view(piece.dtype).view(piece.shape)
        offsets = [0] * full.dim()
        offsets[dim] = start
        shards.append(Shard.from_tensor_and_offsets(t, offsets, 0))
        start += length
    return init_from_local_shards(shards, *full.shape)


def _managed_like(full):
    flat = torch.zeros(full.numel() * full.element_size(), dtype=torch.uint8)
    return cuda_from(flat, managed=True).view(full.dtype).view(full.shape)


def _gather(obj):
    """The tensor `obj` holds, on the CPU (a ShardedTensor's local shards put back in place)."""
    if isinstance(obj, torch.Tensor) and not hasattr(obj, "local_shards"):
        return obj.cpu()
    out = torch.zeros(obj.size(), dtype=obj.dtype)
    for s in obj.local_shards():
        region = out
        for d, (o, n) in enumerate(zip(s.metadata.shard_offsets, s.metadata.shard_sizes)):
            region = region.narrow(d, o, n)
        region.copy_(s.tensor.cpu())
    return out


def body_reshard(a):
    """Saves full tensors and tensors cut in pieces (a ShardedTensor whose pieces are all local to
    one rank: the layout two or three ranks would save), loads each into another layout, and
    reports per case: bitwise equal, torch.load calls, direct and bounce bytes."""
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    from uvmchunk import _accounting, _reads
    set_chunk(a)
    if a.direct_run is not None:
        _reads.DIRECT_RUN = a.direct_run
    _single_process_group()
    count_torch_load()
    g = torch.Generator().manual_seed(3)
    two = torch.randn(96, 256, generator=g)          # 96 KiB rows x 1 KiB
    three = torch.randn(6, 40, 64, generator=g)      # a narrow on an inner dimension
    # name: (tensor, saved layout, loaded layout); a layout is None (one tensor) or (dim, pieces)
    cases = {
        "table_to_rows": (two, None, (0, 2)),
        "table_to_cols": (two, None, (1, 2)),
        "rows_to_table": (two, (0, 2), None),
        "rows2_to_rows3": (two, (0, 2), (0, 3)),
        "inner_dim1": (three, None, (1, 3)),
        "inner_dim2": (three, None, (2, 2)),
        "rows_to_cols3d": (three, (0, 2), (2, 2)),
    }
    out = {}
    for name, (full, saved, loaded) in cases.items():
        path = os.path.join(a.dir, name)
        obj = _managed_like(full) if saved is None else _sharded(full, *saved)
        if saved is None:
            obj.copy_(full)  # host-to-device: no kernel
        dcp.save({"x": obj}, checkpoint_id=path)
        target = _managed_like(full) if loaded is None else _sharded(torch.zeros_like(full), *loaded)
        before = torch_loads[0]
        call_before = dict(direct_totals())
        dcp.load({"x": target}, checkpoint_id=path, planner=planner_for(a.mode))
        after = direct_totals()
        back = _gather(target)
        out[name] = dict(equal=torch.equal(back.view(torch.uint8), full.view(torch.uint8)),
                         torch_loads=torch_loads[0] - before,
                         **{k: after.get(k, 0) - call_before.get(k, 0) for k in ("direct_read_bytes", "bounce_bytes")})
    # a dtype other than the stored one: PyTorch's path (a converting copy), said once
    path = os.path.join(a.dir, "dtype")
    dcp.save({"x": _managed_like(two).copy_(two)}, checkpoint_id=path)
    half = _managed_like(two.half())
    before = torch_loads[0]
    dcp.load({"x": half}, checkpoint_id=path, planner=planner_for(a.mode))
    out["dtype"] = dict(equal=torch.equal(half.cpu(), two.half()), torch_loads=torch_loads[0] - before)
    result(cases=out, accounting=_accounting.totals().get("dcp.load", {}))


def body_errors(a):
    """A corrupt slice (the item's first bytes overwritten) and a truncated file: what dcp.load
    raises, the failure's type and message (CheckpointException carries each rank's). An intact
    file loaded while other bytes for the table are still queued on the caller's stream: the
    load's bytes are the ones left."""
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader
    count_torch_load()
    src = pattern(4 << 20, 11)
    out = {}
    for case in ("corrupt", "truncated", "intact"):
        path = os.path.join(a.dir, case)
        dcp.save({"t": cuda_from(src.view(-1, ROW), managed=True)}, checkpoint_id=path)
        md = FileSystemReader(path).read_metadata()
        (info,) = [v for v in md.storage_data.values()]
        file = os.path.join(path, info.relative_path)
        if case == "corrupt":
            with open(file, "r+b") as f:
                f.seek(info.offset)
                f.write(b"\xa5" * 256)
        elif case == "truncated":
            os.truncate(file, info.offset + info.length // 2)
        back = cuda_from(torch.zeros(src.numel() // ROW, ROW, dtype=torch.uint8), managed=True)
        before = torch_loads[0]
        if case == "intact":
            # stream order: other bytes still queued for the table on the caller's stream (the
            # simulator holds each operation 100 ms) land before the load's, as under stock DCP
            drv = sim_driver()
            drv.uvmsim_set_op_delay_us(100000)
            back.copy_(pattern(src.numel(), 12).view(back.shape), non_blocking=True)
        try:
            dcp.load({"t": back}, checkpoint_id=path, planner=planner_for(a.mode))
            if case == "intact":
                drv.uvmsim_set_op_delay_us(0)
            err = None
        except BaseException as e:  # noqa: BLE001  (DCP's CheckpointException is a BaseException)
            # failures: rank -> (exception, traceback) (torch/distributed/checkpoint/utils.py)
            inner = list(getattr(e, "failures", {}).values())
            first = inner[0][0] if inner else e
            err = {"outer": type(e).__name__, "type": type(first).__name__, "message": str(first)[:300]}
        out[case] = dict(error=err, torch_loads=torch_loads[0] - before,
                         equal=torch.equal(back.cpu().view(-1), src) if err is None else None)
    result(cases=out)


def body_world(a):
    """A new world size. --mode save2 (under torchrun x2): each rank saves its row block of a
    managed ShardedTensor (rows of 512 bytes, --size bytes per rank); load1 (one process): loads
    that checkpoint into one managed table; save1 (one process) saves one managed table; load2
    (under torchrun x2): loads it into each rank's row block. Per rank: bitwise equal, torch.load
    calls, bytes read directly."""
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed._shard.sharded_tensor import Shard, init_from_local_shards
    count_torch_load()
    rows = a.size // ROW  # per rank of two
    full = pattern(2 * a.size, 31).view(2 * rows, ROW)
    if a.mode in ("save2", "load2"):
        dist.init_process_group("gloo")
        torch.cuda.set_device(0)
    else:
        _single_process_group()
    rank = dist.get_rank()

    def block(content):
        t = cuda_from(content.contiguous(), managed=True)
        return init_from_local_shards([Shard.from_tensor_and_offsets(t, [rank * rows, 0], rank)], 2 * rows, ROW)
    equal, out = None, {}
    if a.mode == "save2":
        dcp.save({"emb": block(full[rank * rows:(rank + 1) * rows])}, checkpoint_id=a.dir)
    elif a.mode == "save1":
        dcp.save({"emb": cuda_from(full, managed=True)}, checkpoint_id=a.dir)
    else:
        target = (cuda_from(torch.zeros_like(full), managed=True) if a.mode == "load1"
                  else block(torch.zeros(rows, ROW, dtype=torch.uint8)))
        dcp.load({"emb": target}, checkpoint_id=a.dir)
        mine = target.cpu() if a.mode == "load1" else target.local_shards()[0].tensor.cpu()
        equal = torch.equal(mine, full if a.mode == "load1" else full[rank * rows:(rank + 1) * rows])
        out = {k: direct_totals().get(k, 0) for k in ("direct_read_bytes", "bounce_bytes")}
    result(rank=rank, equal=equal, torch_loads=torch_loads[0], **out)
    if a.mode in ("save2", "load2"):
        dist.barrier()
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("body")
    p.add_argument("--size", type=int, default=64 << 20)
    p.add_argument("--dir", required=True)
    p.add_argument("--mode", default="auto")
    p.add_argument("--chunk", type=int, default=0)
    p.add_argument("--direct-run", type=int, default=None)
    a = p.parse_args()
    globals()["body_" + a.body](a)


if __name__ == "__main__":
    main()
