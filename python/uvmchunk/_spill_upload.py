"""The upload from a spill mapping: DCP's writer threads write a spilled staged copy through its
mapping; each piece written drops the pages it came from (uvmchunk._streams.in_pieces calls the hook),
so the spill's page cache never piles up during the upload."""
from __future__ import annotations

import ctypes
import threading
from typing import Callable, Optional

from ._spill_file import drop_cache

_regions_lock = threading.Lock()
# address of each mapped spill file whose descriptor is kept -> (the mapping's end, the descriptor):
# the upload's writes from them drop their pages (upload_hook); removed when the spill is released
_regions: dict[int, tuple[int, int]] = {}


def watch(start: int, end: int, fd: int) -> None:
    """The mapping [start, end) of the spill file `fd`: the upload's writes from it drop its pages."""
    with _regions_lock:
        _regions[start] = (end, fd)


def forget(fds: list[int]) -> None:
    """The mappings of the files `fds` no longer watched (before their descriptors close: no drop
    runs on a closed one)."""
    with _regions_lock:
        for start in [s for s, (_, fd) in _regions.items() if fd in fds]:
            del _regions[start]


def upload_hook() -> Optional[Callable[[memoryview], None]]:
    """For a stream the upload writes (uvmchunk._streams.in_pieces): a function to call with each
    piece written, which drops the spill's pages the piece came from; None while no spill is mapped."""
    with _regions_lock:
        return _uploaded if _regions else None


def _uploaded(piece: memoryview) -> None:
    """The upload wrote `piece`: the pages of the spill mappings it lies in, which it read through
    the mapping, are dropped (drop_cache)."""
    start = buffer_address(piece)
    if start is None:
        return
    end = start + piece.nbytes
    with _regions_lock:
        hits = [(s, e, fd) for s, (e, fd) in _regions.items() if s < end and start < e]
    for s, e, fd in hits:
        lo, hi = max(start, s), min(end, e)
        drop_cache(fd, lo - s, hi - lo, lo)


class _PyBuffer(ctypes.Structure):
    """Py_buffer (Python's buffer protocol, Include/pybuffer.h)."""
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


def buffer_address(view: memoryview) -> Optional[int]:
    """The address of a contiguous buffer's first byte (torch.save hands its stream a read-only
    memoryview of a storage, which ctypes' from_buffer refuses), or None."""
    buf = _PyBuffer()
    try:
        if ctypes.pythonapi.PyObject_GetBuffer(ctypes.py_object(view), ctypes.byref(buf), 0) != 0:  # PyBUF_SIMPLE
            return None
    except BufferError:  # not contiguous (ctypes.pythonapi raises the error it set)
        return None
    try:
        return buf.buf
    finally:
        ctypes.pythonapi.PyBuffer_Release(ctypes.byref(buf))

