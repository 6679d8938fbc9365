"""One spill file: made in a folder with no name (O_TMPFILE), its blocks reserved, filled from a
managed tensor block by block with its page cache dropped after each, and its blocks punched out
once the upload is done with it."""
from __future__ import annotations

import ctypes
import errno
import os
import resource
import tempfile
from typing import Optional

import torch

from ._config import say_once

MIB = 1 << 20
BLOCK = 64 * MIB  # bytes per pwrite of a spill file, and per write of the upload from a spill mapping
_FALLOC_PUNCH = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE (linux/falloc.h)
_MADV_PAGEOUT = 21  # asm-generic/mman-common.h (Linux 5.4): reclaim the range; never loses a byte
_PAGE = os.sysconf("SC_PAGE_SIZE")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def fds_kept() -> int:
    """Descriptors kept open (to punch the files' blocks after the upload) at most: a quarter of the
    soft RLIMIT_NOFILE, so a job with thousands of tables never runs out of descriptors; a file past
    it is closed at once, and its blocks go when its staged copy is freed."""
    return max(16, min(1024, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 4))


def open_unnamed(folder: str) -> int:
    """A file in `folder` that has no name: O_TMPFILE, else made and unlinked at once."""
    try:
        return os.open(folder, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            raise
    fd, name = tempfile.mkstemp(prefix=".uvmchunk-spill-", dir=folder)
    os.unlink(name)
    return fd


def map_filled(fd: int, source: torch.Tensor, nbytes: int) -> tuple[torch.UntypedStorage, bool]:
    """The file `fd` holding `nbytes` (its blocks reserved by posix_fallocate before any byte is
    copied: a full disk is found here, never as SIGBUS halfway), mapped MAP_SHARED by
    torch.UntypedStorage.from_file of /proc/self/fd/N, and whether fill() wrote `source` into it.
    Raises OSError or RuntimeError."""
    os.posix_fallocate(fd, 0, nbytes)
    st = torch.UntypedStorage.from_file(f"/proc/self/fd/{fd}", True, nbytes)
    return st, fill(fd, source, nbytes, st)


def punch(fd: int) -> None:
    """The file's blocks and page cache dropped (FALLOC_FL_PUNCH_HOLE: a late reader of its mapping
    would see zeros, never a fault) and `fd` closed."""
    size = os.fstat(fd).st_size
    if size and _libc.fallocate(fd, _FALLOC_PUNCH, 0, size) != 0:
        say_once("spill-punch", "debug", f"spill file not punched ({os.strerror(ctypes.get_errno())}): its "
                 "pages go when the staged copy is freed")
    os.close(fd)


def fill(fd: int, source: torch.Tensor, nbytes: int, mapped: torch.UntypedStorage) -> bool:
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
