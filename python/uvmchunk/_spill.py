"""dcp.async_save's staging of managed tensors in a file-backed shared mapping instead of anonymous
memory, once the call's managed bytes exceed ``async_memory_budget``: page cache, which the kernel
can write back and reclaim, where PyTorch's stagers take memory it can only kill for.

One ``Spill`` per wrapped async_save (uvmchunk._auto) with the thread executor: its budget, the
bytes it staged in memory and spilled, its files and its per-call line. The rest lives by concern:
where a spill may go and whether it has room (uvmchunk._spill_folder), one spill file
(uvmchunk._spill_file), PyTorch's staging functions substituted (uvmchunk._spill_stage), and the
upload from a spill mapping (uvmchunk._spill_upload).

Each spilled storage is a file made in the spill folder with O_TMPFILE (else made and unlinked at
once), so no name exists even after kill -9, with its blocks reserved by posix_fallocate before
any byte is copied (a full disk is found then, never as SIGBUS halfway), mapped MAP_SHARED by
``torch.UntypedStorage.from_file`` of /proc/self/fd/N, and filled per 64 MiB block by pwrite
straight from the table's pages where the CPU may read them, else by PyTorch's copy.
The page cache is charged to the job's cgroup like its own memory, so each block is written back
and dropped once filled, and again once the upload wrote it out. When the upload
completes or fails, its blocks and page cache are dropped (FALLOC_FL_PUNCH_HOLE: a late reader
would see zeros, never a fault) and the descriptor closed; the mapping goes with the last reference to the storage. A
caching stager's copy (2.8's cache_staged_state_dict) is reused by the next call, so it keeps its
blocks and is released with the stager."""
from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from typing import Any, Callable, Iterator, Optional

import torch

from . import _accounting, _limits, _spill_file, _spill_folder, _spill_upload
from ._config import configuration, log, say_once, size_bytes
from ._report import size_text

_tls = threading.local()  # .spill: the Spill of the async_save this thread stages for


class SpillRefused(RuntimeError):
    """async_spill = required and the call's managed bytes above the budget cannot be spilled."""


class Spill:
    """The spill of one async_save call. `budget`: managed bytes staged in memory at most; `mode`:
    auto or required; `folder`: async_spill_dir ("" automatic); `ckpt`: the checkpoint's folder;
    `ckpt_bytes`: what the save writes there (_spill_folder.checkpoint_bytes)."""

    def __init__(self, budget: int, budget_why: str, mode: str, folder: str, ckpt: Optional[str],
                 ckpt_bytes: int = 0) -> None:
        self.budget, self.budget_why, self.mode = budget, budget_why, mode
        self.ckpt, self.ckpt_bytes = ckpt, ckpt_bytes
        self.candidates = _spill_folder.candidates(folder, ckpt)  # (folder, chosen by default)
        self.tried = 0  # candidates looked at: a folder short of room moves the spill to the next
        self.explicit = folder  # async_spill_dir: where it is short of room, the spill stops (as documented)
        self.call = _accounting.current()
        self.managed = 0          # managed bytes staged by this call, in memory or spilled
        self.in_memory = 0        # of which in memory
        self.spilled = 0
        self.folder: Optional[str] = None
        self.unavailable: Optional[str] = None  # why nothing more is spilled in this call
        self.moved: list[str] = []  # why the spill left a folder for the next
        self.fds: list[int] = []  # descriptors of this call's spill files, released after the upload
        self.pinned_said = False
        self.prefilled: set[int] = set()   # ids of staged tensors fill wrote (uvmchunk._spill_stage)
        self.keep: list[torch.Tensor] = []  # ... kept alive for the call, so no id is reused
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self.fds_kept = _spill_file.fds_kept()  # the limit as the job has it at this call

    def _give_up(self, why: str) -> None:
        """Nothing more is spilled in this call (`why`), said, and in the call's report; with
        async_spill = required the call is refused."""
        self.unavailable = why
        _accounting.note("spill_unavailable", why, self.call)
        if self.mode == "required":
            raise SpillRefused(f"uvmchunk: dcp.async_save refused: {why}, and async_spill = required")
        log("warn", f"dcp.async_save: {why}: the rest of this call's managed tensors are staged in memory, "
                    "as PyTorch stages them")

    def _next_folder(self) -> Optional[str]:
        """The next candidate folder that may hold a spill (each refused one said), or None."""
        while self.tried < len(self.candidates):
            path, by_default = self.candidates[self.tried]
            self.tried += 1
            folder = _spill_folder.usable(path, by_default)
            if folder is not None and folder != self.folder:
                return folder
        return None

    # ---- one storage -----------------------------------------------------------------------

    def storage(self, source: torch.Tensor, pinned: bool,
                persistent: bool = False) -> Optional[tuple[torch.UntypedStorage, bool]]:
        """A spilled CPU storage for the bytes of `source` (a contiguous managed CUDA tensor), and
        whether it already holds them (written by _spill_file.fill), or None: stage it in memory,
        as PyTorch would (below the budget, or no folder with room). `pinned`: the stager would
        have page-locked it (said once); `persistent`: a caching stager keeps it beyond the upload."""
        nbytes = source.numel() * source.element_size()
        with self._lock:
            self.managed += nbytes
            if self.in_memory + nbytes <= self.budget or self.unavailable is not None:
                self.in_memory += nbytes
                return None
            if self.folder is None:
                self.folder = self._next_folder()
                if self.folder is None:
                    self._give_up("no spill folder (every candidate refused)")
                    self.in_memory += nbytes
                    return None
            self.spilled += nbytes  # reserved: a concurrent storage() counts these bytes as spilled
        # the file's making (the wait for the source's stream, its pwrite) runs outside the lock: no
        # lock is held across a wait on the device or a long write
        made = None
        try:
            made = self._make(source, nbytes, persistent)
        finally:
            with self._lock:
                if made is None:
                    self.spilled -= nbytes
                    self.in_memory += nbytes
        if made is None:
            return None
        with self._lock:
            self._feed(nbytes)
            said, self.pinned_said = self.pinned_said, True
        if pinned and not said:
            say_once("spill-pinned", "warn", "dcp.async_save with a pinned stager: the spilled part of its "
                     "staged copy is not page-locked (a file-backed mapping; the upload is a CPU write)")
        return made

    def _feed(self, nbytes: int) -> None:
        """Spilled bytes into the async_save's accounting (an asynchronous stager may still stage
        after async_save returned, on its own thread: the call is named)."""
        _accounting.add("spilled_bytes", nbytes, self.call)
        _accounting.note("spill_dir", self.folder, self.call)

    def _room(self, nbytes: int) -> Optional[str]:
        """A folder with room for a spill file of `nbytes` beside all the save puts on its file
        system: this call's folder, else the next candidate that has it (said once per move), or
        None (said: the rest of the call stages in memory)."""
        with self._lock:
            folder = self.folder
        while folder is not None:
            short = _spill_folder.shortfall(folder, self.ckpt, nbytes, self.ckpt_bytes)
            if short is None:
                return folder
            with self._lock:
                if self.folder == folder:  # a concurrent storage() may have moved it already
                    self.folder = None if folder == self.explicit else self._next_folder()
                    if self.folder is not None:
                        self.moved.append(short)
                        log("warn", f"dcp.async_save: {short}; trying {self.folder}")
                folder = self.folder
            if folder is None:
                self._give_up(short)
        return None

    def _make(self, source: torch.Tensor, nbytes: int,
              persistent: bool) -> Optional[tuple[torch.UntypedStorage, bool]]:
        """The spill file for `source`, or None (said: the rest of the call stages in memory)."""
        folder = self._room(nbytes)
        if folder is None:
            return None
        try:
            fd = _spill_file.open_unnamed(folder)
        except OSError as e:
            self._give_up(f"cannot make a file in spill folder {folder} ({os.strerror(e.errno or errno.EIO)})")
            return None
        try:
            st, filled = _spill_file.map_filled(fd, source, nbytes)
        except (OSError, RuntimeError) as e:
            os.close(fd)
            why = os.strerror(e.errno) if isinstance(e, OSError) and e.errno else str(e)
            self._give_up(f"cannot reserve {size_text(nbytes)} in spill folder {folder} ({why})")
            return None
        if persistent:
            os.close(fd)  # the mapping keeps the file; released with the stager that caches it
        else:
            with self._lock:
                keep = len(self.fds) < self.fds_kept
                if keep:
                    self.fds.append(fd)
                    _spill_upload.watch(st.data_ptr(), st.data_ptr() + nbytes, fd)
            if not keep:
                say_once("spill-fds", "debug", f"more than {self.fds_kept} spill files in one call: the next are not "
                         "punched after the upload (their pages go when the staged copy is freed)")
                os.close(fd)
        return st, filled

    # ---- the call ------------------------------------------------------------------------------

    def staged(self) -> None:
        """After the staging: the per-call line (info)."""
        if self.managed == 0:
            return
        where = (f"{size_text(self.spilled)} spilled to {self.folder} (file-backed, unlinked)" if self.spilled
                 else "none spilled")
        why = [*self.moved, *([self.unavailable] if self.unavailable else [])]
        log("info", f"dcp.async_save: {size_text(self.managed)} of managed tensors, budget "
                    f"{size_text(self.budget)} ({self.budget_why}): {where}, "
                    f"{size_text(self.in_memory)} in memory" + (f" ({'; '.join(why)})" if why else ""))

    def release(self) -> None:
        """After the upload completed or failed: the spill files' blocks and page cache dropped and
        their descriptors closed; each mapping goes with the last reference to its storage."""
        with self._lock:
            fds, self.fds = self.fds, []
        _spill_upload.forget(fds)  # before the descriptors close: no drop runs on a closed one
        for fd in fds:
            _spill_file.punch(fd)
        if self.call is not None and self.spilled:
            self.call.notes["upload_seconds"] = time.monotonic() - self.started


def active() -> Optional[Spill]:
    """The Spill of the async_save this thread stages for, or None."""
    return getattr(_tls, "spill", None)


@contextlib.contextmanager
def staging_for(spill: Optional[Spill]) -> Iterator[None]:
    """Inside: this thread stages for `spill` (active() returns it); the one before restored after."""
    outer = active()
    _tls.spill = spill
    try:
        yield
    finally:
        _tls.spill = outer


def new_spill(args: tuple, kwargs: dict[str, Any]) -> Optional[Spill]:
    """The Spill of an async_save called with `args` and `kwargs`, or None when this call cannot spill
    (async_spill = off, the process executor, no runtime to tell managed memory)."""
    cfg = configuration()
    mode = cfg.get("async_spill", "auto")
    if mode == "off":
        return None
    executor = kwargs.get("async_checkpointer_type")
    if executor is not None and getattr(executor, "name", str(executor)).upper().endswith("PROCESS"):
        # the process executor sends the staged copy through shared memory: a spill would be copied there
        say_once("spill-process", "info", "dcp.async_save with the process executor: no spill (its staged "
                 "copy is moved to shared memory)")
        return None
    budget_text = cfg.get("async_memory_budget", "auto")
    room = None
    if budget_text == "auto":
        # the room under the container's cgroup limit, read now: /proc/meminfo is the host's there
        room = _limits.memory_room()
        budget = room.room // 4
        why = ("a quarter of MemAvailable" if room.limit is None
               else f"a quarter of the room under the {size_text(room.limit)} limit of {room.source}")
    else:
        budget, why = size_bytes(budget_text) or 0, "async_memory_budget"
    ckpt = _spill_folder.checkpoint_dir(kwargs)
    # what the save writes into the checkpoint's folder: a spill there must leave room for it
    state_dict = args[0] if args else kwargs.get("state_dict")
    spill = Spill(budget, why, mode, _spill_folder.spill_dir(cfg.get("async_spill_dir", "")), ckpt,
                  _spill_folder.checkpoint_bytes(state_dict) if ckpt is not None else 0)
    # for the per-checkpoint report (uvmchunk._report): the budget and the limit it came from
    said = {"async_memory_budget_bytes": budget, "async_memory_budget_from": why}
    if room is not None and room.limit is not None:
        said.update(memory_limit_bytes=room.limit, memory_limit_file=room.source)
    _accounting.note("async_memory_budget", said, spill.call)
    return spill


def call(orig: Callable, args: tuple, kwargs: dict[str, Any]) -> Any:
    """orig (PyTorch's async_save) with this call's managed tensors above the budget spilled; the
    spill is released when the upload completes or fails (or at once when async_save raises)."""
    spill = new_spill(args, kwargs)
    if spill is None:
        return orig(*args, **kwargs)
    try:
        with staging_for(spill):
            result = orig(*args, **kwargs)
    except BaseException:
        spill.release()
        raise
    finally:
        spill.prefilled.clear()  # the staging of a blocking stager is over
        spill.keep.clear()
    _accounting.note("stall_seconds", time.monotonic() - spill.started)
    staging = getattr(result, "staging_completion", None)
    if staging is not None and hasattr(staging, "add_done_callback"):
        staging.add_done_callback(lambda _f: spill.staged())
    else:
        spill.staged()
    upload = getattr(result, "upload_completion", result)
    if hasattr(upload, "add_done_callback"):
        upload.add_done_callback(lambda _f: spill.release())
    else:
        spill.release()
    return result
