"""A TorchRec job whose checkpoint code knows nothing of uvmchunk: an EmbeddingBagCollection of
fused_uvm_caching tables (FBGEMM keeps them in CUDA managed memory that prefers the CPU) under
DistributedModelParallel, saved and loaded with torch.distributed.checkpoint as usual. Run it with
and without the launcher to see what a save costs:

    torchrun --nproc_per_node=2 examples/torchrec_checkpoint.py --dir /tmp/ckpt
    uvmchunk-run -- torchrun --nproc_per_node=2 examples/torchrec_checkpoint.py --dir /tmp/ckpt

Each rank prints one line: its tables' bytes, the save's peak host memory above what the process
held just before it, what the save left resident once it returned, and the save's seconds. Each rank
runs on its own GPU (cuda:LOCAL_RANK), as any TorchRec job does; ranks talk over NCCL, or over gloo
on the simulated runtime (README "Try it without a GPU"), which has no NCCL, and where there are
fewer GPUs than ranks (they then share device 0). Without a CUDA device it says so in one line and
exits 1, before importing TorchRec.
"""
import argparse
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp


def status_bytes(key: str) -> int:
    """VmRSS / VmHWM of this process, in bytes (/proc/self/status)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))


def build_model(rows: int, device: torch.device) -> torch.nn.Module:
    """Four tables of `rows` rows and 64..256 float32 columns, two sharded table-wise and two
    row-wise, all fused_uvm_caching, with a fused EXACT_ROWWISE_ADAGRAD optimizer."""
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.sharding_plan import construct_module_sharding_plan, row_wise, table_wise
    from torchrec.distributed.types import ShardingEnv, ShardingPlan

    dims = {"t0": 256, "t1": 128, "t2": 64, "t3": 128}
    ebc = EmbeddingBagCollection(tables=[EmbeddingBagConfig(name=n, embedding_dim=d, num_embeddings=rows,
                                                            feature_names=[f"f_{n}"]) for n, d in dims.items()],
                                 device=torch.device("meta"))
    sharder = EmbeddingBagCollectionSharder(fused_params={"optimizer": EmbOptimType.EXACT_ROWWISE_ADAGRAD,
                                                          "learning_rate": 0.05, "eps": 1e-8})
    world, rank = dist.get_world_size(), dist.get_rank()
    per_param = {"t0": table_wise(rank=0), "t1": table_wise(rank=world - 1), "t2": row_wise(), "t3": row_wise()}
    # local_size: ranks per node, each on its own GPU; 1 puts every rank's shards on cuda:0
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    local = 1 if torch.cuda.device_count() < local_world else local_world
    plan = construct_module_sharding_plan(ebc, per_param, sharder=sharder, local_size=local, world_size=world,
                                          device_type="cuda")
    for spec in plan.values():
        spec.compute_kernel = "fused_uvm_caching"
    return DistributedModelParallel(torch.nn.ModuleDict({"ebc": ebc}), device=device, sharders=[sharder],
                                    env=ShardingEnv(world, rank, dist.group.WORLD),
                                    plan=ShardingPlan({"ebc": plan}))


def cuda_or_exit() -> None:
    """One line and exit 1 where there is no CUDA device: importing TorchRec first would end in an
    OSError from libnvidia-ml.so.1, which FBGEMM links."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own "CUDA initialization" warning: the line below says it
        available = torch.cuda.is_available()
    if not available:
        print("uvmchunk: torchrec_checkpoint.py: no CUDA device here (no GPU driver, and no simulated runtime "
              "on LD_LIBRARY_PATH/LD_PRELOAD: see README \"Try it without a GPU\")", file=sys.stderr, flush=True)
        sys.exit(1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True, help="checkpoint folder")
    p.add_argument("--rows", type=int, default=100_000, help="rows per table (default 100000: 219.7 MiB of tables in all; "
                   "two ranks print 134 and 85 MiB)")
    a = p.parse_args()
    cuda_or_exit()
    one_gpu = torch.cuda.device_count() < int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    simulated = torch.cuda.get_device_name(0) == "uvmchunk simulated GPU"  # tests/sim: no NCCL there
    dist.init_process_group("gloo" if one_gpu or simulated else "nccl")
    device = torch.device("cuda", 0 if one_gpu else int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    model = build_model(a.rows, device)

    state = {"model": model.state_dict(), "optim": model.fused_optimizer.state_dict()}
    tables = sum(s.tensor.numel() * s.tensor.element_size() for k, v in state["model"].items()
                 if k.endswith(".weight") for s in v.local_shards())
    dist.barrier()
    with open("/proc/self/clear_refs", "w") as f:  # VmHWM from here on: the save's own peak
        f.write("5")
    before = status_bytes("VmRSS")
    t0 = time.monotonic()
    dcp.save(state, checkpoint_id=a.dir)  # the checkpoint code of any TorchRec job, unchanged
    seconds = time.monotonic() - t0
    peak, after = status_bytes("VmHWM") - before, status_bytes("VmRSS") - before
    dcp.load(state, checkpoint_id=a.dir)
    print(f"rank {dist.get_rank()}: tables {tables / 2**20:.0f} MiB, save peak +{peak / 2**20:.0f} MiB, "
          f"left after the save {after / 2**20:+.0f} MiB, {seconds:.2f} s", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
