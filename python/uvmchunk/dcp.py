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
memory, so the second takes the normal path, as every tensor does with stock DCP); and it is
neither quantized nor of a layout other than strided. Before the first view of a save or load,
the work queued so far on the device's current stream is waited for once (where DCP's own copy
would have been ordered), so the device work that wrote the table (or will read it) is complete. When no CUDA runtime can be found where PyTorch's calls
are bound, the planners warn once and take no view.

    dcp.save(state, checkpoint_id=path, planner=ZeroCopySavePlanner())
    dcp.load(state, checkpoint_id=path, planner=ZeroCopyLoadPlanner())
"""
from __future__ import annotations

import bisect
import contextlib
import ctypes
import functools
import gc
import inspect
import os
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any, Optional

import torch
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner

__all__ = ["ZeroCopySaveMixin", "ZeroCopyLoadMixin", "ZeroCopySavePlanner", "ZeroCopyLoadPlanner", "views_taken",
           "release_host_cache"]

_MANAGED = 3                 # cudaMemoryTypeManaged
_PREFERRED_LOCATION = 2      # cudaMemRangeAttributePreferredLocation
_CONCURRENT_MANAGED = 89     # cudaDevAttrConcurrentManagedAccess
_CPU = -1                    # cudaCpuDeviceId
_CAPTURE_RELAXED = 2         # cudaStreamCaptureModeRelaxed


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

    @contextlib.contextmanager
    def relaxed(self) -> Iterator[None]:
        """This thread in relaxed stream-capture mode: the library's own calls that may wait or
        free page-locked memory are "potentially unsafe" ones that would invalidate another
        thread's global-mode capture (PyTorch's default for torch.cuda.graph) (CUDA Runtime API,
        cudaThreadExchangeStreamCaptureMode)."""
        mode = ctypes.c_int(_CAPTURE_RELAXED)
        exchanged = self.lib.cudaThreadExchangeStreamCaptureMode(ctypes.byref(mode)) == 0
        try:
            yield
        finally:
            if exchanged:
                self.lib.cudaThreadExchangeStreamCaptureMode(ctypes.byref(mode))

    def wait_current_stream(self, device: int) -> None:
        """Waits, in relaxed mode, for the work queued so far on this thread's current stream of
        `device`: an event recorded there, then waited for. DCP's own copy is ordered on that
        stream too. Not a device synchronisation: that is invalid while any stream of the device
        captures, in every mode (CUDA Programming Guide, "Prohibited and Unhandled Operations")."""
        with self.relaxed():
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(device))
            event.synchronize()

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


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _device(t: torch.Tensor) -> int:
    return t.device.index if t.device.index is not None else torch.cuda.current_device()


_taken = {"save": 0, "load": 0}  # views handed to DCP in this process, by every planner


def views_taken() -> dict[str, int]:
    """How many exact-size CPU views DCP was handed in this process so far, on save and on load, by
    the explicit planners and the automatic path alike (for logs, tests and the harness)."""
    return dict(_taken)


class _Viewer:
    """Exact-size CPU views of managed tensors for one save or load, with the once-per-device wait
    for the current stream. On save, which tensors get a view is decided once, over every tensor of the
    planner's final plan, before the first item is resolved: among tensors that share bytes the
    largest gets it (a small view of a table never takes the table's place because DCP happens to
    resolve it first), and disjoint tensors each get their own (TorchRec's tables: views at
    different offsets into one managed allocation)."""

    def __init__(self, any_managed: bool) -> None:
        self.any_managed = any_managed
        self.synced: set[int] = set()
        self.views = 0  # how many views were handed to DCP (for logs and tests)
        self._chosen: Optional[frozenset[tuple[int, int]]] = None  # byte ranges [start, end) to view
        self._handed: set[tuple[int, int]] = set()
        self._lock = threading.Lock()  # FileSystemWriter(thread_count > 1) resolves from several threads

    def eligible(self, t: Any) -> bool:
        if (not isinstance(t, torch.Tensor) or t.device.type != "cuda" or t.layout != torch.strided
                or t.is_quantized or t.numel() == 0 or not t.is_contiguous() or t.is_conj() or t.is_neg()):
            return False
        rt = _rt()
        if rt is None:
            return False
        ptr = t.data_ptr()
        return (rt.is_managed(ptr) and rt.concurrent_managed_access(_device(t))
                and (self.any_managed or rt.prefers_cpu(ptr, _nbytes(t))))

    def decide(self, candidates: list[Any]) -> None:
        """Chooses the byte ranges to view among `candidates` (in plan order): eligible tensors,
        largest first, each taken when it shares no byte with one taken before."""
        ranges = [(t.data_ptr(), t.data_ptr() + _nbytes(t)) for t in candidates if self.eligible(t)]
        order = sorted(range(len(ranges)), key=lambda i: (ranges[i][0] - ranges[i][1], i))
        starts: list[int] = []
        ends: list[int] = []
        chosen = set()
        for i in order:
            start, end = ranges[i]
            k = bisect.bisect_right(starts, start)
            if (k and ends[k - 1] > start) or (k < len(starts) and starts[k] < end):
                continue  # shares bytes with a larger tensor (or an equal one earlier in the plan)
            starts.insert(k, start)
            ends.insert(k, end)
            chosen.add((start, end))
        self._chosen = frozenset(chosen)

    def save_view(self, planner: Any, obj: Any) -> Any:
        """What resolve_data hands DCP: a view of obj when its bytes were chosen, else obj."""
        if not isinstance(obj, torch.Tensor) or obj.device.type != "cuda" or obj.numel() == 0:
            return obj
        key = (obj.data_ptr(), obj.data_ptr() + _nbytes(obj))
        with self._lock:
            if self._chosen is None:
                self.decide(_plan_tensors(planner))
            # a transform_object of the planner's own may hand back other memory: only the chosen
            # bytes, once each (tied weights: the second name takes DCP's normal path)
            if key not in self._chosen or key in self._handed or not self.eligible(obj):
                return obj
            self._handed.add(key)
            return self.view(obj, "save")

    def load_view(self, t: Any) -> Any:
        if not self.eligible(t):
            return t
        with self._lock:
            return self.view(t, "load")

    def view(self, t: torch.Tensor, what: str) -> torch.Tensor:
        dev = _device(t)
        if dev not in self.synced:  # device work that wrote (or reads) the table is complete
            rt = _rt()
            rt.wait_current_stream(dev) if rt else torch.cuda.current_stream(dev).synchronize()
            self.synced.add(dev)
        buf = (ctypes.c_char * _nbytes(t)).from_address(t.data_ptr())
        buf._uvmchunk_source = t  # the managed memory stays alive as long as the view does
        self.views += 1
        _taken[what] += 1
        return torch.frombuffer(buf, dtype=torch.uint8).view(t.dtype).reshape(t.shape)


def _plan_tensors(planner: Any) -> list[Any]:
    """The tensors the planner's final plan writes, in plan order, as its lookup_object finds them;
    empty when the planner has no plan (then nothing is viewed)."""
    from torch.distributed.checkpoint.planner import WriteItemType

    plan = getattr(planner, "plan", None)
    out = []
    for item in getattr(plan, "items", None) or ():
        if item.type in (WriteItemType.TENSOR, WriteItemType.SHARD):
            try:
                out.append(planner.lookup_object(item.index))
            except (KeyError, ValueError, IndexError):
                continue
    return out


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
        return obj if viewer is None else viewer.save_view(self, obj)


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
        return t if viewer is None else viewer.load_view(t)


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


# ---- the automatic path: no code change (uvmchunk._autoload installs it when DCP is imported) ----

_said: set[str] = set()


def _say_once(key: str, level: str, message: str) -> None:
    from ._autoload import log
    if key not in _said:
        _said.add(key)
        log(level, message)


def _auto_viewer(planner: Any, base: type, methods: tuple[str, ...], mixin: type) -> Optional[_Viewer]:
    """A viewer for a `base` planner (or a subclass) that leaves `methods` (resolve_data; or
    resolve_tensor and commit_tensor, which receives what resolve_tensor returned) to PyTorch's;
    None for one that overrides any (said once per class, unless it is one of our mixins, which take
    their own views)."""
    overridden = [m for m in methods if getattr(type(planner), m) is not getattr(base, m)]
    if not overridden:
        return _Viewer(any_managed=False)
    if not isinstance(planner, mixin):
        name, what = type(planner).__qualname__, "saves" if base is DefaultSavePlanner else "loads"
        _say_once(f"{overridden[0]}:{name}", "info", f"planner {name} overrides {overridden[0]}: its {what} take "
                  f"no automatic zero-copy views (put uvmchunk.dcp.{mixin.__name__} first in its bases to add them)")
    return None


def _note_planner(planner: Any, base: type) -> None:
    """A planner that is not a DefaultSavePlanner / DefaultLoadPlanner is left untouched: said once."""
    if planner is not None and not isinstance(planner, base):
        name = type(planner).__qualname__
        _say_once(name, "info", f"planner {name} does not derive from {base.__name__}: left untouched, no "
                  "automatic zero-copy views")


def release_host_cache(device: Optional[int] = None) -> None:
    """Releases the page-locked blocks PyTorch's caching host allocator keeps after they were freed
    (a save's power-of-two staging blocks, lazily served or really pinned). Blocks in use, or whose
    copies are still in flight, stay: the allocator's empty_cache releases only free blocks whose
    recorded events completed (aten/src/ATen/core/CachingHostAllocator.h). So that a save's last
    blocks count as free, the work queued on `device`'s current stream (where DCP copied) is
    waited for first; and a save's staged CPU tensors, still referenced from reference cycles when
    it returns (seen with PyTorch 2.11's FileSystemWriter), are collected first. Both the wait and
    the release (cudaFreeHost) run in relaxed capture mode."""
    if not (torch.cuda.is_initialized() and hasattr(torch._C, "_host_emptyCache")):
        return
    rt = _rt()
    with rt.relaxed() if rt is not None else contextlib.nullcontext():
        if rt is not None:
            rt.wait_current_stream(torch.cuda.current_device() if device is None else device)
        gc.collect()
        torch._C._host_emptyCache()


def _patched(orig: Any, wrapper: Any) -> Any:
    """wrapper with orig's name, docstring and signature (inspect follows __wrapped__, so a mixin's
    signature test still sees PyTorch's), marked so a second install is a no-op."""
    out = functools.wraps(orig)(wrapper)
    out._uvmchunk = True
    return out


_scope = threading.local()  # .auto: this thread is inside a wrapped dcp.save / dcp.load that may take views
_ASYNC_EXECUTORS = ("torch.distributed.checkpoint._async_thread_executor",
                    "torch.distributed.checkpoint._async_process_executor")


def _views_allowed(storage: Any) -> bool:
    """Automatic views only with PyTorch's file system storage (also what checkpoint_id alone
    makes), which writes or reads every item before dcp.save / dcp.load returns. A storage of
    another kind may keep what resolve_data returned past the call (an asynchronous writer), and a
    live view of a table would then be written torn."""
    from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

    if storage is None or isinstance(storage, (FileSystemWriter, FileSystemReader)):
        return True
    name = type(storage).__qualname__
    _say_once(f"storage:{name}", "info", f"storage {name} is not PyTorch's FileSystemWriter / FileSystemReader: "
              "its checkpoints take no automatic zero-copy views")
    return False


def _release_quietly(device: Optional[int]) -> None:
    """release_host_cache for the automatic path: a failure is said, never raised into a save that
    completed."""
    try:
        release_host_cache(device)
    except Exception as e:  # noqa: BLE001
        _say_once(f"release:{type(e).__name__}", "warn", f"host cache not released after a checkpoint "
                  f"({type(e).__name__}: {e})")


def install_auto_views(views: bool = True) -> None:
    """Patches torch.distributed.checkpoint in this process (idempotent; the originals stay reachable
    as ``__wrapped__``). Always: save / async_save / load release the host allocator's cached free
    blocks when they return, also when they raise (an async save: when its staging and its upload
    completed; the save that PyTorch's async executor runs on its own thread leaves that to them),
    so nothing page-locked or lazily committed is held between checkpoints. With `views`:
    DefaultSavePlanner.resolve_data and DefaultLoadPlanner.resolve_tensor (the documented extension
    points) hand DCP exact-size CPU views of eligible managed tensors, for PyTorch's default planners
    and every subclass that does not override them, inside a dcp.save / dcp.load with PyTorch's file
    system storage; set_up_planner starts each save or load afresh."""
    from torch.distributed import checkpoint as dcp_pkg
    from torch.distributed.checkpoint import state_dict_loader, state_dict_saver

    if getattr(state_dict_saver.save, "_uvmchunk", False):
        return

    def wrap_entry(module: Any, name: str, base: type, storage_key: str, after: Any) -> None:
        orig = getattr(module, name, None)
        if orig is None:
            return

        def entry(*args: Any, **kwargs: Any) -> Any:
            _note_planner(kwargs.get("planner"), base)
            # the caller's device, asked on the caller's thread (a new thread's current device is 0)
            device = torch.cuda.current_device() if torch.cuda.is_initialized() else None
            by_executor = sys._getframe(1).f_globals.get("__name__") in _ASYNC_EXECUTORS
            outer = getattr(_scope, "auto", False)
            _scope.auto = (views and name != "async_save" and not by_executor  # staged copies: no views
                           and _views_allowed(kwargs.get(storage_key)))
            result = None
            try:
                result = orig(*args, **kwargs)
                return result
            finally:
                _scope.auto = outer
                if not by_executor:
                    after(result, device)

        new = _patched(orig, entry)
        setattr(module, name, new)
        if getattr(dcp_pkg, name, None) is orig:
            setattr(dcp_pkg, name, new)

    def after_save(_: Any, device: Optional[int]) -> None:
        _release_quietly(device)

    def after_async_save(result: Any, device: Optional[int]) -> None:
        # AsyncSaveResponse (2.9+): staging may still go on; else a Future of the upload, with the
        # staging completed before async_save returned. Blocks the upload used are freed at its end.
        staging = getattr(result, "staging_completion", None)
        if staging is not None:
            staging.add_done_callback(lambda _f: _release_quietly(device))
        else:
            _release_quietly(device)
        upload = getattr(result, "upload_completion", result)
        if hasattr(upload, "add_done_callback"):
            upload.add_done_callback(lambda _f: _release_quietly(device))

    wrap_entry(state_dict_saver, "save", DefaultSavePlanner, "storage_writer", after_save)
    wrap_entry(state_dict_saver, "async_save", DefaultSavePlanner, "storage_writer", after_async_save)
    wrap_entry(state_dict_loader, "load", DefaultLoadPlanner, "storage_reader", after_save)
    if not views:
        return

    def patch(cls: type, resolve: str, methods: tuple[str, ...], mixin: type, on_save: bool) -> None:
        orig_setup, orig_resolve = cls.set_up_planner, getattr(cls, resolve)

        def set_up_planner(self: Any, *args: Any, **kwargs: Any) -> None:
            orig_setup(self, *args, **kwargs)
            viewer = _auto_viewer(self, cls, methods, mixin) if getattr(_scope, "auto", False) else None
            self.__dict__["_uvmchunk_auto"] = viewer

        def resolved(self: Any, *args: Any, **kwargs: Any) -> Any:  # the caller's own argument names
            obj = orig_resolve(self, *args, **kwargs)
            viewer = self.__dict__.get("_uvmchunk_auto")
            if viewer is None:
                return obj
            return viewer.save_view(self, obj) if on_save else viewer.load_view(obj)

        cls.set_up_planner = _patched(orig_setup, set_up_planner)
        setattr(cls, resolve, _patched(orig_resolve, resolved))

    patch(DefaultSavePlanner, "resolve_data", ("resolve_data",), ZeroCopySaveMixin, True)
    patch(DefaultLoadPlanner, "resolve_tensor", ("resolve_tensor", "commit_tensor"), ZeroCopyLoadMixin, False)
    _say_once("installed", "info", "torch.distributed.checkpoint: default planners hand DCP zero-copy views of "
              "managed tensors that prefer the CPU; host cache released after each save")
