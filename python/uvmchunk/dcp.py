"""Zero-copy checkpoint planners for torch.distributed.checkpoint (DCP).

A CUDA tensor in managed memory that prefers the CPU (FBGEMM's tables, BRIEF §1) already lives in
host RAM. ``ZeroCopySavePlanner.resolve_data`` hands DCP an exact-size CPU view of those pages, so
DCP writes straight from them: no copy, no page-locked destination, about zero extra host memory
whatever the number and size of tables (DCP's loaders skip the copy of a CPU tensor whose storage
is exactly its size). ``ZeroCopyLoadPlanner.resolve_tensor`` does the same for a restore: the
reader writes the host-resident pages directly, with no host-to-device copy and no migration.

The view is taken only when all of these hold, else DCP's normal path runs (which the preload
library then handles): the tensor is a contiguous CUDA tensor in managed memory; its device has
concurrent managed access (the CPU may read managed memory while the GPU works, BRIEF §8); and
its memory prefers the CPU (``any_managed=True`` drops this last condition). Before the first view
of a save or load, the tensor's device is synchronised once, so device work that wrote the table
(or will read it) is complete.

    dcp.save(state, checkpoint_id=path, planner=ZeroCopySavePlanner())
    dcp.load(state, checkpoint_id=path, planner=ZeroCopyLoadPlanner())
"""
from __future__ import annotations

import ctypes
import os
from typing import Any, Optional

import torch
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner

__all__ = ["ZeroCopySaveMixin", "ZeroCopyLoadMixin", "ZeroCopySavePlanner", "ZeroCopyLoadPlanner"]

_MANAGED = 3                 # cudaMemoryTypeManaged
_PREFERRED_LOCATION = 2      # cudaMemRangeAttributePreferredLocation
_CONCURRENT_MANAGED = 89     # cudaDevAttrConcurrentManagedAccess
_CPU = -1                    # cudaCpuDeviceId


class _Runtime:
    """The CUDA runtime PyTorch is bound to, found among the objects mapped in this process (on the
    simulator, the simulated one), asked through ctypes."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL(self._path())
        self.lib.cudaMemRangeGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                      ctypes.c_void_p, ctypes.c_size_t]
        self.lib.cudaPointerGetAttributes.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self._cma: dict[int, bool] = {}

    @staticmethod
    def _path() -> str:
        torch.cuda.init()
        with open("/proc/self/maps") as f:
            libs = [line.split()[-1] for line in f if "/libcudart.so" in line]
        sim = os.environ.get("UVMC_SIM_DIR")  # tests: pick the simulated copy, never a private one
        if sim:
            libs = [p for p in libs if os.path.dirname(os.path.realpath(p)) == os.path.realpath(sim)]
        if not libs:
            raise RuntimeError("uvmchunk.dcp: no CUDA runtime mapped in this process")
        return libs[0]

    def is_managed(self, ptr: int) -> bool:
        attrs = (ctypes.c_byte * 256)()  # struct cudaPointerAttributes: the type comes first
        if self.lib.cudaPointerGetAttributes(attrs, ctypes.c_void_p(ptr)) != 0:
            self.lib.cudaGetLastError()
            return False
        return ctypes.c_int.from_buffer(attrs, 0).value == _MANAGED

    def concurrent_managed_access(self, device: int) -> bool:
        if device not in self._cma:
            v = ctypes.c_int(0)
            ok = self.lib.cudaDeviceGetAttribute(ctypes.byref(v), _CONCURRENT_MANAGED, device) == 0
            self._cma[device] = ok and v.value == 1
        return self._cma[device]

    def prefers_cpu(self, ptr: int, nbytes: int) -> bool:
        v = ctypes.c_int(0)
        if self.lib.cudaMemRangeGetAttribute(ctypes.byref(v), 4, _PREFERRED_LOCATION, ctypes.c_void_p(ptr), nbytes) != 0:
            self.lib.cudaGetLastError()
            return False
        return v.value == _CPU


_runtime: Optional[_Runtime] = None


def _rt() -> _Runtime:
    global _runtime
    if _runtime is None:
        _runtime = _Runtime()
    return _runtime


class _Viewer:
    """Exact-size CPU views of managed tensors, with the once-per-device synchronisation."""

    def __init__(self, any_managed: bool) -> None:
        self.any_managed = any_managed
        self.synced: set[int] = set()
        self.views = 0  # how many views were handed to DCP (for logs and tests)

    def eligible(self, t: Any) -> bool:
        if not isinstance(t, torch.Tensor) or t.device.type != "cuda" or t.numel() == 0 or not t.is_contiguous():
            return False
        rt, ptr, nbytes = _rt(), t.data_ptr(), t.numel() * t.element_size()
        dev = t.device.index if t.device.index is not None else torch.cuda.current_device()
        return (rt.is_managed(ptr) and rt.concurrent_managed_access(dev)
                and (self.any_managed or rt.prefers_cpu(ptr, nbytes)))

    def view(self, t: torch.Tensor) -> torch.Tensor:
        dev = t.device.index if t.device.index is not None else torch.cuda.current_device()
        if dev not in self.synced:  # device work that wrote (or reads) the table is complete
            torch.cuda.synchronize(dev)
            self.synced.add(dev)
        nbytes = t.numel() * t.element_size()
        buf = (ctypes.c_char * nbytes).from_address(t.data_ptr())
        buf._uvmchunk_source = t  # the managed memory stays alive as long as the view does
        self.views += 1
        return torch.frombuffer(buf, dtype=torch.uint8).view(t.dtype).reshape(t.shape)


class ZeroCopySaveMixin:
    """For a planner of your own that derives from DefaultSavePlanner: put this class first in its
    bases. ``zero_copy_any_managed``: take the view for managed memory without CPU preference too."""

    zero_copy_any_managed: bool = False

    def set_up_planner(self, state_dict, storage_meta=None, is_coordinator: bool = False) -> None:
        super().set_up_planner(state_dict, storage_meta, is_coordinator)
        self.zero_copy = _Viewer(self.zero_copy_any_managed)

    def resolve_data(self, write_item):
        obj = super().resolve_data(write_item)
        viewer = getattr(self, "zero_copy", None)
        if viewer is not None and viewer.eligible(obj):
            return viewer.view(obj)
        return obj


class ZeroCopyLoadMixin:
    """For a planner of your own that derives from DefaultLoadPlanner: put this class first in its
    bases. Managed targets are written through their host pages."""

    zero_copy_any_managed: bool = False

    def set_up_planner(self, state_dict, metadata=None, is_coordinator: bool = False) -> None:
        super().set_up_planner(state_dict, metadata, is_coordinator)
        self.zero_copy = _Viewer(self.zero_copy_any_managed)

    def resolve_tensor(self, read_item):
        t = super().resolve_tensor(read_item)
        viewer = getattr(self, "zero_copy", None)
        if viewer is not None and viewer.eligible(t):
            return viewer.view(t)
        return t


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
