"""The per-checkpoint report: one ``uvmchunk: rank N dcp.save ...`` line per dcp.save /
dcp.async_save / dcp.load (log level ``notice``, the default; ``log_level = warn`` silences it),
and with the configuration's ``report`` (``UVMCHUNK_REPORT=FILE``) the same record as one JSON
object per line appended to FILE. Built on the call's accounting (uvmchunk._accounting), the host
memory measured from the call's entry to its end (uvmchunk._memory) and PyTorch's host allocator
statistics. ``bytes`` counts each CUDA tensor once, and only those (the line says "N MiB of CUDA
tensors"; the state dict's CPU tensors and other values are not counted): on a load, the bytes
read straight from the file (``direct_read_bytes``) are the viewed tables' own (``view_bytes``),
not more. Under ``stock = on``
(uvmchunk-run --stock) the package changes nothing and the report is all it does: the line says
"stock DCP, measured only" and the record has ``"stock": true``. A call that raised says
``failed (ExceptionType)`` and its record has ``"failed"`` instead of byte figures. Both name
the store the call wrote to or read from (``store``: the checkpoint_id, or the storage writer's /
reader's path) and, for object storage, the client (``store_client``: "s3fs", "s3torchconnector").

A figure the package cannot know on this PyTorch is left out of the line and the record, never
guessed: copied bytes are counted where DCP resolves each item (absent when the automatic views are
off), page-locked bytes from torch.cuda.host_memory_stats (absent where it does not exist).

Of the host memory a call added, the managed tables' own pages it made resident (uvmchunk._residency:
a load into a freshly allocated table touches each page for the first time) are said apart
(``tensor_pages_made_resident_bytes``), with what remains: ``host_peak_extra_bytes`` (the peak's
added bytes less those pages, at least 0: exact when the peak came after the pages were made
resident, as a load's does, its last read being the call's last work; a lower bound otherwise) and
``host_after_extra_bytes`` (added after, less those pages). Absent when the state dict holds no
managed table."""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Optional

from . import _accounting
from ._config import configuration, log, stock
from ._memory import Reading, Sampler, reading
from ._residency import Residency

_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB")


def size_text(n: float) -> str:
    """Bytes as a person reads them, powers of 1024, three significant digits: '4.2 GiB', '96 MiB'."""
    sign, n = ("-" if n < 0 else ""), abs(float(n))
    i = 0
    while n >= 1024 and i < len(_UNITS) - 1:
        n /= 1024
        i += 1
    if i == 0:
        return f"{sign}{int(n)} bytes"
    text = f"{n:.3g}" if n < 1000 else f"{n:.0f}"
    return f"{sign}{text} {_UNITS[i]}"


def _rank() -> int:
    """This process's rank: torch.distributed's when initialized, else torchrun's RANK, else 0."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # noqa: BLE001
        pass
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def _pinned_handed_out() -> Optional[int]:
    """Bytes PyTorch's caching host allocator has handed out in this process so far (cumulative),
    None where this PyTorch does not say. 2.10+: ``active_bytes.allocated`` (blocks checked out to
    callers); older releases: ``allocated_bytes.allocated``, which there means the same
    (torch/cuda/memory.py, host_memory_stats' docstring of each release)."""
    import torch

    stats = getattr(torch.cuda, "host_memory_stats", None)
    if stats is None or not torch.cuda.is_initialized():
        return None
    try:
        s = stats()
    except Exception:  # noqa: BLE001
        return None
    for key in ("active_bytes.allocated", "allocated_bytes.allocated"):
        if key in s:
            return int(s[key])
    return None


def entry() -> tuple[Reading, float]:
    """What a wrapped entry point reads first, before anything else of the package runs: host
    memory (uvmchunk._memory.reading) and the time (time.monotonic, seconds)."""
    return reading(), time.monotonic()


class Report:
    """What is measured around one call: from `at_entry` (``entry()`` at the wrapper's entry) to
    ``finish`` after it (for dcp.async_save: when its upload completed)."""

    def __init__(self, call: _accounting.Call, at_entry: Optional[tuple[Reading, float]] = None) -> None:
        self.call = call
        mem, self.t0 = at_entry or entry()
        self.t1: Optional[float] = None
        self.failed: Optional[str] = None  # the exception's type name, when the call raised
        self.pinned0 = _pinned_handed_out()
        self.store: dict[str, str] = {}  # store, store_client (store_of), set by start()
        self.residency: Optional[Residency] = None  # the managed tables' resident pages, set by start()
        self.made_resident: Optional[int] = None  # bytes of them made resident, read by finish()
        self.sampler = Sampler(mem).start()

    def record(self) -> dict[str, Any]:
        """The call's record: sizes in bytes, times in seconds; only figures known on this PyTorch."""
        c, s = self.call.counts, self.sampler
        rec: dict[str, Any] = {"rank": _rank(), "pid": os.getpid(), "call": self.call.kind,
                               "time": round(time.time(), 3), "seconds": round((self.t1 or time.monotonic()) - self.t0, 6)}
        rec.update(self.store)
        if stock():
            rec["stock"] = True
        rec.update(host_peak_added_bytes=s.added_at_peak, host_after_added_bytes=s.added_after,
                   host_anon_after_added_bytes=s.anon_added_after, host_resident_before_bytes=s.base,
                   host_anon_before_bytes=s.anon_base)
        if self.made_resident is not None:  # the tables' own pages, apart from what the call added
            made = self.made_resident
            rec.update(tensor_pages_made_resident_bytes=made,
                       host_peak_extra_bytes=max(s.added_at_peak - max(made, 0), 0),
                       host_after_extra_bytes=s.added_after - made)
        if self.failed is not None:  # what it moved before it raised is no figure of a checkpoint
            rec["failed"] = self.failed
            return rec
        if self.call.kind == "dcp.async_save":
            rec["returned_seconds"] = round(self.call.seconds, 6)  # async_save's own return
        for field in ("view_tensors", "view_bytes"):
            rec[field] = c.get(field, 0)
        if self.call.notes.get("copies_counted"):
            rec["copied_bytes"] = c.get("copied_bytes", 0)
        pinned1 = _pinned_handed_out() if self.pinned0 is not None else None
        if pinned1 is not None:
            rec["copied_pinned_bytes"] = max(pinned1 - self.pinned0, 0)
        for field, v in c.items():  # what other paths add (direct reads, spill, ...): when non-zero
            if v and field not in rec:
                rec[field] = v
        # async_save: its async_memory_budget and the memory limit that set it (uvmchunk._spill)
        rec.update(self.call.notes.get("async_memory_budget", {}))
        if self.call.notes.get("spill_unavailable"):  # why managed bytes above the budget stayed in memory
            rec["spill_unavailable"] = self.call.notes["spill_unavailable"]
        for way in ("upload", "download"):  # uvmchunk._uploads, _downloads: first request sent to last done
            if way in self.call.notes:
                lo, hi = self.call.notes[way]
                rec[f"{way}_seconds"] = round(hi - lo, 6)
        # each tensor once: a load's direct reads went into the viewed tables (view_bytes)
        rec["bytes"] = rec["view_bytes"] + rec.get("copied_bytes", 0)
        return rec

    def finish(self, failed: Optional[str] = None) -> Optional[dict[str, Any]]:
        """Stops the measurement, says the line, appends the JSON record; never raises. `failed`:
        the type name of the exception the call raised."""
        try:
            self.t1 = time.monotonic()
            self.failed = failed
            if self.residency is not None:  # before the end reading: its own buffers are the call's
                self.made_resident = self.residency.made_resident()
            self.sampler.stop()
            rec = self.record()
            _hand_totals_to_library()
            log("notice", line(rec))
            path = configuration().get("report", "")
            if path:
                append(path, rec)
            return rec
        except Exception as e:  # noqa: BLE001  (a report must never fail a checkpoint)
            log("warn", f"no report of this checkpoint ({type(e).__name__}: {e})")
            return None


def _host(rec: dict[str, Any]) -> str:
    """Host memory the call added: at its peak, and what it left resident (or released) after; of
    it, when the call made managed tables' pages resident (a load into a fresh table touches each
    page first), those pages and the extra memory at the peak beside them."""
    after = rec["host_after_added_bytes"]
    left = f"+{size_text(after)} after" if after >= 0 else f"released {size_text(-after)} after"
    made = rec.get("tensor_pages_made_resident_bytes", 0)
    of = (f" ({size_text(made)} of it the managed tables' own pages made resident; "
          f"+{size_text(rec['host_peak_extra_bytes'])} extra at peak)" if made > 0 else "")
    return f"host +{size_text(rec['host_peak_added_bytes'])} at peak, {left}{of}"


def _where(rec: dict[str, Any]) -> str:
    """The line's end: the store, when the record names one ("; to s3://b/ckpt (s3fs)", "; from /ckpt"),
    and a concurrent upload's or download's connections and rate ("(s3fs, 3 connections, 48 MiB at
    41.6 MiB/s)": uvmchunk._uploads, uvmchunk._downloads)."""
    if "store" not in rec:
        return ""
    how = [rec["store_client"]] if "store_client" in rec else []
    for way in ("upload", "download"):
        if rec.get(f"{way}_bytes"):
            n, secs = rec.get(f"{way}_connections", 1), rec.get(f"{way}_seconds", 0)
            rate = f" at {size_text(rec[f'{way}_bytes'] / secs)}/s" if secs > 0 else ""
            how.append(f"{n} connection{'s' if n != 1 else ''}, {size_text(rec[f'{way}_bytes'])}{rate}")
    client = f" ({', '.join(how)})" if how else ""
    return f"; {'from' if rec['call'].startswith('dcp.load') else 'to'} {rec['store']}{client}"


def line(rec: dict[str, Any]) -> str:
    """The record as one line (without the ``uvmchunk: `` prefix log adds)."""
    secs = rec["seconds"]
    head = f"rank {rec['rank']} {rec['call']}" + (" (stock DCP, measured only)" if rec.get("stock") else "")
    if "failed" in rec:
        return f"{head} failed ({rec['failed']}) after {secs:.2f} s; {_host(rec)}{_where(rec)}"
    n = rec["view_tensors"]
    if "copied_bytes" in rec and rec["bytes"] == 0 and not rec.get("spilled_bytes"):
        # no CUDA tensor was resolved: nothing of this checkpoint went through the library
        what = "no CUDA tensors in this checkpoint" if rec.get("stock") else \
            "no managed tensors in this checkpoint; the library did nothing"
        return f"{head} in {secs:.2f} s: {what}; {_host(rec)}{_where(rec)}"
    rate = f" ({size_text(rec['bytes'] / secs)}/s)" if secs > 0 and rec["bytes"] else ""
    load = rec["call"].startswith("dcp.load")  # dcp.load and the deprecated dcp.load_state_dict
    parts = []
    owner = "table's" if n == 1 else "tables'"
    direct = rec.get("direct_read_bytes")
    if n or not rec.get("stock"):  # stock views nothing, by design: not said
        parts.append(f"{size_text(rec['view_bytes'])} {'read into' if load else 'written from'} {n} managed {owner} pages"
                     + (f" ({size_text(direct)} of them straight from the file)" if direct else "")
                     if n else "no managed table's pages viewed")
    if "copied_bytes" in rec:
        pinned = rec.get("copied_pinned_bytes")
        parts.append(f"{size_text(rec['copied_bytes'])} copied"
                     + (f" ({size_text(pinned)} of page-locked blocks)" if pinned else ""))
    elif rec.get("copied_pinned_bytes"):
        parts.append(f"{size_text(rec['copied_pinned_bytes'])} of page-locked blocks")
    if rec.get("spilled_bytes"):
        budget = (f" (budget {size_text(rec['async_memory_budget_bytes'])}: {rec['async_memory_budget_from']})"
                  if "async_memory_budget_bytes" in rec else "")
        parts.append(f"{size_text(rec['spilled_bytes'])} staged in a file-backed mapping{budget}")
    if rec.get("spill_unavailable"):
        parts.append(f"not spilled: {rec['spill_unavailable']}, staged in memory as stock stages it")
    if rec.get("bounce_bytes"):
        parts.append(f"bounce buffer {size_text(rec['bounce_bytes'])}")
    if rec.get("changed_tensors"):  # uvmchunk._records: their records' CRC-32 set to the bytes written
        changed = rec["changed_tensors"]
        parts.append(f"{changed} table{'s' if changed != 1 else ''} changed during the save (written as "
                     f"{'it was' if changed == 1 else 'they were'}, with the CRC-32 of the bytes written)")
    # the CUDA tensors' bytes only: a state dict's CPU tensors and other values are DCP's alone
    text = (f"{head} {size_text(rec['bytes'])} of CUDA tensors in {secs:.2f} s{rate}: {', '.join(parts)}; "
            f"{_host(rec)}")
    if rec.get("stock_pinned_bytes"):
        text += f" (stock: {size_text(rec['stock_pinned_bytes'])} page-locked)"
    return text + _where(rec)


_VIEWS_ENV = "_UVMCHUNK_VIEW_TOTALS"  # read once by the library at exit (interpose/stats.c); not a
# UVMCHUNK_* name, which the configuration would take for a key


_exit_hook = False


def _hand_totals_to_library() -> None:
    """Arranges for the process's view totals to be where the library's exit stats line reads them:
    tensors and bytes saved (dcp.save, dcp.async_save) and loaded through views. Written once, by
    Python's exit handlers (on the main thread, before the C library's exit handler prints), never
    per checkpoint: setenv from a checkpoint's thread (an async upload's callback) races with
    getenv in the job's other threads, and glibc may free the environment array a getenv is
    reading (setenv(3), "MT-Unsafe const:env"). A process that ends with os._exit has no totals."""
    global _exit_hook
    if not _exit_hook:
        _exit_hook = True
        import atexit
        atexit.register(_write_totals)


def _write_totals() -> None:
    t = _accounting.totals()
    saved = [sum(t.get(k, {}).get(f, 0) for k in ("dcp.save", "dcp.async_save", "dcp.save_state_dict")) for f in ("view_tensors", "view_bytes")]
    loaded = [sum(t.get(k, {}).get(f, 0) for k in ("dcp.load", "dcp.load_state_dict")) for f in ("view_tensors", "view_bytes")]
    os.environ[_VIEWS_ENV] = " ".join(str(n) for n in [os.getpid()] + saved + loaded)  # a child's is not ours


def append(path: str, rec: dict[str, Any]) -> None:
    """Appends `rec` to `path` as one JSON line: O_APPEND and one write(2), so the lines of ranks
    that share the file never interleave (POSIX: each append write is atomic at the file's end)."""
    data = (json.dumps(rec, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        if os.write(fd, data) != len(data):
            log("warn", f"report {path}: short write (disk full?)")
    finally:
        os.close(fd)


def start(call: _accounting.Call, args: tuple, kwargs: dict,
          at_entry: Optional[tuple[Reading, float]] = None) -> Optional[Report]:
    """Starts measuring `call` (opened by _accounting.begin just before) of a wrapped entry point
    called with `args` / `kwargs`, from `at_entry` (``entry()`` read first by the wrapper); None
    when it cannot (said once). dcp.async_save stages a copy of
    every CUDA tensor of its state dict (torch/distributed/checkpoint/state_dict_saver.py): those
    bytes are its copies."""
    try:
        if call.kind == "dcp.async_save":
            state = kwargs.get("state_dict", args[0] if args else None)
            _accounting.add("copied_bytes", _cuda_bytes(state))
            _accounting.note("copies_counted", True)
        report = Report(call, at_entry)
        report.store = store_of(call.kind, kwargs)
        report.residency = Residency(kwargs.get("state_dict", args[0] if args else None))
        return report
    except Exception as e:  # noqa: BLE001
        log("warn", f"no report of this checkpoint ({type(e).__name__}: {e})")
        return None


# DCP's own storage classes for a local folder: no client to name
_LOCAL = ("torch.distributed.checkpoint.filesystem",)


def store_of(kind: str, kwargs: dict) -> dict[str, str]:
    """Where a dcp.save / dcp.async_save / dcp.load called with `kwargs` (all three take
    checkpoint_id and storage_writer / storage_reader by keyword only) writes or reads:
    ``store``, the checkpoint_id (DCP resets the storage to it) or else the storage's ``path``;
    ``store_client`` for a store that is not a local folder: "s3torchconnector" for the S3
    Connector's S3StorageWriter / S3StorageReader, the fsspec implementation's package for a URL
    (fsspec.registry.known_implementations: "s3fs" for s3://, "fsspec" for file://), else the
    storage's class name. Empty when neither is known."""
    storage = kwargs.get("storage_reader" if kind.startswith("dcp.load") else "storage_writer")
    where = kwargs.get("checkpoint_id")
    if where is None:
        where = getattr(storage, "path", None)
    out: dict[str, str] = {}
    if where is not None:
        out["store"] = os.fspath(where) if isinstance(where, (str, os.PathLike)) else str(where)
    module = type(storage).__module__ if storage is not None else ""
    if module.startswith("s3torchconnector"):
        out["store_client"] = "s3torchconnector"
    elif "://" in out.get("store", "") and (storage is None or "fsspec" in module):
        out["store_client"] = _fsspec_client(out["store"].split("://", 1)[0])
    elif storage is not None and module not in _LOCAL:
        out["store_client"] = type(storage).__qualname__
    return out


def _fsspec_client(protocol: str) -> str:
    """The package of fsspec's implementation of `protocol` ("s3fs" for "s3"), the protocol
    itself where fsspec is absent or does not know it; imports no client."""
    try:
        from fsspec.registry import known_implementations
        return known_implementations[protocol]["class"].split(".", 1)[0]
    except Exception:  # noqa: BLE001
        return protocol


def done(report: Optional[Report], result: Any, error: Optional[BaseException] = None) -> None:
    """Finishes `report` once the call is over: now (`error`: what it raised), or for
    dcp.async_save when its upload completed (the Future it returned, or
    AsyncSaveResponse.upload_completion), failed when that Future holds an exception; never raises."""
    if report is None:
        return
    try:
        upload = getattr(result, "upload_completion", result) if report.call.kind == "dcp.async_save" else None
        if error is None and upload is not None and hasattr(upload, "add_done_callback"):
            upload.add_done_callback(lambda f: report.finish(_future_failure(f)))
        else:
            report.finish(None if error is None else type(error).__name__)
    except Exception as e:  # noqa: BLE001  (a report must never fail a checkpoint)
        log("warn", f"no report of this checkpoint ({type(e).__name__}: {e})")


def _future_failure(f: Any) -> Optional[str]:
    """The type name of what a completed Future raised (CancelledError when cancelled), else None."""
    if f.cancelled():
        return "CancelledError"
    e = f.exception()
    return None if e is None else type(e).__name__


def resolved(before: Any, after: Any, call: Optional[_accounting.Call] = None) -> None:
    """Counts what DCP copies, to `call` (the planner's, taken on the caller's thread): a CUDA tensor
    that the automatic views' resolve hook (uvmchunk._auto) handed back unchanged takes DCP's copy
    through host memory."""
    _accounting.note("copies_counted", True, call)
    if after is before and getattr(before, "is_cuda", False):
        _accounting.add("copied_bytes", before.numel() * before.element_size(), call)


def _cuda_bytes(obj: Any) -> int:
    """Bytes of the distinct CUDA tensors in a (nested) state dict (uvmchunk._views.local_tensors)."""
    from ._views import local_tensors

    seen = {(t.data_ptr(), t.numel() * t.element_size()) for t in local_tensors(obj) if t.is_cuda}
    return sum(n for _, n in seen)
