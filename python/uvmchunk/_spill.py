"""dcp.async_save's staging of managed tensors in a file-backed shared mapping instead of anonymous
memory, once the call's managed bytes exceed ``async_memory_budget``: page cache, which the kernel
can write back and reclaim, where PyTorch's stagers take memory it can only kill for.

One ``Spill`` per wrapped async_save (uvmchunk._auto) with the thread executor. PyTorch's staging
creates each CPU copy in one place per version, and only that creation is substituted, for managed
storages only; the copy itself stays PyTorch's (same call, stream and synchronisation):

- 2.11 and newer, ``DefaultStager``: ``StateDictStager._stage_untyped_storage`` (one CPU storage per
  source storage: torch/distributed/checkpoint/_state_dict_stager.py);
- every version, ``BlockingAsyncStager`` (2.8's and 2.11's ``FileSystemWriter`` is one) and 2.8's
  path for writers that are no stager: ``_create_cpu_state_dict`` as imported into
  torch/distributed/checkpoint/staging.py and state_dict_saver.py (plain tensors, ShardedTensor
  local shards and DTensor local tensors; other leaves keep PyTorch's creation there).

Each spilled storage is a file made in the spill folder with O_TMPFILE (else made and unlinked at
once), so no name exists even after kill -9, with its blocks reserved by posix_fallocate before
any byte is copied (a full disk is found then, never as SIGBUS halfway), mapped MAP_SHARED by
``torch.UntypedStorage.from_file`` of /proc/self/fd/N, and filled per 64 MiB block by pwrite
straight from the table's pages where the CPU may read them, else by PyTorch's copy (``_fill``).
The page cache is charged to the job's cgroup like its own memory, so each block is written back
and dropped once filled, and again once the upload wrote it out (``upload_hook``). When the upload
completes or fails, its blocks and page cache are dropped (FALLOC_FL_PUNCH_HOLE: a late reader
would see zeros, never a fault) and the descriptor closed; the mapping goes with the last reference to the storage. A
caching stager's copy (2.8's cache_staged_state_dict) is reused by the next call, so it keeps its
blocks and is released with the stager."""
from __future__ import annotations

import ctypes
import errno
import os
import resource
import tempfile
import threading
import time
import urllib.parse
from typing import Any, Callable, Optional

import torch

from . import _accounting, _limits
from ._config import configuration, log, say_once, size_bytes
from ._report import size_text
from ._views import contains_itself

MIB = 1 << 20
# statfs(2) f_type of file systems whose pages are memory: a spill there saves nothing
# (linux/magic.h)
MEMORY_FS = {0x01021994: "tmpfs", 0x858458F6: "ramfs", 0x958458F6: "hugetlbfs"}
# ... and of network and FUSE file systems, which do not make the checkpoint's folder a local one
NETWORK_FS = {0x6969: "nfs", 0xFF534D42: "cifs", 0xFE534D42: "smb2", 0x517B: "smb", 0x65735546: "fuse",
              0x00C36400: "ceph", 0x0BD00BD0: "lustre", 0x47504653: "gpfs", 0x01021997: "9p",
              0x5346414F: "afs", 0x6B414653: "afs"}
# descriptors kept open (to punch the files' blocks after the upload) at most: a quarter of the
# soft RLIMIT_NOFILE, so a job with thousands of tables never runs out of descriptors; a file past
# it is closed at once, and its blocks go when its staged copy is freed
def _fds_kept() -> int:
    return max(16, min(1024, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 4))
RESERVE = 64 * MIB  # free space a spill leaves on its file system beyond what it and the checkpoint need
_FALLOC_PUNCH = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE (linux/falloc.h)

_MADV_PAGEOUT = 21  # asm-generic/mman-common.h (Linux 5.4): reclaim the range; never loses a byte
_PAGE = os.sysconf("SC_PAGE_SIZE")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_tls = threading.local()  # .spill: the Spill of the async_save this thread stages for
_regions_lock = threading.Lock()
# address of each mapped spill file whose descriptor is kept -> (the mapping's end, the descriptor):
# the upload's writes from them drop their pages (upload_hook); removed when the spill is released
_regions: dict[int, tuple[int, int]] = {}


class SpillRefused(RuntimeError):
    """async_spill = required and the call's managed bytes above the budget cannot be spilled."""


def fs_type(path: str) -> Optional[int]:
    """statfs(2) f_type of the file system holding `path` (its first field, a long on Linux), or None."""
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
    if _libc.statfs(os.fsencode(path), buf) != 0:
        return None
    return ctypes.c_ulong.from_buffer(buf).value & 0xFFFFFFFF


def _existing(path: str) -> str:
    """`path` or its nearest existing ancestor (a checkpoint folder is made by the upload)."""
    path = os.path.abspath(path)
    while not os.path.isdir(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def checkpoint_dir(kwargs: dict[str, Any]) -> Optional[str]:
    """The local folder async_save writes to: the storage writer's path, else checkpoint_id; None
    for a store that is not a local folder (a URL such as s3://..., or a writer other than DCP's
    FileSystemWriter: fsspec's keeps a URL's path without its scheme, "bucket/ckpt", which read
    as a folder would put the spill in the working directory)."""
    writer = kwargs.get("storage_writer")
    if writer is not None and type(writer).__module__ != "torch.distributed.checkpoint.filesystem":
        return None
    where = getattr(writer, "path", None) or kwargs.get("checkpoint_id")
    if where is None or "://" in str(where):
        return None
    try:
        return os.fspath(where)
    except TypeError:
        return None


class Spill:
    """The spill of one async_save call. `budget`: managed bytes staged in memory at most; `mode`:
    auto or required; `folder`: async_spill_dir ("" automatic); `ckpt`: the checkpoint's folder."""

    def __init__(self, budget: int, budget_why: str, mode: str, folder: str, ckpt: Optional[str]) -> None:
        self.budget, self.budget_why, self.mode = budget, budget_why, mode
        self.ckpt = ckpt
        self.candidates: list[tuple[str, bool]] = []  # (folder, chosen by default)
        if folder:
            self.candidates.append((folder, False))
        if ckpt:
            self.candidates.append((ckpt, True))
        self.candidates.append((tempfile.gettempdir(), False))
        self.call = _accounting.current()
        self.managed = 0          # managed bytes staged by this call, in memory or spilled
        self.in_memory = 0        # of which in memory
        self.spilled = 0
        self.folder: Optional[str] = None
        self.unavailable: Optional[str] = None  # why nothing more is spilled in this call
        self.fds: list[int] = []  # descriptors of this call's spill files, released after the upload
        self.pinned_said = False
        self.prefilled: set[int] = set()   # ids of staged tensors _fill wrote (see _copy_state_dict)
        self.keep: list[torch.Tensor] = []  # ... kept alive for the call, so no id is reused
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self.fds_kept = _fds_kept()  # the limit as the job has it at this call

    # ---- where -----------------------------------------------------------------------------

    def _refusal(self, path: str, by_default: bool) -> Optional[str]:
        """Why `path` cannot hold the spill, or None."""
        if not os.path.isdir(path):
            return "not a folder"
        if not os.access(path, os.W_OK | os.X_OK):
            return "not writable"
        kind = fs_type(path)
        if kind in MEMORY_FS:
            return f"on {MEMORY_FS[kind]}, whose pages are memory: a spill there saves none"
        if by_default and kind in NETWORK_FS:
            return f"on {NETWORK_FS[kind]}, not a local file system"
        return None

    def _choose(self) -> Optional[str]:
        for path, by_default in self.candidates:
            folder = _existing(path) if by_default else path
            why = self._refusal(folder, by_default)
            if why is None:
                return folder
            say_once(f"spill-refused:{folder}:{why}", "warn",
                     f"dcp.async_save: {folder} refused as a spill folder ({why}); trying the next")
        return None

    def _give_up(self, why: str) -> None:
        self.unavailable = why
        if self.mode == "required":
            raise SpillRefused(f"uvmchunk: dcp.async_save refused: {why}, and async_spill = required")
        log("warn", f"dcp.async_save: {why}: the rest of this call's managed tensors are staged in memory, "
                    "as PyTorch stages them")

    # ---- one storage -----------------------------------------------------------------------

    def storage(self, source: torch.Tensor, pinned: bool,
                persistent: bool = False) -> Optional[tuple[torch.UntypedStorage, bool]]:
        """A spilled CPU storage for the bytes of `source` (a contiguous managed CUDA tensor), and
        whether it already holds them (written by _fill), or None: stage it in memory,
        as PyTorch would (below the budget, or no folder with room). `pinned`: the stager would
        have page-locked it (said once); `persistent`: a caching stager keeps it beyond the upload."""
        nbytes = source.numel() * source.element_size()
        with self._lock:
            self.managed += nbytes
            if self.in_memory + nbytes <= self.budget or self.unavailable is not None:
                self.in_memory += nbytes
                return None
            if self.folder is None:
                self.folder = self._choose()
                if self.folder is None:
                    self._give_up("no spill folder (every candidate refused)")
                    self.in_memory += nbytes
                    return None
            before = self.spilled
            self.spilled += nbytes  # reserved: a concurrent storage() counts these bytes as spilled
        # the file's making (the wait for the source's stream, its pwrite) runs outside the lock: no
        # lock is held across a wait on the device or a long write
        made = None
        try:
            made = self._make(source, nbytes, persistent, before)
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

    def _make(self, source: torch.Tensor, nbytes: int, persistent: bool,
              before: int) -> Optional[tuple[torch.UntypedStorage, bool]]:
        """The spill file for `source`, or None (said: the rest of the call stages in memory);
        `before`: the bytes this call spilled before it."""
        folder = self.folder
        try:
            vfs = os.statvfs(folder)
            # on the checkpoint's own file system the checkpoint needs the spilled bytes again
            same = self.ckpt is not None and os.stat(folder).st_dev == os.stat(_existing(self.ckpt)).st_dev
        except OSError as e:  # the folder went away: stage as PyTorch does, as when it is short of room
            self._give_up(f"spill folder {folder} cannot be asked for its free space ({os.strerror(e.errno or errno.EIO)})")
            return None
        free = vfs.f_bavail * vfs.f_frsize
        need = nbytes + RESERVE + ((before + nbytes) if same else 0)
        if free < need:
            self._give_up(f"spill folder {folder} has {size_text(free)} free, {size_text(need)} needed")
            return None
        try:
            fd = self._open(folder)
        except OSError as e:
            self._give_up(f"cannot make a file in spill folder {folder} ({os.strerror(e.errno or errno.EIO)})")
            return None
        try:
            os.posix_fallocate(fd, 0, nbytes)  # blocks reserved before any byte is copied
            st = torch.UntypedStorage.from_file(f"/proc/self/fd/{fd}", True, nbytes)
            filled = _fill(fd, source, nbytes, st)
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
                    with _regions_lock:
                        _regions[st.data_ptr()] = (st.data_ptr() + nbytes, fd)
            if not keep:
                say_once("spill-fds", "debug", f"more than {self.fds_kept} spill files in one call: the next are not "
                         "punched after the upload (their pages go when the staged copy is freed)")
                os.close(fd)
        return st, filled

    @staticmethod
    def _open(folder: str) -> int:
        """A file in `folder` that has no name: O_TMPFILE, else made and unlinked at once."""
        try:
            return os.open(folder, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
        fd, name = tempfile.mkstemp(prefix=".uvmchunk-spill-", dir=folder)
        os.unlink(name)
        return fd

    # ---- the call ------------------------------------------------------------------------------

    def staged(self) -> None:
        """After the staging: the per-call line (info)."""
        if self.managed == 0:
            return
        where = (f"{size_text(self.spilled)} spilled to {self.folder} (file-backed, unlinked)" if self.spilled
                 else "none spilled")
        log("info", f"dcp.async_save: {size_text(self.managed)} of managed tensors, budget "
                    f"{size_text(self.budget)} ({self.budget_why}): {where}, "
                    f"{size_text(self.in_memory)} in memory")

    def release(self) -> None:
        """After the upload completed or failed: the spill files' blocks and page cache dropped and
        their descriptors closed; each mapping goes with the last reference to its storage."""
        with self._lock:
            fds, self.fds = self.fds, []
        with _regions_lock:  # before the descriptors close: no drop runs on a closed one
            for start in [s for s, (_, fd) in _regions.items() if fd in fds]:
                del _regions[start]
        for fd in fds:
            size = os.fstat(fd).st_size
            if size and _libc.fallocate(fd, _FALLOC_PUNCH, 0, size) != 0:
                say_once("spill-punch", "debug", f"spill file not punched ({os.strerror(ctypes.get_errno())}): its "
                         "pages go when the staged copy is freed")
            os.close(fd)
        if self.call is not None and self.spilled:
            self.call.notes["upload_seconds"] = time.monotonic() - self.started


def _fill(fd: int, source: torch.Tensor, nbytes: int, mapped: torch.UntypedStorage) -> bool:
    """Fills the spill file (`mapped`: its mapping) with the bytes of `source` block by block,
    each block's page cache dropped once written (drop_cache), so the spill never holds more than
    a block of page cache. A source the CPU may read while the device works (uvmchunk._views.Viewer's
    test: contiguous, managed, preferring the CPU, concurrent managed access) is written with pwrite
    straight from its managed pages, once the work queued on this thread's current stream of its
    device (where PyTorch's copy would be ordered: a DefaultStager's staging stream inside its
    stream context) has completed: each first write to a page of a file whose blocks fallocate
    reserved converts an unwritten extent (ext4), which made a copy into the mapping about 4x
    slower than one into anonymous memory here, where pwrite of the same bytes cost 1.2x. Another
    contiguous source is copied into the mapping by PyTorch's copy_, per block, on the same
    stream; a copy to pageable memory returns once complete (CUDA Runtime API, "API
    synchronization behavior"), so its pages are written when dropped. False (a strided source):
    PyTorch's copy fills the mapping, whole, and its cache goes with the upload's reads."""
    from ._cuda import rt
    from ._views import Viewer

    if Viewer(any_managed=False).eligible(source):
        runtime = rt()
        device = source.device.index if source.device.index is not None else torch.cuda.current_device()
        runtime.wait_current_stream(device)
        view = memoryview((ctypes.c_char * nbytes).from_address(source.data_ptr())).cast("B")
        off = 0
        while off < nbytes:
            n = os.pwrite(fd, view[off:off + BLOCK], off)
            drop_cache(fd, off, n)
            off += n
        return True
    if not source.is_contiguous():
        return False
    src = torch.empty(0, dtype=torch.uint8, device=source.device).set_(
        source.untyped_storage(), source.storage_offset() * source.element_size(), (nbytes,))
    dst = torch.empty(0, dtype=torch.uint8).set_(mapped, 0, (nbytes,))
    for off in range(0, nbytes, BLOCK):
        n = min(BLOCK, nbytes - off)
        dst[off:off + n].copy_(src[off:off + n])
        drop_cache(fd, off, n, dst.data_ptr() + off)
    return True


def drop_cache(fd: int, offset: int, length: int, address: Optional[int] = None) -> None:
    """Writes back and drops the spill file's page cache in [offset, offset + length) (`address`:
    where the range is mapped in this process, if it was touched through the mapping): a cgroup is
    charged for the page cache its processes touch (cgroup-v2.rst "Memory Ownership", cgroup-v1
    memory.rst 2.2.1 "Accounting details"), so a spill left in the cache would take the
    container's room all the same, and dirty pages cannot even be reclaimed. fdatasync(2) first:
    both POSIX_FADV_DONTNEED (posix_fadvise(2)) and reclaim drop only clean pages. A mapped page is
    skipped by POSIX_FADV_DONTNEED; MADV_PAGEOUT (madvise(2), Linux 5.4; EINVAL before, then the
    pages are left to the kernel's reclaim) unmaps and reclaims it, and on any mapping only pages
    out, so even a stale address would lose no byte. Called per block of 64 MiB: one flush per
    block. Best effort: a failure is said once (debug), never raised."""
    try:
        os.fdatasync(fd)
        if address is not None:
            lo = address & ~(_PAGE - 1)
            _libc.madvise(lo, address + length - lo, _MADV_PAGEOUT)
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    except OSError as e:
        say_once("spill-drop", "debug", f"spill file's page cache not dropped ({os.strerror(e.errno or errno.EIO)})")


BLOCK = 64 * MIB  # bytes per pwrite of a spill file, and per write of the upload from a spill mapping


def upload_hook() -> Optional[Callable[[memoryview], None]]:
    """For a stream the upload writes (uvmchunk._streams.in_pieces): a function to call with each
    piece written, which drops the spill's pages the piece came from; None while no spill is mapped."""
    with _regions_lock:
        return _uploaded if _regions else None


def _uploaded(piece: memoryview) -> None:
    """The upload wrote `piece`: the pages of the spill mappings it lies in, which it read through
    the mapping, are dropped (drop_cache)."""
    start = _address(piece)
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


def _address(view: memoryview) -> Optional[int]:
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


def active() -> Optional[Spill]:
    """The Spill of the async_save this thread stages for, or None."""
    return getattr(_tls, "spill", None)


def new_spill(kwargs: dict[str, Any]) -> Optional[Spill]:
    """The Spill of an async_save called with `kwargs`, or None when this call cannot spill
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
    spill = Spill(budget, why, mode, _spill_dir(cfg.get("async_spill_dir", "")), checkpoint_dir(kwargs))
    # for the per-checkpoint report (uvmchunk._report): the budget and the limit it came from
    said = {"async_memory_budget_bytes": budget, "async_memory_budget_from": why}
    if room is not None and room.limit is not None:
        said.update(memory_limit_bytes=room.limit, memory_limit_file=room.source)
    _accounting.note("async_memory_budget", said, spill.call)
    return spill


def _spill_dir(escaped: str) -> str:
    """async_spill_dir as uvmchunk-config escapes it (%XX) back to the folder's own bytes, as a str
    the way os.fsdecode makes one (a name that is not UTF-8 keeps its bytes)."""
    return os.fsdecode(urllib.parse.unquote_to_bytes(os.fsencode(escaped)))


def _managed(ptr: int) -> bool:
    """Whether `ptr` (a CUDA tensor's or storage's data) is managed memory."""
    from ._cuda import rt
    runtime = rt()
    return ptr != 0 and runtime is not None and runtime.is_managed(ptr)


# ---- the substitutions ---------------------------------------------------------------------------

def _stage_untyped_storage(orig: Callable) -> Callable:
    """StateDictStager._stage_untyped_storage (2.11+): a managed storage not cached by the stager gets
    a spilled CPU storage, copied as PyTorch copies it, never cached (it is released after the upload)."""
    def stage_untyped_storage(self: Any, storage: Any, non_blocking: bool = False) -> Any:
        spill = active()
        if (spill is None or storage in self._cached_storage_mapping or storage.nbytes() == 0
                or storage.device.type != "cuda" or not _managed(storage.data_ptr())):
            return orig(self, storage, non_blocking=non_blocking)
        source = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
        made = spill.storage(source, pinned=bool(self.pin_memory))
        if made is None:
            return orig(self, storage, non_blocking=non_blocking)
        new, filled = made
        if not filled:
            new.copy_(storage, non_blocking=non_blocking)
        return new
    return stage_untyped_storage


def _create_cpu_state_dict(orig: Callable) -> Callable:
    """_create_cpu_state_dict (BlockingAsyncStager; 2.8's writers that are no stager): plain managed
    tensors get spilled CPU tensors; every other leaf is created by PyTorch's own function, the
    containers walked as its _iterate_state_dict walks them (torch/distributed/_state_dict_utils.py)."""
    def create(state_dict: Any, pin_memory: bool = False, share_memory: bool = False) -> Any:
        spill = active()
        if spill is None or share_memory or contains_itself(state_dict):  # a cycle: PyTorch's raises
            return orig(state_dict, pin_memory=pin_memory, share_memory=share_memory)

        def walk(obj: Any) -> Any:
            if isinstance(obj, dict):
                return {k: walk(v) for k, v in obj.items()}
            if isinstance(obj, (list, tuple)):
                out = [walk(v) for v in obj]
                return tuple(out) if isinstance(obj, tuple) else out
            if _spillable(obj):
                made = spill.storage(obj, pinned=pin_memory, persistent=pin_memory)
                if made is not None:
                    out = torch.empty(0, dtype=obj.dtype).set_(made[0], 0, obj.size())
                    if made[1]:  # already holds the bytes: _copy_state_dict leaves it alone
                        spill.prefilled.add(id(out))
                        spill.keep.append(out)
                    return out
            elif hasattr(obj, "local_shards") or hasattr(obj, "_local_tensor"):
                try:
                    out = (_sharded_tensor(obj, spill, lambda t: orig(t, pin_memory=pin_memory), pin_memory)
                           if hasattr(obj, "local_shards") else _dtensor(obj, spill, pin_memory))
                except Exception as e:  # noqa: BLE001  (a PyTorch whose private constructors differ)
                    say_once(f"spill-leaf:{type(obj).__name__}", "info", f"dcp.async_save: a {type(obj).__name__} is "
                             f"staged as PyTorch stages it ({type(e).__name__}: {e})")
                    out = None
                if out is not None:
                    return out
            return orig(obj, pin_memory=pin_memory, share_memory=share_memory)
        return walk(state_dict)
    return create


def _spillable(t: Any) -> bool:
    """A plain managed CUDA tensor: its spilled copy is contiguous, filled by _fill when the source
    is too, else by PyTorch's copy_."""
    return (type(t) is torch.Tensor and t.dim() > 0 and t.numel() > 0 and t.device.type == "cuda"
            and _managed(t.data_ptr()))


def _spilled_tensor(t: torch.Tensor, spill: Spill, pin_memory: bool) -> Optional[tuple[torch.Tensor, bool]]:
    """A spilled CPU tensor shaped like `t` and whether it holds t's bytes already, or None."""
    made = spill.storage(t, pinned=pin_memory, persistent=pin_memory)
    if made is None:
        return None
    return torch.empty(0, dtype=t.dtype).set_(made[0], 0, t.size()), made[1]


def _sharded_tensor(obj: Any, spill: Spill, stock_leaf: Callable[[torch.Tensor], torch.Tensor],
                    pin_memory: bool) -> Optional[Any]:
    """A CPU ShardedTensor for `obj` (TorchRec's tables) whose managed local shards are spilled, or
    None (no managed shard: PyTorch's creation). PyTorch's own (sharded_tensor_func of
    _create_cpu_state_dict, torch/distributed/_state_dict_utils.py) is obj.to("cpu"), a copy of every
    shard in anonymous memory, then an empty tensor per shard; here the shards are made once, the
    metadata moved to the CPU as ShardedTensor.to does it, the other shards made by PyTorch's
    creation of a plain tensor (`stock_leaf`)."""
    import copy

    shards = obj.local_shards()
    if not any(_spillable(s.tensor) for s in shards):
        return None
    from torch.distributed._shard.sharded_tensor import Shard, ShardedTensor

    cpu = torch.device("cpu")
    new, filled = [], True
    for s in shards:
        made = _spilled_tensor(s.tensor, spill, pin_memory) if _spillable(s.tensor) else None
        if made is None:
            tensor, filled = stock_leaf(s.tensor), False
        else:
            tensor, filled = made[0], filled and made[1]
        meta = copy.deepcopy(s.metadata)
        if meta.placement is not None:
            meta.placement._device = cpu
        new.append(Shard(tensor, meta))
    st_meta = copy.deepcopy(obj.metadata())
    for m in st_meta.shards_metadata:
        if m.placement is not None:
            m.placement._device = cpu
    out = ShardedTensor._init_from_local_shards_and_global_metadata(
        new, sharded_tensor_metadata=st_meta, process_group=obj._process_group, init_rrefs=obj._init_rrefs)
    if filled:  # every shard holds its bytes: _copy_state_dict leaves it alone
        spill.prefilled.add(id(out))
        spill.keep.append(out)
    return out


def _dtensor(obj: Any, spill: Spill, pin_memory: bool) -> Optional[Any]:
    """A DTensor for `obj` whose managed local tensor is spilled, or None (PyTorch's creation).
    PyTorch's own (dtensor_func there) is obj.to("cpu"), a copy of the local tensor in anonymous
    memory, then an empty one in its place; here the local tensor is made once, under obj's spec (the
    one obj.to("cpu") keeps: same mesh, placements and shape). TorchRec's DTensor output holds a
    LocalShardsWrapper of its row or column pieces (torch/distributed/tensor/_shards_wrapper.py):
    stock staged 207 MiB of anonymous memory for 60 MiB of tables there (tests/torch/test_torchrec.py);
    here each piece is staged once, spilled when managed and past the budget, copied now (the wrapper
    takes no copy_), and the DTensor keeps a wrapper of the staged pieces, as sync dcp.save sees it."""
    local = obj._local_tensor
    if _spillable(local):
        made = _spilled_tensor(local, spill, pin_memory)
        if made is None:
            return None
        out = type(obj)(made[0], obj._spec, requires_grad=obj.requires_grad)
        if made[1]:
            spill.prefilled.add(id(out))
            spill.keep.append(out)
        return out
    if type(local).__name__ != "LocalShardsWrapper" or not hasattr(local, "local_shards"):
        return None
    pieces = local.local_shards()
    if not pieces or not any(_spillable(t) for t in pieces):
        return None
    staged = []
    for t in pieces:
        made = _spilled_tensor(t, spill, pin_memory) if _spillable(t) else None
        if made is None:
            cpu = torch.empty(t.size(), dtype=t.dtype, pin_memory=pin_memory)  # as PyTorch stages it
            cpu.copy_(t)
        else:
            cpu = made[0]
            if not made[1]:
                cpu.copy_(t)
        staged.append(cpu)
    wrapper = type(local)(staged, [tuple(o) for o in local.local_offsets()])
    out = type(obj)(wrapper, obj._spec, requires_grad=obj.requires_grad)
    spill.prefilled.add(id(out))  # every piece holds its bytes: _copy_state_dict leaves it alone
    spill.keep.append(out)
    return out


def _copy_state_dict(orig: Callable) -> Callable:
    """_copy_state_dict (BlockingAsyncStager; 2.8's writers that are no stager), after
    _create_cpu_state_dict: the staged tensors that _fill wrote already are left alone, every other
    leaf copied by PyTorch's own function (a structure that does not match raises there, as stock)."""
    def copy(state_dict: Any, copy_state_dict: Any, non_blocking: bool = False, type_check: bool = True) -> Any:
        spill = active()
        if spill is None or not spill.prefilled:
            return orig(state_dict, copy_state_dict, non_blocking=non_blocking, type_check=type_check)

        def walk(src: Any, dst: Any) -> Any:
            if id(dst) in spill.prefilled:
                return dst
            if isinstance(src, dict) and isinstance(dst, dict) and set(src) == set(dst):
                return {k: walk(v, dst[k]) for k, v in src.items()}
            if isinstance(src, (list, tuple)) and isinstance(dst, (list, tuple)) and len(src) == len(dst):
                out = [walk(a, b) for a, b in zip(src, dst)]
                return tuple(out) if isinstance(src, tuple) else out
            return orig(src, dst, non_blocking=non_blocking, type_check=type_check)
        return walk(state_dict, copy_state_dict)
    return copy


def _default_stager_stage(orig: Callable) -> Callable:
    """DefaultStager.stage: the caller's Spill travels to _stage, which may run on the stager's thread."""
    def stage(self: Any, state_dict: Any, **kwargs: Any) -> Any:
        spill = active()
        if spill is not None:
            kwargs["_uvmchunk_spill"] = spill
        return orig(self, state_dict, **kwargs)
    return stage


def _default_stager_private_stage(orig: Callable) -> Callable:
    def _stage(self: Any, state_dict: Any, _uvmchunk_spill: Optional[Spill] = None, **kwargs: Any) -> Any:
        outer = active()
        _tls.spill = _uvmchunk_spill if _uvmchunk_spill is not None else outer
        try:
            return orig(self, state_dict, **kwargs)
        finally:
            _tls.spill = outer
    return _stage


def install(patched: Callable[[Any, Any], Any]) -> None:
    """Substitutes the creation of staged CPU copies (idempotent: `patched(orig, wrapper)` marks each)."""
    from torch.distributed.checkpoint import staging, state_dict_saver

    def put(owner: Any, name: str, make: Callable) -> None:
        orig = getattr(owner, name, None)
        if orig is None or getattr(orig, "_uvmchunk", False):
            return
        setattr(owner, name, patched(orig, make(orig)))

    try:
        from torch.distributed.checkpoint._state_dict_stager import StateDictStager
    except ImportError:  # 2.8
        StateDictStager = None
    if StateDictStager is not None and hasattr(StateDictStager, "_stage_untyped_storage"):
        put(StateDictStager, "_stage_untyped_storage", _stage_untyped_storage)
    default = getattr(staging, "DefaultStager", None)
    if default is not None and hasattr(default, "_stage"):
        put(default, "stage", _default_stager_stage)
        put(default, "_stage", _default_stager_private_stage)
    for module in (staging, state_dict_saver):
        put(module, "_create_cpu_state_dict", _create_cpu_state_dict)
        put(module, "_copy_state_dict", _copy_state_dict)


def call(orig: Callable, args: tuple, kwargs: dict[str, Any]) -> Any:
    """orig (PyTorch's async_save) with this call's managed tensors above the budget spilled; the
    spill is released when the upload completes or fails (or at once when async_save raises)."""
    spill = new_spill(kwargs)
    if spill is None:
        return orig(*args, **kwargs)
    outer = active()
    _tls.spill = spill
    try:
        result = orig(*args, **kwargs)
    except BaseException:
        spill.release()
        raise
    finally:
        _tls.spill = outer
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
