"""The managed tables' own pages a checkpoint call made resident in host memory: mincore(2) over the
host ranges of the state dict's CUDA managed tensors at the call's entry and at its end. A load into
a freshly allocated table makes every page of it resident for the first time (its first touch):
memory the job had asked for already, not a copy the call made, which the resident-size figures of
uvmchunk._memory cannot tell apart. The report (uvmchunk._report) says the two separately.

mincore(2) sets the least significant bit of one byte per page for a page resident in memory; it
reads the page tables, so it counts a managed range's pages that are mapped on the host (the CUDA
driver migrates them on a host access, CUDA C++ Programming Guide, "Unified Memory"), and allocates
or touches nothing. A tensor's range is taken whole pages wide (its first page down to its last),
and ranges that share pages (tied weights, views of one table) are counted once. The figure is the
net change: pages resident at the end less those at entry (negative when more left than came)."""
from __future__ import annotations

import ctypes
import os
from typing import Any, Optional

_PAGE = os.sysconf("SC_PAGE_SIZE")
_CHUNK = 1 << 30  # bytes of address range asked per mincore call: a vector of 256 KiB at 4 KiB pages
_LOW_BIT = bytes(i & 1 for i in range(256))  # mincore(2): only the least significant bit is defined
_libc: Optional[ctypes.CDLL] = None


def _mincore() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        _libc.mincore.restype = ctypes.c_int
    return _libc.mincore


def page_ranges(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` ((address, bytes)) as whole-page [start, end) ranges, sorted, overlaps merged."""
    out: list[tuple[int, int]] = []
    for start, end in sorted((p - p % _PAGE, -(-(p + n) // _PAGE) * _PAGE) for p, n in spans if n > 0):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def resident_bytes(ranges: list[tuple[int, int]]) -> Optional[int]:
    """Bytes of the pages of `ranges` (whole-page [start, end)) resident now; None when mincore
    fails (a range not mapped: ENOMEM)."""
    mincore, total = _mincore(), 0
    for start, end in ranges:
        for at in range(start, end, _CHUNK):
            n = min(_CHUNK, end - at)
            vec = ctypes.create_string_buffer(n // _PAGE)
            if mincore(at, n, vec) != 0:
                return None
            total += vec.raw.translate(_LOW_BIT).count(1)
    return total * _PAGE


def managed_spans(state_dict: Any) -> list[tuple[int, int]]:
    """(address, bytes) of the distinct CUDA managed tensors of `state_dict` (uvmchunk._views
    local_tensors); empty when it holds no CUDA tensor (CUDA is not asked then) or the runtime
    cannot be asked. One pointer query per distinct tensor, in relaxed capture mode (uvmchunk._cuda)."""
    from ._views import local_tensors

    cuda = {(t.data_ptr(), t.numel() * t.element_size()) for t in local_tensors(state_dict)
            if t.is_cuda and t.numel()}
    if not cuda:
        return []
    from ._cuda import rt

    runtime = rt()
    if runtime is None:
        return []
    with runtime.relaxed():
        return [span for span in cuda if runtime.is_managed(span[0])]


class Residency:
    """The resident bytes of a state dict's managed tables, read at construction (the call's entry)
    and by ``made_resident()`` (its end)."""

    def __init__(self, state_dict: Any) -> None:
        self.ranges = page_ranges(managed_spans(state_dict))
        self.before = resident_bytes(self.ranges) if self.ranges else None

    def made_resident(self) -> Optional[int]:
        """Bytes of the tables' pages resident now less at entry; None when there is no managed
        table or mincore could not read one."""
        if self.before is None:
            return None
        after = resident_bytes(self.ranges)
        return None if after is None else after - self.before
