"""How bytes move between a table's pages and a stream, in pieces of at most ``chunk_bytes()``: the
size the direct reads (uvmchunk._reads) read per call, and the pieces a save hands a stream that is
not a local file (fsspec's buffered files, s3torchconnector's S3Writer).

Why pieces: ``torch.save`` writes a storage record with one ``write`` call of the whole record
(caffe2/serialize/inline_container.cc, ``PyTorchStreamWriter::writeRecord``), a memoryview of the
storage's own bytes. fsspec's ``AbstractBufferedFile.write`` (fsspec/spec.py) appends all of it to a
``BytesIO`` before uploading ``blocksize`` parts, and the connector's ``S3Writer.write``
(s3torchconnector/s3writer.py) turns it into ``bytes`` first: a whole copy of the table either way.
Handed piece by piece, the buffer holds at most a block; the object and its bytes are
the same."""
from __future__ import annotations

import contextlib
import functools
import io
import re
import threading
from typing import Any, Callable, Iterator, Optional

from ._config import configuration

DEFAULT_CHUNK = 64 << 20
chunk_size: Optional[int] = None  # bytes per piece; None: the library's chunk_size
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def chunk_bytes() -> int:
    """The piece in bytes: ``chunk_size`` when set, else the library configuration's chunk_size
    (bytes per block; config/uvmchunk.conf), else 64 MiB; at least 4 KiB."""
    if chunk_size is not None:
        return max(4096, int(chunk_size))
    m = re.fullmatch(r"(\d+)\s*([KMGT]?)(?:i?B)?", configuration().get("chunk_size", ""), re.IGNORECASE)
    return max(4096, int(m.group(1)) * _UNITS[m.group(2).upper()]) if m else DEFAULT_CHUNK


class PieceWriter:
    """A writable stream whose ``write`` hands the stream it wraps at most `piece` bytes per call,
    slices of the caller's buffer (no copy); every other attribute is the stream's own. `after`:
    called with each contiguous piece once the stream took it."""

    def __init__(self, stream: Any, piece: int, after: Optional[Callable[[memoryview], None]] = None) -> None:
        self._stream, self._piece, self._after = stream, piece, after

    def write(self, data: Any) -> int:
        view = memoryview(data)
        if view.nbytes <= self._piece or not view.c_contiguous:  # torch.save's records are contiguous
            n = self._stream.write(data)
            if self._after is not None and view.c_contiguous:
                self._after(view)
            return n
        view = view.cast("B")
        done = 0
        while done < len(view):
            piece = self._next_piece()
            n = self._stream.write(view[done:done + piece])
            # None: taken whole, as torch.save assumes of every write (it ignores what write returns)
            n = min(piece, len(view) - done) if n is None else n
            if n <= 0:
                raise OSError(f"uvmchunk: {type(self._stream).__qualname__}.write took no bytes "
                              f"after {done} of {len(view)}")
            if self._after is not None:
                self._after(view[done:done + n])
            done += n
        return done

    def _next_piece(self) -> int:
        """Bytes for the next write: fsspec's ``AbstractBufferedFile`` uploads a part once its
        ``BytesIO`` reaches ``blocksize`` (fsspec/spec.py, ``write`` and ``flush``), so a piece that
        ends there keeps that buffer at one block, not a block and a piece."""
        buffer, block = getattr(self._stream, "buffer", None), getattr(self._stream, "blocksize", None)
        if isinstance(buffer, io.BytesIO) and isinstance(block, int) and block > 0:
            room = block - buffer.tell()
            if 0 < room < self._piece:
                return room
        return self._piece

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _local(stream: Any) -> bool:
    """A stream over a local file descriptor: writes go straight to the kernel, nothing to split."""
    try:
        stream.fileno()
        return True
    except Exception:  # noqa: BLE001  (io.UnsupportedOperation, AttributeError, a store's own error)
        return False


def in_pieces(create_stream: Callable) -> Callable:
    """`create_stream` (a FileSystemBase's, as DCP's writer threads call it) whose writable streams
    that are not local files take writes in pieces; readable streams are its own, and so are local
    ones but while an async_save's spill is mapped (uvmchunk._spill.upload_hook): then they take
    writes in pieces too, and on either kind the spill's pages a piece was written from are dropped
    after it."""
    @contextlib.contextmanager
    def create(path: Any, mode: str) -> Iterator[Any]:
        with create_stream(path, mode) as stream:
            if "w" not in mode:
                yield stream
                return
            from . import _spill  # imports torch: only once a save writes
            hook = _spill.upload_hook()
            if not _local(stream):
                yield PieceWriter(stream, chunk_bytes(), hook)
            else:
                yield stream if hook is None else PieceWriter(stream, _spill.BLOCK, hook)

    return create


_install_lock = threading.Lock()


def install() -> None:
    """Every DCP save through a FileSystemWriter (and its subclasses: fsspec's FsspecWriter,
    s3torchconnector's S3StorageWriter) writes a store's streams in pieces (idempotent): DCP's writer
    threads take their streams from the create_stream handed to _write_files_from_queue
    (torch/distributed/checkpoint/filesystem.py, PyTorch 2.8 to 2.15)."""
    from torch.distributed.checkpoint import filesystem

    with _install_lock:
        orig = getattr(filesystem, "_write_files_from_queue", None)
        if orig is None or getattr(orig, "_uvmchunk_pieces", False):
            return

        @functools.wraps(orig)
        def write_files(create_stream: Callable, *args: Any, **kwargs: Any) -> Any:
            return orig(in_pieces(create_stream), *args, **kwargs)

        write_files._uvmchunk_pieces = True
        filesystem._write_files_from_queue = write_files
