"""torchrec_job.py: the reported stack as a job, one torchrun rank: TorchRec's EmbeddingBagCollection
sharded by DistributedModelParallel over FBGEMM's fused_uvm_caching and fused_uvm kernels (tables in
managed memory that FBGEMM allocates: preferred location CPU, accessed by the device), fused
EXACT_ROWWISE_ADAGRAD, saved (model and optimizer state) with torch.distributed.checkpoint and loaded
back into zeroed shards, compared bitwise. Run by integration/torchrec.sh and, on the simulator, by
tests/torch/test_torchrec.py (through torchrec_body.py), under `torchrun --nproc_per_node=2` (gloo,
as users run it: each rank on its own device, cuda:LOCAL_RANK, torch.cuda.set_device(LOCAL_RANK),
TorchRec's local_size LOCAL_WORLD_SIZE; the simulator has eight devices, tests/sim/README.md; on a
machine with one GPU both ranks share it).

On a GPU the tables hold what their real initialisation wrote, and --train-steps steps of training
(forward, backward, the fused optimizer) run before each of two saves, so the cache is dirty and
flushed by state_dict() as in training; the second checkpoint is loaded and compared with the state it
saved. On the simulated runtime (UVMSIM_KERNELS=noop: no device code runs) there is no training: the
contents are written through the CPU (FBGEMM's uvm_to_cpu alias of each table, host-to-device copies
for the optimizer state), a pattern per table and rank, saved once and loaded.

Each rank prints one line `RESULT <json>` per output kind: ShardedTensor, then DTensor
(output_dtensor=True: TorchRec's LocalShardsWrapper, whose local_shards() are plain views).

usage: torchrec_job.py --mode stock|preload|planner|auto --dir DIR [--outputs sharded,dtensor]
                       [--scale N] [--train-steps N] [--async-save]
  stock, preload, auto: dcp.save / dcp.load without a planner (whether the library is preloaded is
  the launcher's business: uvmchunk-run); planner: uvmchunk.dcp's ZeroCopySavePlanner /
  ZeroCopyLoadPlanner. --scale multiplies every table's rows (default 1: tables of 48, 40, 16 and
  6 MiB). --async-save: after the load, a dcp.async_save of the same state, loaded back and
  compared, with its peak extra anonymous memory (under uvmchunk-run the managed tables above
  async_memory_budget spill to a file).
"""
import argparse
import ctypes
import json
import os
import sys
import time
import warnings
import zlib

import torch
import torch.distributed as dist

MIB = 1 << 20
# name: (rows, dim, sharding, compute kernel). Four shapes, every sharding x kernel pair; the two
# large table-wise tables sit on different ranks (48 and 40 MiB at scale 1: each rank's largest local
# table); the row-wise ones are split in half across the ranks.
TABLES = {
    "t_big0": (98304, 128, "table_wise", "fused_uvm_caching"),
    "t_big1": (40960, 256, "table_wise", "fused_uvm"),
    "t_rows": (131072, 32, "row_wise", "fused_uvm_caching"),
    "t_small": (24576, 64, "row_wise", "fused_uvm"),
}
TABLE_RANK = {"t_big0": 0, "t_big1": 1}


def result(**kw):
    os.write(1, ("RESULT " + json.dumps(kw) + "\n").encode())  # one write: ranks share the pipe


def status_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return -1


def clear_hwm():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def sim_driver():
    """The simulated driver's control API (tests/sim/uvmsim.h), or None on a real GPU."""
    with open("/proc/self/maps") as f:
        paths = sorted({ln.split()[-1] for ln in f if ln.rstrip().endswith("/libcuda.so.1")})
    for p in paths:
        drv = ctypes.CDLL(p)
        if hasattr(drv, "uvmsim_pinned_peak"):
            for fn in ("uvmsim_pinned_peak", "uvmsim_pinned_bytes", "uvmsim_kernels_skipped"):
                getattr(drv, fn).restype = ctypes.c_ulonglong
            drv.uvmsim_kernels_skipped.argtypes = [ctypes.c_char_p]
            return drv
    return None


def runtime():
    """The CUDA runtime PyTorch is bound to: the global scope (the preloaded simulator, or the GPU's)."""
    rt = ctypes.CDLL(None)
    rt.cudaMemRangeGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    rt.cudaPointerGetAttributes.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return rt


def fbgemm_advice(rt, t):
    """[memory type, preferred location, accessed-by devices] of a tensor's range as the runtime
    answers (cudaPointerGetAttributes; cudaMemRangeGetAttribute, the driver's cuMemRangeGetAttribute):
    FBGEMM's tables read [3 (managed), -1 (cudaCpuDeviceId), [the rank's device]]."""
    n = t.numel() * t.element_size()
    attrs = (ctypes.c_byte * 256)()  # struct cudaPointerAttributes: the type comes first
    rc1 = rt.cudaPointerGetAttributes(attrs, ctypes.c_void_p(t.data_ptr()))
    pref = ctypes.c_int(99)
    rc2 = rt.cudaMemRangeGetAttribute(ctypes.byref(pref), 4, 2, ctypes.c_void_p(t.data_ptr()), n)
    acc = (ctypes.c_int * 4)(99, 99, 99, 99)
    rc3 = rt.cudaMemRangeGetAttribute(acc, 16, 3, ctypes.c_void_p(t.data_ptr()), n)
    if rc1 or rc2 or rc3:
        return ["error", rc1, rc2, rc3]
    return [ctypes.c_int.from_buffer(attrs, 0).value, pref.value, [d for d in acc if d >= 0]]


def local_placement():
    """(this rank's device index, ranks per node for TorchRec's plan): cuda:LOCAL_RANK among
    LOCAL_WORLD_SIZE, as users run TorchRec; with fewer devices than local ranks (one GPU), every rank
    on device 0 and a local size of 1."""
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if torch.cuda.device_count() < local_world:
        return 0, 1
    return int(os.environ.get("LOCAL_RANK", "0")), local_world


def build(rank, world, output_dtensor, scale):
    """DistributedModelParallel over an EmbeddingBagCollection of TABLES, each with its sharding and
    compute kernel, fused EXACT_ROWWISE_ADAGRAD, on this rank's device (torch.cuda.set_device)."""
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.sharding_plan import construct_module_sharding_plan, row_wise, table_wise
    from torchrec.distributed.types import ShardingEnv, ShardingPlan

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ebc = EmbeddingBagCollection(
                tables=[EmbeddingBagConfig(name=n, embedding_dim=d, num_embeddings=r * scale, feature_names=[f"f_{n}"])
                        for n, (r, d, _, _) in TABLES.items()], device=torch.device("meta"))

        def forward(self, features):
            return self.ebc(features)

    sharder = EmbeddingBagCollectionSharder(fused_params={
        "optimizer": EmbOptimType.EXACT_ROWWISE_ADAGRAD, "learning_rate": 0.05, "eps": 1e-8})
    model = Model()
    per_param = {n: table_wise(rank=TABLE_RANK[n]) if s == "table_wise" else row_wise()
                 for n, (_, _, s, _) in TABLES.items()}
    # local_size: ranks per node, each on its own device ("rank:1/cuda:1")
    plan = construct_module_sharding_plan(model.ebc, per_param, sharder=sharder, local_size=local_placement()[1],
                                          world_size=world, device_type="cuda")
    for n, ps in plan.items():
        ps.compute_kernel = TABLES[n][3]
    env = ShardingEnv(world, rank, dist.group.WORLD, output_dtensor=output_dtensor)
    return DistributedModelParallel(model, env=env, device=torch.device("cuda", torch.cuda.current_device()),
                                    plan=ShardingPlan({"ebc": plan}), sharders=[sharder])


def train(model, steps, scale, seed):
    """Forward, backward (the fused optimizer updates the tables and, for fused_uvm_caching, the
    rows in the device cache, which are then dirty), on random bags."""
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
    g = torch.Generator().manual_seed(seed)
    batch = 256
    for _ in range(steps):
        keys, lengths, values = [], [], []
        for n, (rows, _, _, _) in TABLES.items():
            ln = torch.randint(1, 4, (batch,), generator=g)
            keys.append(f"f_{n}")
            lengths.append(ln)
            values.append(torch.randint(0, rows * scale, (int(ln.sum()),), generator=g))
        kjt = KeyedJaggedTensor.from_lengths_sync(keys=keys, values=torch.cat(values), lengths=torch.cat(lengths))
        out = model(kjt.to(torch.device("cuda", torch.cuda.current_device())))
        out = out.wait() if hasattr(out, "wait") else out
        out.values().sum().backward()
    torch.cuda.synchronize()


def local_pieces(v):
    """The local tensors of a state-dict value: a ShardedTensor's local shards, or a DTensor's
    (TorchRec's LocalShardsWrapper: FBGEMM's ops refuse it, its local_shards() are plain views)."""
    if hasattr(v, "local_shards") and not hasattr(v, "to_local"):
        return [s.tensor for s in v.local_shards()]
    local = v.to_local()
    return list(local.local_shards()) if hasattr(local, "local_shards") else [local]


def auto_views(what):
    """Views the package's automatic path (no code change; uvmchunk.dcp, imported by its hook when it
    is active) handed DCP in this process so far, on save or on load; 0 without it."""
    auto = sys.modules.get("uvmchunk.dcp")
    return auto.views_taken()[what] if auto is not None and hasattr(auto, "views_taken") else 0


def state_of(model):
    """What the job saves: model and optimizer state (state_dict() flushes the tables' caches)."""
    return {"model": model.state_dict(), "optim": model.fused_optimizer.state_dict()}


def pieces_of(state):
    """{(kind, key, i): tensor} for every local piece of every table and optimizer state."""
    out = {}
    for key, v in sorted(state["model"].items()):
        if key.startswith("ebc.embedding_bags."):
            for i, t in enumerate(local_pieces(v)):
                out[("model", key, i)] = t
    for param, st in sorted(state["optim"]["state"].items()):
        for name, v in sorted(st.items()):
            if isinstance(v, torch.Tensor):
                for i, t in enumerate(local_pieces(v)):
                    out[("optim", f"{param}/{name}", i)] = t
    return out


def name_of(key):
    return "/".join(map(str, key))


def pattern(key, rank, like):
    g = torch.Generator().manual_seed(zlib.crc32(name_of(key).encode()) + 7919 * rank)
    return torch.randn(like.shape, generator=g, dtype=torch.float32).to(like.dtype)


def host_view(key, t):
    """A CPU tensor of a piece's current bytes: the tables through FBGEMM's uvm_to_cpu alias of the
    managed pages (no kernel, no copy), the optimizer state (ordinary device memory) copied."""
    return torch.ops.fbgemm.uvm_to_cpu(t) if key[0] == "model" else t.cpu()


def write_all(pieces, values, on_gpu):
    """Each piece set to values[key] (None: zeros). On the simulator through the CPU (no kernel); on a
    GPU with the device's own copy or fill."""
    for key, t in pieces.items():
        v = values.get(key)
        if on_gpu:
            t.copy_(v) if v is not None else t.zero_()
        elif key[0] == "model":
            torch.ops.fbgemm.uvm_to_cpu(t).copy_(v if v is not None else torch.zeros(t.shape, dtype=t.dtype))
        else:
            t.copy_(v if v is not None else torch.zeros(t.shape, dtype=t.dtype))
    torch.cuda.synchronize()


def mismatched(pieces, want):
    return [name_of(k) for k, t in pieces.items()
            if not torch.equal(host_view(k, t).contiguous().view(torch.int32), want[k].contiguous().view(torch.int32))]


def reset_caches(model):
    """Invalidate every table cache (FBGEMM's reset_cache_states): after the tables were zeroed, a
    cached row must not be flushed back over what dcp.load writes."""
    for m in model.modules():
        if hasattr(m, "reset_cache_states") and hasattr(m, "lxu_cache_weights"):
            m.reset_cache_states()
    torch.cuda.synchronize()


def roundtrip(a, rank, world, output_dtensor, drv, rt):
    import torch.distributed.checkpoint as dcp
    on_gpu = drv is None
    model = build(rank, world, output_dtensor, a.scale)
    pieces = pieces_of(state_of(model))
    tables = {k: t for k, t in pieces.items() if k[0] == "model"}
    sample = next(v for k, v in state_of(model)["model"].items() if k.startswith("ebc.embedding_bags."))
    kind = type(sample).__name__ + ("/" + type(sample.to_local()).__name__ if hasattr(sample, "to_local") else "")
    advice = {name_of(k): fbgemm_advice(rt, t) for k, t in tables.items()}
    if not on_gpu:
        write_all(pieces, {k: pattern(k, rank, t) for k, t in pieces.items()}, on_gpu)
    save_planner = load_planner = None
    if a.mode == "planner":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
        from uvmchunk.dcp import ZeroCopyLoadPlanner, ZeroCopySavePlanner
        save_planner, load_planner = ZeroCopySavePlanner(), ZeroCopyLoadPlanner()
    base = os.path.join(a.dir, "dtensor" if output_dtensor else "sharded")
    saves = 2 if a.train_steps else 1
    for i in range(saves):
        if a.train_steps:
            train(model, a.train_steps, a.scale, seed=100 * i + rank)
        path = f"{base}-{i}"
        state = state_of(model)  # flushes the caches into the tables
        dist.barrier()
        if drv:
            drv.uvmsim_reset()
        clear_hwm()
        rss0 = status_bytes("VmRSS")
        views0 = auto_views("save")
        t0 = time.monotonic()
        dcp.save(state, checkpoint_id=path, planner=save_planner)
        save_s = time.monotonic() - t0
        peak = status_bytes("VmHWM") - rss0
        locked_peak = drv.uvmsim_pinned_peak() if drv else None
        save_views = save_planner.zero_copy.views if save_planner else auto_views("save") - views0
    pieces = pieces_of(state_of(model))
    want = ({k: host_view(k, t).clone() for k, t in pieces.items()} if on_gpu
            else {k: pattern(k, rank, t) for k, t in pieces.items()})
    write_all(pieces, {}, on_gpu)
    reset_caches(model)
    zeroed = all(not host_view(k, t).view(torch.int32).any() for k, t in pieces.items())
    dist.barrier()
    state = state_of(model)
    views0 = auto_views("load")
    clear_hwm()
    rss0 = status_bytes("VmRSS")
    t0 = time.monotonic()
    dcp.load(state, checkpoint_id=path, planner=load_planner)
    torch.cuda.synchronize()
    load_s = time.monotonic() - t0
    load_peak = status_bytes("VmHWM") - rss0
    bad = mismatched(pieces_of(state), want)
    dist.barrier()
    extra = async_roundtrip(base, model, want, on_gpu) if a.async_save else {}
    result(**extra, rank=rank, mode=a.mode, output="dtensor" if output_dtensor else "sharded", kind=kind, pieces=len(pieces),
           tables={name_of(k): [list(t.shape), t.numel() * t.element_size()] for k, t in tables.items()},
           largest_local_table=max(t.numel() * t.element_size() for t in tables.values()),
           devices=sorted({t.device.index if t.is_cuda else -1 for t in pieces.values()}), current_device=torch.cuda.current_device(),
           advice=advice, zeroed=zeroed, mismatched=bad, peak_extra_bytes=peak, load_peak_extra_bytes=load_peak, save_s=round(save_s, 3),
           load_s=round(load_s, 3), locked_peak=locked_peak, train_steps=a.train_steps, saves=saves,
           save_views=save_views,
           load_views=load_planner.zero_copy.views if load_planner else auto_views("load") - views0,
           kernels_skipped=drv.uvmsim_kernels_skipped(None) if drv else None,
           preloaded=any(os.path.basename(p) == "libuvmchunk.so" for p in os.environ.get("LD_PRELOAD", "").replace(":", " ").split()),
           torch=torch.__version__, simulated=not on_gpu)
    del model, pieces, tables, state, want
    torch._C._host_emptyCache()


class AnonPeak:
    """Peak RssAnon (bytes, /proc/self/status) sampled every 2 ms between start() and stop()."""

    def __init__(self):
        import threading
        self.peak, self.done = 0, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.done.wait(0.002):
            self.peak = max(self.peak, status_bytes("RssAnon"))

    def start(self):
        self.peak = status_bytes("RssAnon")
        self.thread.start()
        return self

    def stop(self):
        self.done.set()
        self.thread.join()
        return max(self.peak, status_bytes("RssAnon"))


def spilled_so_far():
    """Bytes the package's async_save spill wrote to files in this process (None without it)."""
    try:
        from uvmchunk import _accounting
    except ImportError:
        return None
    return _accounting.totals().get("dcp.async_save", {}).get("spilled_bytes", 0)


def async_roundtrip(base, model, want, on_gpu):
    """dcp.async_save of the state just loaded (FileSystemWriter as its stager, which stages through
    _create_cpu_state_dict on every PyTorch: 2.11+'s DefaultStager fails on a ShardedTensor, stock
    too), the upload awaited; then the tables zeroed and the checkpoint loaded back. Returns the
    peak extra anonymous memory from the call to the upload's end (the staged copy's cost), the
    bytes the library spilled to a file (None without it), the seconds to return and to complete,
    and the pieces that came back different."""
    import gc
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemWriter
    path = base + "-async"
    spilled0 = spilled_so_far()
    state = state_of(model)
    gc.collect()
    dist.barrier()
    anon0 = status_bytes("RssAnon")
    sampler = AnonPeak().start()
    t0 = time.monotonic()
    response = dcp.async_save(state, storage_writer=FileSystemWriter(path))
    stall = time.monotonic() - t0
    getattr(response, "upload_completion", response).result()
    upload = time.monotonic() - t0
    del response
    gc.collect()
    anon_peak = sampler.stop() - anon0
    spilled = None if spilled0 is None else spilled_so_far() - spilled0
    pieces = pieces_of(state_of(model))
    write_all(pieces, {}, on_gpu)
    reset_caches(model)
    dist.barrier()
    state = state_of(model)
    dcp.load(state, checkpoint_id=path)
    torch.cuda.synchronize()
    bad = mismatched(pieces_of(state), want)
    dist.barrier()
    return dict(async_anon_peak_extra=anon_peak, async_spilled=spilled, async_stall_s=round(stall, 3),
                async_upload_s=round(upload, 3), async_mismatched=bad)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True, choices=["stock", "preload", "planner", "auto"])
    p.add_argument("--dir", required=True)
    p.add_argument("--outputs", default="sharded,dtensor")
    p.add_argument("--scale", type=int, default=1)
    p.add_argument("--async-save", action="store_true",
                   help="then dcp.async_save the loaded state, load it back and compare (the staged copy's cost)")
    p.add_argument("--train-steps", type=int, default=None,
                   help="training steps before each of two saves (default: 3 on a GPU, 0 on the simulator)")
    a = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    dist.init_process_group("gloo")  # the simulator has no NCCL; gloo serves both
    torch.cuda.set_device(local_placement()[0])  # each rank on its own device
    rank, world = dist.get_rank(), dist.get_world_size()
    drv, rt = sim_driver(), runtime()
    if a.train_steps is None:
        a.train_steps = 0 if drv else 3
    if drv and a.train_steps:
        p.error("--train-steps needs real kernels: the simulated runtime runs none")
    for out in a.outputs.split(","):
        roundtrip(a, rank, world, out == "dtensor", drv, rt)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
