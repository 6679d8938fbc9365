"""A save's file written through s3fs as one concurrent multipart upload, parts sent straight from
the caller's buffers (a managed table's pages). Imports nothing of torch.

Why: DCP's FsspecWriter writes each file through s3fs's ``S3File``, which uploads its parts one
after another inside ``write``/``flush`` (s3fs/core.py, ``S3File._upload_chunk``: "TODO:
concurrent here"), so a save moves at one connection's speed; S3 serves each connection at about
85-90 MB/s and gets its throughput from concurrent requests (AWS S3 user guide, "Performance
guidelines for Amazon S3"). Here at most ``s3_concurrency`` parts are in flight, each a request
of its own through s3fs's own async client (``S3FileSystem._call_s3`` on ``fs.loop``: the job's
credentials, endpoint, retries and extra arguments). A part lying wholly inside one ``write`` is
sent from the caller's buffer without a copy; only the bytes of small records and of a part that
straddles two writes are copied, at most a part per write. The object and its bytes are the ones
``S3File`` writes (one PUT below a part, else one multipart upload); a failure aborts the upload
(``AbortMultipartUpload``: S3 user guide, "Amazon S3 multipart upload limits": parts of an upload
left incomplete stay billed) and raises the client's error."""
from __future__ import annotations

import asyncio
import concurrent.futures as cf
import io
import time
from typing import Any, Callable, Optional

from . import _accounting
from ._config import configuration, size_bytes

MIB = 1 << 20
PART_MIN, PART_MAX = 5 * MIB, 5 << 30  # S3's part limits (config/uvmchunk.conf, s3_part_size)
DEFAULT_CONCURRENCY, DEFAULT_PART = 8, 16 * MIB
PARTS_PER_STEP = 1000  # parts of one size before they double: 10,000 parts hold 5 TiB and more
_INFLIGHT = _accounting.InFlight("upload_connections")  # a call's parts in flight, over all its files


def settings() -> tuple[int, int]:
    """(parts in flight at most, bytes per part): the configuration's s3_concurrency and
    s3_part_size (its own parser refused values out of range), else the defaults."""
    cfg = configuration()
    try:
        n = int(cfg.get("s3_concurrency", DEFAULT_CONCURRENCY))
    except ValueError:
        n = DEFAULT_CONCURRENCY
    part = size_bytes(cfg.get("s3_part_size", "")) or DEFAULT_PART
    return min(max(n, 1), 64), min(max(part, PART_MIN), PART_MAX)


def part_bytes(number: int, base: int) -> int:
    """Bytes of part `number` (1-based): `base`, doubled after every 1,000 parts, at most 5 GiB, so
    a file of any size S3 takes needs fewer than its 10,000 parts (each part at least size/10,000)."""
    return min(base << ((number - 1) // PARTS_PER_STEP), PART_MAX)


def applies(stream: Any, mode: str) -> bool:
    """`stream` is s3fs's S3File opened by a save ("wb", committed on close, not appending)."""
    import sys
    s3fs = sys.modules.get("s3fs")
    return (s3fs is not None and isinstance(stream, s3fs.core.S3File) and mode == "wb"
            and getattr(stream, "autocommit", False) and not getattr(stream, "append_block", False))


class _Body(io.RawIOBase):
    """A part's body read from a slice of the caller's buffer: botocore takes a seekable file
    (its Content-Length and checksum read it and seek back), aiohttp reads it in 64 KiB pieces
    (aiohttp/payload.py, IOBasePayload): no copy of the part is made."""

    def __init__(self, view: memoryview) -> None:
        super().__init__()
        self._view, self._at = view, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: len(self._view)}[whence]
        self._at = min(max(base + offset, 0), len(self._view))
        return self._at

    def readinto(self, b: Any) -> int:
        out = memoryview(b).cast("B")
        n = min(len(out), len(self._view) - self._at)
        out[:n] = self._view[self._at:self._at + n]
        self._at += n
        return n

    def __len__(self) -> int:
        return len(self._view)


class MultipartWriter:
    """Takes the writes of one S3File `f` opened by a save: every byte goes into one multipart
    upload (or one PUT, for a file below a part) sent here, not through `f`; ``close`` completes it
    and closes `f` without its own upload; ``abort`` (any failure) aborts it. `after`: called with
    each contiguous slice of a caller's buffer once it was copied or sent (async_save's spill drops
    those pages, uvmchunk._spill.upload_hook)."""

    def __init__(self, f: Any, concurrency: int, part: int,
                 after: Optional[Callable[[memoryview], None]] = None) -> None:
        self.f, self.fs, self.after = f, f.fs, after
        self.concurrency, self.base = concurrency, part
        self.call = _accounting.current()
        self.pos = 0                     # bytes taken
        self.buffer = bytearray()        # bytes of the part being filled, copied
        self.number = 1                  # the part being filled
        self.parts: list[dict] = []
        self.inflight: set[cf.Future] = set()
        self.upload_id: Optional[str] = None
        self.error: Optional[BaseException] = None
        self.done = False
        self.t0: Optional[float] = None

    # ---- the stream DCP writes -------------------------------------------------------------

    def write(self, data: Any) -> int:
        view = memoryview(data)
        view = view.cast("B") if view.c_contiguous else memoryview(view.tobytes())
        n, done, mine = len(view), 0, []
        if self.error is not None:  # raised by close(), outside torch.save: there it is the client's own
            self.pos += n
            return n
        if self.buffer or n < self._room():
            done = min(self._room(), n)
            self._copy(view[:done])
        while n - done >= self._room():  # whole parts of this buffer, sent from it
            size = self._room()
            mine.append(self._send(view[done:done + size], view[done:done + size]))
            done += size
        if done < n:
            self._copy(view[done:])
        self.pos += n
        # the caller's buffer is its own again once write returns; a part's error is raised by
        # close(), as DCP calls it: raised inside torch.save's write, PyTorch's zip writer
        # (caffe2/serialize/inline_container.cc) reports its own "unexpected pos" error instead
        self._wait([f for f in mine if f is not None], raise_=False)
        return n

    def tell(self) -> int:
        return self.pos

    def flush(self) -> None:
        self._raise()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.f.fileno()  # io.UnsupportedOperation, as S3File's: DCP then calls os.sync()

    @property
    def closed(self) -> bool:
        return self.done

    def close(self) -> None:
        """Sends what is left, waits for every part and completes the upload (one PUT for a file
        that filled no part), then closes the S3File, which has nothing of its own to upload."""
        if self.done:
            return
        self._raise()
        bucket, key = self.f.bucket, self.f.key
        if self.upload_id is None:
            body, self.buffer = bytes(self.buffer), bytearray()
            kw = {"ACL": self.f.acl} if self.f.acl else {}
            self._wait([self._submit(self._put(bucket, key, body, kw), len(body))])
        else:
            if self.buffer:
                self._send(self.buffer, None)
                self.buffer = bytearray()
            self._wait(list(self.inflight))
            parts = sorted(self.parts, key=lambda p: p["PartNumber"])
            self._sync(self._call("complete_multipart_upload", Bucket=bucket, Key=key, UploadId=self.upload_id,
                                  MultipartUpload={"Parts": parts}))
        self.done = True
        self.f.forced = True  # fsspec's close then uploads nothing (fsspec/spec.py, close)
        self.f.close()

    def abort(self) -> None:
        """After a failure: waits for the parts in flight and aborts the upload (never raises
        past the failure that led here: that one is the caller's to see)."""
        if self.done:
            return
        self.done = True
        for fut in list(self.inflight):
            fut.cancel()
        cf.wait(list(self.inflight))
        self.inflight.clear()
        if self.upload_id is not None:
            try:
                self._sync(self._call("abort_multipart_upload", Bucket=self.f.bucket, Key=self.f.key,
                                      UploadId=self.upload_id))
            except Exception:  # noqa: BLE001  (the store is gone: nothing more to do here)
                pass
        self.f.forced = True  # S3File's own close writes nothing of a failed save
        self.f.buffer = io.BytesIO()

    # ---- parts ----------------------------------------------------------------------------

    def _room(self) -> int:
        return part_bytes(self.number, self.base) - len(self.buffer)

    def _copy(self, view: memoryview) -> None:
        self.buffer += view
        if self.after is not None:
            self.after(view)
        if not self._room():
            self._send(self.buffer, None)
            self.buffer = bytearray()

    def _send(self, body: Any, source: Optional[memoryview]) -> Optional[cf.Future]:
        """Part `self.number` (its bytes `body`; `source`: the caller's slice it is read from,
        else a copy), sent once fewer than `concurrency` parts are in flight."""
        if self.upload_id is None:
            kw = {"ACL": self.f.acl} if self.f.acl else {}
            try:
                out = self._sync(self._call("create_multipart_upload", Bucket=self.f.bucket, Key=self.f.key, **kw))
            except Exception as e:  # noqa: BLE001  (the client's: raised by close())
                self.error = self.error or e
                return None
            self.upload_id = out["UploadId"]
        while len(self.inflight) >= self.concurrency and self.error is None:
            cf.wait(self.inflight, return_when=cf.FIRST_COMPLETED)
            self._reap()
        if self.error is not None:  # nothing more is sent; close() raises it
            return None
        number, self.number = self.number, self.number + 1
        payload = _Body(source) if source is not None else bytes(body) if isinstance(body, memoryview) else body
        fut = self._submit(self._part(number, payload), len(body))
        if source is not None and self.after is not None:
            fut.add_done_callback(lambda f, s=source: f.cancelled() or f.exception() or self.after(s))
        return fut

    async def _part(self, number: int, body: Any) -> None:
        out = await self._call("upload_part", Bucket=self.f.bucket, Key=self.f.key, UploadId=self.upload_id,
                               PartNumber=number, Body=body)
        part = {"PartNumber": number, "ETag": out["ETag"]}
        if "ChecksumSHA256" in out:  # as S3File._upload_chunk keeps it
            part["ChecksumSHA256"] = out["ChecksumSHA256"]
        self.parts.append(part)

    async def _put(self, bucket: str, key: str, body: bytes, kw: dict) -> None:
        await self._call("put_object", Bucket=bucket, Key=key, Body=body, **self.f.kwargs, **kw)

    def _submit(self, coro: Any, nbytes: int) -> cf.Future:
        if self.t0 is None:
            self.t0 = time.monotonic()
        _INFLIGHT.begin(self.call)
        fut = asyncio.run_coroutine_threadsafe(coro, self.fs.loop)
        self.inflight.add(fut)

        def landed(f: cf.Future) -> None:
            _INFLIGHT.end(self.call)
            if not f.cancelled() and f.exception() is None:
                _accounting.add("upload_bytes", nbytes, self.call)
                _accounting.span("upload", self.t0 or time.monotonic(), time.monotonic(), self.call)
        fut.add_done_callback(landed)
        return fut

    def _call(self, method: str, **kwargs: Any) -> Any:
        """s3fs's own async call, with the file's extra arguments as S3File._call_s3 passes them."""
        return self.fs._call_s3(method, self.f.s3_additional_kwargs, self.f._request_payer_kw, **kwargs)

    def _sync(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.fs.loop).result()

    def _wait(self, futs: list, raise_: bool = True) -> None:
        if futs:
            cf.wait(futs)
        self._reap()
        if raise_:
            self._raise()

    def _reap(self) -> None:
        for fut in [f for f in self.inflight if f.done()]:
            self.inflight.discard(fut)
            if self.error is None and not fut.cancelled() and fut.exception() is not None:
                self.error = fut.exception()

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error


def writer(stream: Any, after: Optional[Callable[[memoryview], None]] = None) -> MultipartWriter:
    """A MultipartWriter over S3File `stream` with the configuration's settings."""
    n, part = settings()
    return MultipartWriter(stream, n, part, after)
