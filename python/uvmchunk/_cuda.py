"""The CUDA runtime PyTorch is bound to, asked through ctypes for what PyTorch does not expose:
pointer and range attributes of managed memory, device attributes, the stream-capture mode. Every
query of the package's own goes through here."""
from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator
from typing import Any, Optional

import torch

from ._config import say_once

_MANAGED = 3                 # cudaMemoryTypeManaged
_PREFERRED_LOCATION = 2      # cudaMemRangeAttributePreferredLocation
_LAST_PREFETCH_LOCATION = 4  # cudaMemRangeAttributeLastPrefetchLocation (driver_types.h)
_CONCURRENT_MANAGED = 89     # cudaDevAttrConcurrentManagedAccess
_CPU = -1                    # cudaCpuDeviceId
_INVALID_DEVICE = -2         # cudaInvalidDeviceId
_PREFETCH_PARTS = 64         # at most this many parts of a range asked for their last prefetch
_CAPTURE_RELAXED = 2         # cudaStreamCaptureModeRelaxed


class Runtime:
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
        self.lib.cudaGetErrorName.restype = ctypes.c_char_p
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

    def _query(self, fn: Any, *args: Any) -> int:
        """One query of the package's own, in relaxed capture mode (queries are among the calls a
        library makes on its own behalf: CUDA Runtime API, cudaThreadExchangeStreamCaptureMode);
        its return code. It leaves the thread's last error as it found it: with an error already
        pending for the job (cudaPeekAtLastError), nothing is asked (the code is that error's), since
        clearing a failed query's error (cudaGetLastError) would clear the job's too."""
        pending = self.lib.cudaPeekAtLastError()
        if pending != 0:
            say_once(f"pending:{pending}", "warn", f"an error the job has not read yet ({self.error_name(pending)}) is "
                     "pending on this thread: the library asks CUDA nothing while it is, so tensors take DCP's "
                     "normal path (said once)")
            return pending
        with self.relaxed():
            rc = fn(*args)
        if rc != 0:
            self.lib.cudaGetLastError()
        return rc

    def is_managed(self, ptr: int) -> bool:
        attrs = (ctypes.c_byte * 256)()  # struct cudaPointerAttributes: the type comes first
        if self._query(self.lib.cudaPointerGetAttributes, attrs, ctypes.c_void_p(ptr)) != 0:
            return False
        return ctypes.c_int.from_buffer(attrs, 0).value == _MANAGED

    @contextlib.contextmanager
    def relaxed(self) -> Iterator[None]:
        """This thread in relaxed stream-capture mode: the library's own calls that may wait or
        free page-locked memory are "potentially unsafe" ones that would invalidate another
        thread's global-mode capture (PyTorch's default for torch.cuda.graph) (CUDA Runtime API,
        cudaThreadExchangeStreamCaptureMode)."""
        mode = ctypes.c_int(_CAPTURE_RELAXED)
        pending = self.lib.cudaPeekAtLastError()
        exchanged = self.lib.cudaThreadExchangeStreamCaptureMode(ctypes.byref(mode)) == 0
        if not exchanged and pending == 0:
            self.lib.cudaGetLastError()  # the failed exchange's error is ours, not the job's
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

    def error_name(self, code: int) -> str:
        """cudaGetErrorName of `code` ("cudaErrorInvalidDevice"), or the number when unnamed."""
        name = self.lib.cudaGetErrorName(code)
        return name.decode() if name else f"error {code}"

    def concurrent_managed_access(self, device: int) -> bool:
        """Whether the CPU may read `device`'s managed memory while it works; without it the planners
        take no view there. A "no" is kept for the process (said once). A failed query is said as one
        (with the error's name), leaves the thread's last error as it found it (a failed runtime call
        sets it, and PyTorch's next C10_CUDA_CHECK would raise it as its own: cuda_runtime_api.h,
        cudaGetLastError), reads as "no" for this call only and is asked again at the next."""
        if device not in self._cma:
            v = ctypes.c_int(0)
            rc = self._query(self.lib.cudaDeviceGetAttribute, ctypes.byref(v), _CONCURRENT_MANAGED, device)
            if rc != 0:
                if not self.lib.cudaPeekAtLastError():  # else the job's pending error, said by _query
                    say_once(f"cma-query:{device}:{rc}", "warn", f"cudaDeviceGetAttribute(cudaDevAttrConcurrent"
                             f"ManagedAccess, device {device}) failed with {self.error_name(rc)}: no views on that "
                             "device in this checkpoint (asked again at the next)")
                return False
            self._cma[device] = v.value == 1
            if not self._cma[device]:
                say_once(f"no-cma:{device}", "warn", f"device {device} has no concurrent managed access (the CPU "
                         "may not read managed memory while it works): the planners take no views there")
        return self._cma[device]

    def _range_int(self, attribute: int, ptr: int, nbytes: int) -> Optional[int]:
        """An int-valued cudaMemRangeGetAttribute of [ptr, ptr + nbytes), or None when the query
        failed (its error cleared: the thread's last error stays as it was found)."""
        v = ctypes.c_int(0)
        if self._query(self.lib.cudaMemRangeGetAttribute, ctypes.byref(v), 4, attribute, ctypes.c_void_p(ptr),
                       nbytes) != 0:
            return None
        return v.value

    def prefers_cpu(self, ptr: int, nbytes: int) -> bool:
        return self._range_int(_PREFERRED_LOCATION, ptr, nbytes) == _CPU

    def prefetched_to_device(self, ptr: int, nbytes: int) -> bool:
        """Whether any part of the range was last prefetched to a device (its pages are there until
        the CPU touches them: a view would migrate them back to the host, where stock's copy reads
        them in place). The driver answers cudaInvalidDeviceId for a range never prefetched and for
        one whose pages were prefetched to different places (cuda_runtime_api.h,
        cudaMemRangeGetAttribute), so such a range is asked again in up to _PREFETCH_PARTS equal
        parts; a failed query counts as on the device (the copy, stock's path, is always right)."""
        where = self._range_int(_LAST_PREFETCH_LOCATION, ptr, nbytes)
        if where != _INVALID_DEVICE:
            return where is None or where >= 0
        part = max(2 << 20, -(-nbytes // _PREFETCH_PARTS))
        if part >= nbytes:
            return False
        for start in range(0, nbytes, part):
            where = self._range_int(_LAST_PREFETCH_LOCATION, ptr + start, min(part, nbytes - start))
            if where is None or where >= 0:
                return True
        return False


_runtime: Optional[Runtime] = None
_runtime_failed = False


def rt() -> Optional[Runtime]:
    """The runtime, or None (after one warning) when it cannot be found or loaded."""
    global _runtime, _runtime_failed
    if _runtime is None and not _runtime_failed:
        try:
            _runtime = Runtime()
        except (OSError, RuntimeError, AttributeError) as e:
            _runtime_failed = True
            say_once("no-runtime", "warn", f"{e}; the planners take no views (DCP's normal path for every tensor)")
    return _runtime


