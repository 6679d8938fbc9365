"""uvmc_managed.py: CUDA tensors in managed memory for PyTorch, allocated by
integration/managed_alloc.c (cudaMallocManaged with FBGEMM's advice) through
torch.cuda.memory.CUDAPluggableAllocator and a MemPool (BRIEF section 6). Shared by the
integration job and tests/torch; the .so's path comes from $UVMC_MANAGED_ALLOC."""
import os

_pool = None


def managed_empty(shape, dtype):
    """An uninitialised CUDA tensor of `shape` and `dtype` in managed memory."""
    import torch

    global _pool
    if _pool is None:
        alloc = torch.cuda.memory.CUDAPluggableAllocator(
            os.environ["UVMC_MANAGED_ALLOC"], "uvmc_managed_alloc", "uvmc_managed_free")
        _pool = torch.cuda.MemPool(alloc.allocator())
    with torch.cuda.use_mem_pool(_pool):
        return torch.empty(shape, dtype=dtype, device="cuda")
