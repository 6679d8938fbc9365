"""One accounting of what a checkpoint call moved and what host memory it cost, fed by every path
of the package (views, direct reads, copies, spill) and read by the per-checkpoint report and the
process totals. Imports nothing of torch.

A wrapped ``dcp.save`` / ``dcp.async_save`` / ``dcp.load`` opens a ``Call`` with ``begin`` and
closes it with ``end``; code that runs inside it, on the caller's thread or on DCP's writer and
reader threads, adds to it with ``add``. Calls are process-wide (not thread-local): DCP resolves
items on its own threads. Code that belongs to one call (a planner's views, a load's reads) names
it, taken on the caller's thread when it was made (uvmchunk._auto keeps it per planner); otherwise
``add`` goes to this thread's innermost open call, and on a thread that opened none to the call
opened last. The ``save`` that PyTorch 2.8's ``async_save`` runs on its executor thread opens its
own call there, which is not reported (the ``async_save``'s report counts its staged copies)."""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Optional

# Counters a Call carries, all in bytes unless named *_tensors; ``add`` takes these names.
FIELDS = (
    "view_tensors",          # tensors DCP wrote from, or read into, a managed table's own pages
    "view_bytes",
    "direct_read_bytes",     # load: bytes read from the file straight into managed pages
    "bounce_bytes",          # load: the largest bounce buffer a scattered read used at once
    "copied_bytes",          # tensors DCP copied to the host (its normal path)
    "copied_pinned_bytes",   # of which into page-locked memory
    "stock_pinned_bytes",    # what stock DCP would page-lock for the viewed tensors (power of two)
    "spilled_bytes",         # async_save: managed bytes staged in a file-backed mapping
    "changed_tensors",       # save: viewed tables written otherwise than torch.save's CRC-32 pass read them
    "upload_bytes",          # save: bytes a concurrent multipart upload sent (uvmchunk._uploads)
    "upload_connections",    # save: the most of its requests in flight at once (a peak, see most())
    "download_bytes",        # load: bytes direct reads fetched as concurrent parts (uvmchunk._downloads)
    "download_connections",  # load: the most of those requests in flight at once (a peak)
)


@dataclasses.dataclass(eq=False)  # compared by identity: two calls with the same figures are two
class Call:
    """One dcp.save / dcp.async_save / dcp.load. Times in seconds (time.monotonic), sizes in bytes."""

    kind: str                               # "dcp.save", "dcp.async_save" or "dcp.load"
    started: float = dataclasses.field(default_factory=time.monotonic)
    ended: Optional[float] = None
    counts: dict[str, int] = dataclasses.field(default_factory=lambda: dict.fromkeys(FIELDS, 0))
    notes: dict[str, Any] = dataclasses.field(default_factory=dict)  # path-specific (spill folder, ...)
    owner: list["Call"] = dataclasses.field(default_factory=list, repr=False)  # its thread's open calls

    @property
    def seconds(self) -> float:
        return (self.ended if self.ended is not None else time.monotonic()) - self.started


_lock = threading.Lock()
_open: list[Call] = []  # every open call, in the order they were opened
_tls = threading.local()  # .calls: this thread's open calls, innermost last
_totals: dict[str, dict[str, int]] = {}  # kind -> field -> sum over the process's calls


def begin(kind: str) -> Call:
    """Opens a call; the caller must end() it (in a finally)."""
    call = Call(kind, owner=_mine())
    with _lock:
        _open.append(call)
        call.owner.append(call)
    return call


def _mine() -> list[Call]:
    if not hasattr(_tls, "calls"):
        _tls.calls = []
    return _tls.calls


def end(call: Call) -> Call:
    """Closes `call`, adds it to the process totals, and returns it."""
    call.ended = time.monotonic()
    with _lock:  # on any thread: the call leaves the list of the thread that opened it
        if call in call.owner:
            call.owner.remove(call)
        if call in _open:
            _open.remove(call)
        sums = _totals.setdefault(call.kind, dict.fromkeys(FIELDS, 0))
        for k, v in call.counts.items():
            sums[k] += v
        sums["calls"] = sums.get("calls", 0) + 1
    return call


def current() -> Optional[Call]:
    """This thread's innermost open call; on a thread that opened none, the call opened last; None
    outside any."""
    mine = _mine()
    with _lock:
        if mine:
            return mine[-1]
        return _open[-1] if _open else None


def add(field: str, n: int = 1, call: Optional[Call] = None) -> None:
    """Adds `n` to `field` of `call`, by default the current() one (nothing outside a call)."""
    call = call or current()
    if call is not None:
        with _lock:
            call.counts[field] += n


def most(field: str, n: int, call: Optional[Call] = None) -> None:
    """Raises `field` of `call` (default: the current() one) to `n` if it is below: a peak, such as
    the most requests in flight at once (the process totals sum the calls' peaks)."""
    call = call or current()
    if call is not None:
        with _lock:
            call.counts[field] = max(call.counts[field], n)


class InFlight:
    """Requests in flight per call, over all of its threads and files; the most at once is the
    call's `field` (a peak: most()), the connections a line reports."""

    def __init__(self, field: str) -> None:
        self.field = field
        self.lock = threading.Lock()
        self.now: dict[int, int] = {}  # id(call) -> requests in flight now

    def begin(self, call: Optional[Call]) -> None:
        if call is None:
            return
        with self.lock:
            n = self.now[id(call)] = self.now.get(id(call), 0) + 1
        most(self.field, n, call)

    def end(self, call: Optional[Call]) -> None:
        if call is None:
            return
        with self.lock:
            n = self.now.get(id(call), 1) - 1
            if n:
                self.now[id(call)] = n
            else:
                self.now.pop(id(call), None)


def span(key: str, start: float, end: float, call: Optional[Call] = None) -> None:
    """Widens the note `key` of `call` (default: the current() one), a (start, end) pair of
    time.monotonic() seconds, to cover `start`..`end`: the time work spread over threads took."""
    call = call or current()
    if call is not None:
        with _lock:
            lo, hi = call.notes.get(key, (start, end))
            call.notes[key] = (min(lo, start), max(hi, end))


def note(key: str, value: Any, call: Optional[Call] = None) -> None:
    """Records a path-specific fact on `call`, by default the current() one (nothing outside a call)."""
    call = call or current()
    if call is not None:
        with _lock:
            call.notes[key] = value


def totals() -> dict[str, dict[str, int]]:
    """kind -> field -> sum over the calls this process ended so far (a copy)."""
    with _lock:
        return {k: dict(v) for k, v in _totals.items()}
