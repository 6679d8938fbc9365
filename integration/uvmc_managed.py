"""uvmc_managed.py: CUDA tensors in managed memory for PyTorch, allocated by
integration/managed_alloc.c (cudaMallocManaged with FBGEMM's advice) through
torch.cuda.memory.CUDAPluggableAllocator and a MemPool (PyTorch docs, torch.cuda.memory). Shared by the
integration job and tests/torch; the .so's path comes from $UVMC_MANAGED_ALLOC."""
import ctypes
import os

_pool = None


def managed_empty(shape, dtype):
    """An uninitialised CUDA tensor of `shape` and `dtype` in managed memory."""
    import torch

    global _pool
    if _pool is None:
        alloc = torch.cuda.memory.CUDAPluggableAllocator(
            os.environ["UVMC_MANAGED_ALLOC"], "uvmc_managed_alloc", "uvmc_managed_free")
        # The pool's destructor frees its blocks through the allocator, which it does not keep alive
        # (torch 2.8: freeing the allocator first, as interpreter shutdown may, crashes in
        # release_block; vllm-project/vllm#46050 describes the same ordering): the allocator lives
        # as long as the process.
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(alloc))
        _pool = torch.cuda.MemPool(alloc.allocator())
    with torch.cuda.use_mem_pool(_pool):
        return torch.empty(shape, dtype=dtype, device="cuda")
