"""Zero-copy checkpoint planners for torch.distributed.checkpoint (DCP).

A CUDA tensor in managed memory that prefers the CPU (FBGEMM's UVM tables) already lives in
host RAM. ``ZeroCopySavePlanner.resolve_data`` hands DCP an exact-size CPU view of those pages, so
DCP writes straight from them: no copy, no page-locked destination, about zero extra host memory
whatever the number and size of tables (DCP's loaders skip the copy of a CPU tensor whose storage
is exactly its size). ``ZeroCopyLoadPlanner.resolve_tensor`` does the same for a restore: the
reader writes the host-resident pages directly, with no host-to-device copy and no migration; with
PyTorch's FileSystemReader the bytes go from the file into the pages in bounded chunks, never
through a whole-item CPU tensor (uvmchunk._reads).

The view is taken only when all of these hold, else DCP's normal path runs (which the preload
library then handles): the tensor is a contiguous CUDA tensor in managed memory, without a lazy
conjugate or negative bit (a view of the raw bytes would drop it); its device has concurrent managed
access (only then may the CPU read managed memory while the GPU works); its memory prefers the CPU
(``any_managed=True`` drops this condition) and no part of it was last prefetched to a device (a
view would pull those pages back to the host); and, on save, it shares no byte with a tensor already
handed to DCP as a view (tied weights: writers such as safetensors refuse two tensors on one
memory, so the second takes the normal path, as every tensor does with stock DCP); and it is
neither quantized nor of a layout other than strided. In set_up_planner, on the caller's thread,
the work queued so far on the caller's current stream of each device holding such a tensor is
waited for (where DCP's own copy would have been ordered), so the device work that wrote the table
(or will read it) is complete before any writer thread reads a view. When no CUDA runtime can be
found where PyTorch's calls are bound, the planners warn once and take no view.

    dcp.save(state, checkpoint_id=path, planner=ZeroCopySavePlanner())
    dcp.load(state, checkpoint_id=path, planner=ZeroCopyLoadPlanner())
"""
from __future__ import annotations

import contextlib
import gc
import inspect
from typing import Any, Optional

import torch
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner

from . import _reads, _records, _report
from ._cuda import rt
from ._views import Viewer, views_taken

__all__ = ["ZeroCopySaveMixin", "ZeroCopyLoadMixin", "ZeroCopySavePlanner", "ZeroCopyLoadPlanner", "views_taken",
           "release_host_cache"]


class ZeroCopySaveMixin:
    """For a planner of your own that derives from DefaultSavePlanner: put this class first in its
    bases. ``zero_copy_any_managed``: take the view for managed memory without CPU preference too."""

    zero_copy_any_managed: bool = False

    def set_up_planner(self, state_dict, storage_meta=None, is_coordinator: bool = False) -> None:
        # DCP passes storage_meta only to a planner that names it; one below that does not (the
        # older signature) is called as DCP would call it.
        if "storage_meta" in inspect.signature(super().set_up_planner).parameters:
            super().set_up_planner(state_dict=state_dict, storage_meta=storage_meta, is_coordinator=is_coordinator)
        else:
            super().set_up_planner(state_dict, is_coordinator)
        self.zero_copy = Viewer(self.zero_copy_any_managed)
        self.zero_copy.prepare(getattr(self, "state_dict", state_dict))  # on the caller's thread
        _records.install()  # a table changed during the save: its record's CRC-32 still true

    def resolve_data(self, write_item):
        obj = super().resolve_data(write_item)
        viewer = getattr(self, "zero_copy", None)
        if viewer is None:
            return obj
        out = viewer.save_view(self, obj)
        _report.resolved(obj, out, viewer.call)  # counted here only (uvmchunk._auto skips mixins)
        return out


class ZeroCopyLoadMixin:
    """For a planner of your own that derives from DefaultLoadPlanner: put this class first in its
    bases. Managed targets are written through their host pages."""

    zero_copy_any_managed: bool = False

    def set_up_planner(self, state_dict, metadata=None, is_coordinator: bool = False) -> None:
        super().set_up_planner(state_dict, metadata, is_coordinator)  # positional, as DCP calls it
        self.zero_copy = Viewer(self.zero_copy_any_managed)
        self.zero_copy.prepare(getattr(self, "state_dict", state_dict))
        _reads.install()  # FileSystemReader reads viewed targets straight from the file

    def resolve_tensor(self, read_item):
        t = super().resolve_tensor(read_item)
        viewer = getattr(self, "zero_copy", None)
        if viewer is None:
            return t
        out = viewer.load_view(t)
        _report.resolved(t, out, viewer.call)  # counted here only (uvmchunk._auto skips mixins)
        return out


class ZeroCopySavePlanner(ZeroCopySaveMixin, DefaultSavePlanner):
    """DefaultSavePlanner that hands DCP exact-size CPU views of host-preferring managed tensors."""

    def __init__(self, *args: Any, any_managed: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.zero_copy_any_managed = any_managed


class ZeroCopyLoadPlanner(ZeroCopyLoadMixin, DefaultLoadPlanner):
    """DefaultLoadPlanner that restores host-preferring managed tensors through their host pages."""

    def __init__(self, *args: Any, any_managed: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.zero_copy_any_managed = any_managed


def _host_cache_bytes() -> tuple[int, int]:
    """(reserved, in use) bytes of PyTorch's caching host allocator now; (-1, -1) when this PyTorch
    does not say (then a release is always tried)."""
    stats = getattr(torch._C, "_cuda_hostMemoryStats", None)
    try:
        s = stats() if stats is not None else None
        if "reserved_bytes" in s:  # 2.9 and older: reserved_bytes held, allocated_bytes in use
            return int(s["reserved_bytes"]["current"]), int(s["allocated_bytes"]["current"])
        # 2.10+ renamed them: allocated_bytes is what the allocator holds, active_bytes what is in
        # use (torch/cuda/memory.py, host_memory_stats' docstring of each release)
        return int(s["allocated_bytes"]["current"]), int(s["active_bytes"]["current"])
    except (TypeError, KeyError, RuntimeError):
        return -1, -1


def host_allocations() -> Optional[int]:
    """How many blocks PyTorch's caching host allocator has page-locked in this process so far
    (num_host_alloc, cumulative); None where this PyTorch does not say. Reads the allocator's
    counters only: no CUDA call (pin_memory() page-locks without torch.cuda's lazy init, so
    torch.cuda.is_initialized() may still be False)."""
    stats = getattr(torch._C, "_cuda_hostMemoryStats", None)
    if stats is None:
        return None
    try:
        return int(stats()["num_host_alloc"])
    except (TypeError, KeyError, RuntimeError, ValueError):
        return None


def release_host_cache(device: Optional[int] = None) -> None:
    """Releases the page-locked blocks PyTorch's caching host allocator keeps after they were freed
    (a save's power-of-two staging blocks, lazily served or really pinned). Blocks in use, or whose
    copies are still in flight, stay: the allocator's empty_cache releases only free blocks whose
    recorded events completed (aten/src/ATen/core/CachingHostAllocator.h). When the allocator holds
    nothing (a checkpoint that staged nothing page-locked) this is all it costs: one look at its
    counters. Else the work queued on `device`'s current stream (where DCP copied) is waited for, so
    that a save's last blocks count as free; and, while some block is still in use, the young
    generations of the garbage collector are collected (not the whole heap, whose cost grows with
    every live object of the job): on PyTorch 2.8, torch.save's local PyTorchPickler class
    (torch/serialization.py, _save) closes over the storages it wrote, so each staged item's block
    stays referenced from that class's reference cycle until a collection. Both the wait and the
    release (cudaFreeHost) run in relaxed capture mode."""
    if not (torch.cuda.is_initialized() and hasattr(torch._C, "_host_emptyCache")):
        return
    reserved, in_use = _host_cache_bytes()
    if reserved == 0:
        return
    runtime = rt()
    with runtime.relaxed() if runtime is not None else contextlib.nullcontext():
        if runtime is not None:
            runtime.wait_current_stream(torch.cuda.current_device() if device is None else device)
        if in_use != 0:
            gc.collect(1)
        torch._C._host_emptyCache()
