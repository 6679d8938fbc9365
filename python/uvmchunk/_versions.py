"""One version per object for a load's direct reads (uvmchunk._reads): every request the library
sends for a checkpoint object reads the version DCP's own reader of that file reads, and a change
fails as the client fails, so a prefix overwritten by another save during the load (an evaluator
reading `latest/` while the trainer rewrites it) never yields items of two saves.

s3fs: its ``S3File`` pins each ranged GET to the ETag it saw at open (s3fs/core.py,
``S3File.__init__`` puts ``IfMatch`` in ``read_kw``; ``S3File._fetch_range`` raises ``FileExpired``
for the failed precondition) and, on a version-aware file system, to its ``VersionId``; the library
reads through DCP's own ``S3File`` of the file, with the same pin (S3fsSource).

s3torchconnector: its client's ``get_object`` takes no condition (s3torchconnectorclient 1.5.0,
``MountpointS3Client.get_object(bucket, key, start, end)``); one request is one version (aws-c-s3
sends ``If-Match`` with the first part's ETag on the others), so its readers that stream the file
read one version. The library's range reads are separate requests: ConnectorPin takes the object's
ETag (HEAD) before any read of the file and again after them, and raises the client's
``S3Exception`` when they differ."""
from __future__ import annotations

import errno
from typing import Any, Callable, Optional

from ._streams import Source


def _expired(f: Any, ex: OSError) -> Optional[Exception]:
    """s3fs's FileExpired for `ex`, the failed precondition of a GET of S3File `f`, as
    ``S3File._fetch_range`` (s3fs/core.py) turns it; None for any other error."""
    if ex.args and ex.args[0] == errno.EINVAL and len(ex.args) > 1 and "pre-conditions" in str(ex.args[1]):
        from s3fs.utils import FileExpired
        return FileExpired(filename=f.details["name"], e_tag=f.details.get("ETag"))
    return None


class S3fsSource(Source):
    """An s3fs object read through `f`, the ``S3File`` DCP's FsspecReader opened for the file, so
    every request carries its pin (the ``IfMatch`` of ``f.read_kw``, ``f.version_id``). Small reads
    are ``f._fetch_range`` (fsspec's ``AbstractBufferedFile`` contract: its caches fetch through it),
    which leaves `f`'s position and cache alone. ``fill``: one ranged GET with the same pin, its body
    read a piece at a time straight into `out`: s3fs's ``call_s3`` returns aiobotocore's streaming
    body, read on s3fs's event loop (fsspec.asyn.sync); aiohttp pauses the socket once its buffer
    holds about 128 KiB (aiohttp/streams.py, StreamReader's high-water mark), so nothing is fetched
    ahead of what the piece being placed asks for. One request per item (per part where
    uvmchunk._downloads cuts a run), where a read per piece would send one per piece."""

    concurrent = True  # fill is one request of its own on s3fs's event loop, from any thread

    def __init__(self, f: Any) -> None:
        self.f = f

    def readinto(self, view: memoryview, at: int) -> int:
        end = min(at + len(view), self.f.size)
        if end <= at:
            return 0
        data = self.f._fetch_range(at, end)
        view[:len(data)] = data
        return len(data)

    def fill(self, out: memoryview, at: int, piece: int, placed: Callable[[int], None]) -> None:
        from fsspec.asyn import sync
        from s3fs.core import version_id_kw

        f = self.f
        if not len(out):
            return
        try:
            resp = f.fs.call_s3("get_object", Bucket=f.bucket, Key=f.key, Range=f"bytes={at}-{at + len(out) - 1}",
                                **version_id_kw(f.version_id), **f.read_kw)
        except OSError as ex:
            expired = _expired(f, ex)
            if expired is None:
                raise
            raise expired from ex
        body = resp["Body"]
        try:
            # s3fs/core.py _inner_fetch: a file system that checks ETags itself (local_expiry_check)
            if getattr(f.fs, "local_expiry_check", False) and "ETag" in f.details \
                    and f.details["ETag"] != resp.get("ETag"):
                from s3fs.utils import FileExpired
                raise FileExpired(filename=f.details["name"], e_tag=f.details.get("ETag"))
            done = 0
            while done < len(out):
                got = sync(f.fs.loop, _body_into, body, out[done:done + piece], placed)
                if got <= 0:
                    return
                done += got
        finally:
            body.close()  # one not read to its end (an error) closes its connection


async def _body_into(body: Any, view: memoryview, placed: Callable[[int], None]) -> int:
    """Bytes of aiobotocore's streaming `body` placed into `view`, until it is full or the body ends
    (its ``read(n)`` returns what aiohttp holds, at most n); `placed` told of each read's bytes."""
    got = 0
    while got < len(view):
        data = await body.read(len(view) - got)
        if not data:
            break
        view[got:got + len(data)] = data
        got += len(data)
        placed(len(data))
    return got


def s3fs_file(stream: Any) -> bool:
    """`stream` (what DCP's FsspecReader opened) is s3fs's S3File, opened for reading."""
    import sys
    s3fs = sys.modules.get("s3fs")  # loaded already when `stream` is one
    return s3fs is not None and isinstance(stream, s3fs.S3File) and "r" in stream.mode


class ConnectorPin:
    """The ETag of connector object s3://`bucket`/`key` before any read of it (a HEAD, made when
    DCP opens the file, before its reader's first request), checked against a HEAD after the reads:
    ``info`` is handed to the library's reader as its object_info (S3Client.get_object), so that
    reader asks for no size of its own."""

    def __init__(self, client: Any, bucket: str, key: str) -> None:
        self.client, self.bucket, self.key = client, bucket, key
        self.info = client.head_object(bucket, key)

    def check(self) -> None:
        """Raises the connector's S3Exception when the object changed since the first HEAD: the
        library's reads (or DCP's own, around them) may have read parts of two versions."""
        now = self.client.head_object(self.bucket, self.key)
        if now.etag != self.info.etag:
            from s3torchconnectorclient import S3Exception  # type: ignore[import-not-found]
            raise S3Exception(f"uvmchunk: s3://{self.bucket}/{self.key} changed during dcp.load (ETag "
                              f"{self.info.etag} when its reads began, {now.etag} after them): another save "
                              f"overwrote it, and a load of one checkpoint from two saves is refused")


def connector_pin(fs: Any, path: Any) -> ConnectorPin:
    """A ConnectorPin of checkpoint file `path` of s3torchconnector's DCP file system `fs`."""
    from s3torchconnector._s3dataset_common import parse_s3_uri  # type: ignore[import-not-found]
    bucket, key = parse_s3_uri(str(path))
    return ConnectorPin(fs._client, bucket, key)
