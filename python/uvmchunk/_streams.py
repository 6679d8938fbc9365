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
import os
import threading
import traceback
from typing import Any, Callable, Iterator, Optional

from ._config import configuration, size_bytes

DEFAULT_CHUNK = 64 << 20
chunk_size: Optional[int] = None  # bytes per piece; None: the library's chunk_size


def chunk_bytes() -> int:
    """The piece in bytes: ``chunk_size`` when set, else the library configuration's chunk_size
    (bytes per block; config/uvmchunk.conf), else 64 MiB; at least 4 KiB."""
    if chunk_size is not None:
        return max(4096, int(chunk_size))
    configured = size_bytes(configuration().get("chunk_size", ""))
    return max(4096, configured) if configured is not None else DEFAULT_CHUNK


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
    ones but while an async_save's spill is mapped (uvmchunk._spill_upload.upload_hook): then they take
    writes in pieces too, and on either kind the spill's pages a piece was written from are dropped
    after it. A save's s3fs file is written as one concurrent multipart upload instead
    (uvmchunk._uploads), from the caller's buffers; a failure inside aborts it."""
    @contextlib.contextmanager
    def create(path: Any, mode: str) -> Iterator[Any]:
        with create_stream(path, mode) as stream:
            if "w" not in mode:
                yield stream
                return
            from . import _spill_file, _spill_upload  # import torch: only once a save writes
            hook = _spill_upload.upload_hook()
            if not _local(stream):
                from . import _uploads
                if _uploads.applies(stream, mode):  # s3fs: concurrent parts, not S3File's serial ones
                    up = _uploads.writer(stream, hook)
                    try:
                        yield up
                    except BaseException:
                        up.abort()
                        raise
                    up.close()  # DCP closed it (filesystem.py, _write_files_from_queue): nothing left
                    return
                yield PieceWriter(stream, chunk_bytes(), hook)
            else:
                yield stream if hook is None else PieceWriter(stream, _spill_file.BLOCK, hook)

    return create


@contextlib.contextmanager
def frames_released() -> Iterator[None]:
    """An error raised inside (a store client's, or one its failure led to) keeps no local of the
    frames it left (``traceback.clear_frames``), nor does any error in its chain: those frames hold
    what the client had buffered (s3fs's 50 MiB part buffer of a save, the connector's reader's
    bytes of a load), kept alive for as long as the caller holds the exception, which DCP's
    CheckpointException does. Its text and traceback lines stay."""
    try:
        yield
    except BaseException as e:
        seen: set = set()
        while e is not None and id(e) not in seen:
            seen.add(id(e))
            traceback.clear_frames(e.__traceback__)  # the frames still running refuse, and are kept
            e = e.__cause__ or e.__context__
        raise


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
            with frames_released():
                return orig(in_pieces(create_stream), *args, **kwargs)

        write_files._uvmchunk_pieces = True
        filesystem._write_files_from_queue = write_files


class Source:
    """Positional reads of one stored object: ``readinto(view, at)`` fills a prefix of `view` from
    byte `at` and says how many bytes it placed (0 at the end). The direct reads (uvmchunk._reads)
    call it once per piece, so nothing here holds more than the piece being placed.
    ``dcp_stream``: the stream DCP's own reads of the file take once an item of it was read here
    (None: the one its create_stream opened)."""

    dcp_stream: Any = None
    concurrent = False  # part_source gives sources other threads may read at once (uvmchunk._downloads)
    # the most a request asks for, and where uvmchunk._downloads cuts a run (0: s3_part_size)
    request_bytes = 0

    def readinto(self, view: memoryview, at: int) -> int:
        raise NotImplementedError

    def part_source(self) -> contextlib.AbstractContextManager["Source"]:
        """A Source of the same object and version for one part read on another thread while
        this one is read (a request of its own); only where ``concurrent``."""
        return contextlib.nullcontext(self)

    def pread(self, n: int, at: int) -> bytes:
        """Up to `n` bytes from `at` (the archive's small records: headers, data.pkl)."""
        buf = bytearray(n)
        got = 0
        while got < n:
            k = self.readinto(memoryview(buf)[got:], at + got)
            if k <= 0:
                break
            got += k
        return bytes(buf[:got])

    def fill(self, out: memoryview, at: int, piece: int, placed: Callable[[int], None]) -> None:
        """Fills `out` from byte `at` in order, at most `piece` bytes per step, calling `placed`
        with the bytes of each step once they are in `out` (so a caller knows to the byte what
        has landed when a step fails); stops early at the end of the object. Here a ``readinto``
        per piece; a store that streams one request's body in pieces reads `out` with one request."""
        done = 0
        while done < len(out):
            got = self.readinto(out[done:done + piece], at + done)
            if got <= 0:
                return
            done += got
            placed(got)


class FdSource(Source):
    """A local file descriptor, read with os.preadv: no buffer at all, the caller's position kept."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def readinto(self, view: memoryview, at: int) -> int:
        return os.preadv(self.fd, [view], at)


class StreamSource(Source):
    """A seekable stream opened without a read-ahead cache (a store's file: fsspec's with
    cache_type="none", the connector's range-based reader with no buffer): each read is one ranged
    request of exactly the piece asked for, placed with ``readinto`` where the stream has it, else
    ``read(n)`` and a copy of that one piece."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def readinto(self, view: memoryview, at: int) -> int:
        self.stream.seek(at)
        into = getattr(self.stream, "readinto", None)
        if into is not None:
            try:
                got = into(view)
                return 0 if got is None else got
            except (io.UnsupportedOperation, NotImplementedError):
                pass
        data = self.stream.read(len(view))
        view[:len(data)] = data
        return len(data)


class _ConnectorSource(StreamSource):
    """A connector object read through a range-based reader; each concurrent part through a reader
    of its own (the client is shared by threads: s3torchconnector's S3Client), all checked against
    the one version by the file's ConnectorPin (uvmchunk._versions)."""

    concurrent = True

    def __init__(self, stream: Any, reader: Callable[[], Any], request_bytes: int) -> None:
        super().__init__(stream)
        self.reader = reader
        # one request per part of the native client (S3ClientConfig.part_size, 8 MiB by default): a
        # longer range is split into part GETs fetched ahead of the reader, each a block of its
        # buffer pool (aws-c-s3 source/s3_buffer_pool.c); measured against a fast server, 8 parts of
        # 16 MiB in flight held +250 MiB, where 8 of 8 MiB hold one request's part each
        self.request_bytes = request_bytes

    @contextlib.contextmanager
    def part_source(self) -> Iterator[Source]:
        with self.reader() as f:
            yield StreamSource(f)


@contextlib.contextmanager
def open_source(fs: Any, path: Any, stream: Any, pin: Any = None) -> Iterator[Optional[Source]]:
    """A Source over checkpoint file `path` of DCP file system `fs` (`stream`: the one its
    create_stream opened for DCP's own reads of that file), opened through the reader's
    own client (its credentials and endpoint), or None for a file system read here no other way:
    PyTorch's local FileSystem (torch/distributed/checkpoint/filesystem.py: a file descriptor),
    DCP's fsspec FileSystem (torch/distributed/checkpoint/_fsspec_filesystem.py: ``fs.fs.open`` with
    cache_type="none", fsspec/caching.py's cache that keeps nothing, so a store fetches each read's
    range only; over s3fs uvmchunk._versions.S3fsSource, through `stream` itself, with its version
    pin) and s3torchconnector's S3FileSystem (s3torchconnector/dcp/s3_file_system.py: its
    client's get_object with S3ReaderConstructor.range_based(buffer_size=0), one range request per
    read, s3torchconnector/s3reader/ranged.py; `pin`: the file's _versions.ConnectorPin, whose
    HEAD gives the reader the object's size)."""
    kind = kind_of(fs)
    if kind == "local":
        yield FdSource(stream.fileno())
    elif kind == "fsspec":
        from . import _versions
        if _versions.s3fs_file(stream):
            yield _versions.S3fsSource(stream)
            return
        with fs.fs.open(path, "rb", cache_type="none") as f:
            yield StreamSource(f)
    elif kind == "connector":
        from s3torchconnector._s3dataset_common import parse_s3_uri  # type: ignore[import-not-found]
        from s3torchconnector.s3reader import S3ReaderConstructor  # type: ignore[import-not-found]
        bucket, key = parse_s3_uri(str(path))

        def reader() -> Any:
            return fs._client.get_object(bucket, key, object_info=getattr(pin, "info", None),
                                         reader_constructor=S3ReaderConstructor.range_based(0))

        config = getattr(fs._client, "s3client_config", None)
        with reader() as f:
            src = _ConnectorSource(f, reader, int(getattr(config, "part_size", 0) or 0))
            # the connector's default DCP reader (s3torchconnector/s3reader/dcp_optimized.py,
            # _find_item_for_range) takes the file's items in order, none skipped: after an item
            # read here, an item DCP reads itself (a CPU tensor, bytes) would be refused
            src.dcp_stream = f
            yield src
    else:
        yield None


def kind_of(fs: Any) -> Optional[str]:
    """"local", "fsspec" or "connector" for a DCP file system open_source reads, else None."""
    from torch.distributed.checkpoint import filesystem

    if type(fs) is filesystem.FileSystem:
        return "local"
    mod = type(fs).__module__
    if mod == "torch.distributed.checkpoint._fsspec_filesystem" and type(fs).__name__ == "FileSystem" \
            and getattr(fs, "fs", None) is not None:
        return "fsspec"
    if mod == "s3torchconnector.dcp.s3_file_system" and type(fs).__name__ == "S3FileSystem" \
            and getattr(fs, "_client", None) is not None:
        return "connector"
    return None
