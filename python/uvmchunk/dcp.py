"""Zero-copy checkpoint planners for torch.distributed.checkpoint (DCP).

A CUDA tensor in managed memory that prefers the CPU (FBGEMM's UVM tables) already lives in
host RAM. ``ZeroCopySavePlanner.resolve_data`` hands DCP an exact-size CPU view of those pages, so
DCP writes straight from them: no copy, no page-locked destination, about zero extra host memory
whatever the number and size of tables (DCP's loaders skip the copy of a CPU tensor whose storage
is exactly its size). ``ZeroCopyLoadPlanner.resolve_tensor`` does the same for a restore: the
reader writes the host-resident pages directly, with no host-to-device copy and no migration.

The view is taken only when all of these hold, else DCP's normal path runs (which the preload
library then handles): the tensor is a contiguous CUDA tensor in managed memory, without a lazy
conjugate or negative bit (a view of the raw bytes would drop it); its device has concurrent managed
access (only then may the CPU read managed memory while the GPU works); its memory prefers the CPU
(``any_managed=True`` drops this condition); and, on save, it shares no byte with a tensor already
handed to DCP as a view (tied weights: writers such as safetensors refuse two tensors on one
memory, so the second takes the normal path, as every tensor does with stock DCP). Before the
first view of a save or load, the tensor's device is synchronised once, so device work that wrote
the table (or will read it) is complete. When no CUDA runtime can be found where PyTorch's calls
are bound, the planners warn once and take no view.

    dcp.save(state, checkpoint_id=path, planner=ZeroCopySavePlanner())
    dcp.load(state, checkpoint_id=path, planner=ZeroCopyLoadPlanner())
"""
from __future__ import annotations

import bisect
import ctypes
import inspect
import os
import warnings
from typing import Any, Optional

import torch
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner

__all__ = ["ZeroCopySaveMixin", "ZeroCopyLoadMixin", "ZeroCopySavePlanner", "ZeroCopyLoadPlanner"]

_MANAGED = 3                 # cudaMemoryTypeManaged
_PREFERRED_LOCATION = 2      # cudaMemRangeAttributePreferredLocation
_CONCURRENT_MANAGED = 89     # cudaDevAttrConcurrentManagedAccess
_CPU = -1                    # cudaCpuDeviceId


class _Runtime:
    """The CUDA runtime PyTorch is bound to, asked through ctypes. It is looked up the way the
    dynamic linker bound libtorch_cuda.so's calls: the global scope first (LD_PRELOAD, objects
    loaded RTLD_GLOBAL: on the simulator, the simulated runtime), then libtorch_cuda.so's own
    dependencies. A process may map a second libcudart (a wheel's private copy) that PyTorch never
    calls; it is not the one asked."""

    probe = "cudaMemRangeGetAttribute"  # a runtime function the library does not interpose

    def __init__(self) -> None:
        self.lib = self._find()
        self.lib.cudaMemRangeGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                      ctypes.c_void_p, ctypes.c_size_t]
        self.lib.cudaPointerGetAttributes.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self._cma: dict[int, bool] = {}

    @classmethod
    def _find(cls) -> ctypes.CDLL:
        torch.cuda.init()
        scopes = [lambda: ctypes.CDLL(None)]
        torch_cuda = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so")
        scopes.append(lambda: ctypes.CDLL(torch_cuda, mode=os.RTLD_NOLOAD | os.RTLD_LAZY))
        for scope in scopes:
            try:
                lib = scope()
                getattr(lib, cls.probe)
                return lib
            except (OSError, AttributeError):
                continue
        raise RuntimeError(f"no CUDA runtime defining {cls.probe} in the global scope or libtorch_cuda.so's")

    def is_managed(self, ptr: int) -> bool:
        attrs = (ctypes.c_byte * 256)()  # struct cudaPointerAttributes: the type comes first
        if self.lib.cudaPointerGetAttributes(attrs, ctypes.c_void_p(ptr)) != 0:
            self.lib.cudaGetLastError()
            return False
        return ctypes.c_int.from_buffer(attrs, 0).value == _MANAGED

    def concurrent_managed_access(self, device: int) -> bool:
        """Asked once per device; without it the planners take no view there, said once."""
        if device not in self._cma:
            v = ctypes.c_int(0)
            ok = self.lib.cudaDeviceGetAttribute(ctypes.byref(v), _CONCURRENT_MANAGED, device) == 0
            self._cma[device] = ok and v.value == 1
            if not self._cma[device]:
                warnings.warn(f"uvmchunk: device {device} has no concurrent managed access (the CPU may not read "
                              "managed memory while it works): the planners take no views there", RuntimeWarning,
                              stacklevel=4)
        return self._cma[device]

    def prefers_cpu(self, ptr: int, nbytes: int) -> bool:
        v = ctypes.c_int(0)
        if self.lib.cudaMemRangeGetAttribute(ctypes.byref(v), 4, _PREFERRED_LOCATION, ctypes.c_void_p(ptr), nbytes) != 0:
            self.lib.cudaGetLastError()
            return False
        return v.value == _CPU


_runtime: Optional[_Runtime] = None
_runtime_failed = False


def _rt() -> Optional[_Runtime]:
    """The runtime, or None (after one warning) when it cannot be found or loaded."""
    global _runtime, _runtime_failed
    if _runtime is None and not _runtime_failed:
        try:
            _runtime = _Runtime()
        except (OSError, RuntimeError, AttributeError) as e:
            _runtime_failed = True
            warnings.warn(f"uvmchunk: {e}; the planners take no views (DCP's normal path for every tensor)",
                          RuntimeWarning, stacklevel=3)
    return _runtime


class _Viewer:
    """Exact-size CPU views of managed tensors, with the once-per-device synchronisation."""

    def __init__(self, any_managed: bool) -> None:
        self.any_managed = any_managed
        self.synced: set[int] = set()
        self.views = 0  # how many views were handed to DCP (for logs and tests)
        self._starts: list[int] = []  # byte ranges [start, end) of the views handed out, by start
        self._ends: list[int] = []

    def eligible(self, t: Any) -> bool:
        if (not isinstance(t, torch.Tensor) or t.device.type != "cuda" or t.numel() == 0
                or not t.is_contiguous() or t.is_conj() or t.is_neg()):
            return False
        rt, ptr, nbytes = _rt(), t.data_ptr(), t.numel() * t.element_size()
        if rt is None:
            return False
        dev = t.device.index if t.device.index is not None else torch.cuda.current_device()
        return (rt.is_managed(ptr) and rt.concurrent_managed_access(dev)
                and (self.any_managed or rt.prefers_cpu(ptr, nbytes)))

    def claim(self, t: torch.Tensor) -> bool:
        """Records t's bytes as handed out; False when they overlap a range handed out before."""
        start = t.data_ptr()
        end = start + t.numel() * t.element_size()
        i = bisect.bisect_right(self._starts, start)
        if (i and self._ends[i - 1] > start) or (i < len(self._starts) and self._starts[i] < end):
            return False
        self._starts.insert(i, start)
        self._ends.insert(i, end)
        return True

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
        # DCP passes storage_meta only to a planner that names it; one below that does not (the
        # older signature) is called as DCP would call it.
        if "storage_meta" in inspect.signature(super().set_up_planner).parameters:
            super().set_up_planner(state_dict=state_dict, storage_meta=storage_meta, is_coordinator=is_coordinator)
        else:
            super().set_up_planner(state_dict, is_coordinator)
        self.zero_copy = _Viewer(self.zero_copy_any_managed)

    def resolve_data(self, write_item):
        obj = super().resolve_data(write_item)
        viewer = getattr(self, "zero_copy", None)
        if viewer is not None and viewer.eligible(obj) and viewer.claim(obj):
            return viewer.view(obj)
        return obj


class ZeroCopyLoadMixin:
    """For a planner of your own that derives from DefaultLoadPlanner: put this class first in its
    bases. Managed targets are written through their host pages."""

    zero_copy_any_managed: bool = False

    def set_up_planner(self, state_dict, metadata=None, is_coordinator: bool = False) -> None:
        super().set_up_planner(state_dict, metadata, is_coordinator)  # positional, as DCP calls it
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
