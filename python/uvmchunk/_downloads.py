"""A load's direct read of a large run of an object as concurrent ranged GETs, each straight into
its slice of the table's pages. Imports nothing of torch.

Why: a direct read (uvmchunk._reads) of an item is one ranged GET (s3fs) or one range read per
piece (s3torchconnector's range-based reader), so it moves at one connection's speed; S3 serves
each connection at about 85-90 MB/s and gets its throughput from concurrent requests (AWS S3 user
guide, "Performance guidelines for Amazon S3": "use byte-range fetches ... aligned to part
boundaries"). Here a run of at least two parts is cut at multiples of ``s3_part_size`` of the
file's offsets (the boundaries of the parts uvmchunk._uploads sends; for the connector, of its
client's part size, the most it asks for in one request, where that is smaller) and at most
``s3_concurrency`` parts are read at once, each through ``Source.part_source`` (a request of its
own, pinned to the object version the load reads: uvmchunk._versions). Host memory: what each
client holds of a part in flight (aiohttp's buffer of a body; the connector's part buffers),
nothing of the table."""
from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from typing import Callable, Optional

from . import _accounting
from ._streams import Source
from ._uploads import settings

_INFLIGHT = _accounting.InFlight("download_connections")  # a call's ranged GETs in flight


def ranges(at: int, size: int, part: int) -> list[tuple[int, int]]:
    """(offset in the run, bytes) of each part of the run [at, at + size) of a file, cut at the
    file's multiples of `part`."""
    out, off = [], 0
    while off < size:
        end = min((at + off) // part * part + part - at, size)
        out.append((off, end - off))
        off = end
    return out


def fill(src: Source, out: memoryview, at: int, piece: int, placed: Callable[[int], None],
         call: Optional[_accounting.Call]) -> None:
    """Fills `out` from byte `at` of `src` as ``Source.fill`` does (`placed` told of each piece's
    bytes, on any thread; a file that ends early leaves the rest unfilled), with at most
    ``s3_concurrency`` parts in flight where `src` reads concurrently and `out` spans two parts or
    more. Returns only once no request writes into `out` any more; a failed part's error is raised
    (the earliest part's), and parts not yet started then send nothing."""
    n, part = settings() if src.concurrent else (1, 0)  # a local file reads no configuration here
    # the connector's client asks for at most its part size per request (request_bytes): the run
    # is cut at the file's multiples of that, each piece a request handed to the next free
    # connection, as its own get_object schedules its part GETs (aws-c-s3
    # source/s3_auto_ranged_get.c); never above s3_part_size, which bounds what one connection
    # holds. Cut at s3_part_size instead, a 256 MiB run had 16 parts, so no more connections than
    # that whatever s3_concurrency said, and a 768 MiB run 48, as many waves for 20 connections as
    # for 16 (docs/s3.md, "Speed")
    unit = min(src.request_bytes, part) if src.request_bytes else part
    if n < 2 or len(out) < 2 * unit:
        src.fill(out, at, piece, placed)
        return
    lock = threading.Lock()
    failed = threading.Event()

    def counted(k: int) -> None:
        with lock:
            placed(k)

    def one(off: int, size: int) -> None:
        if failed.is_set():  # a part failed: the call raises, nothing more is asked for
            return
        _INFLIGHT.begin(call)
        t0 = time.monotonic()
        try:
            with src.part_source() as s:
                s.fill(out[off:off + size], at + off, min(piece, unit), counted)
        except BaseException:
            failed.set()
            raise
        finally:
            _INFLIGHT.end(call)
            _accounting.span("download", t0, time.monotonic(), call)

    parts = ranges(at, len(out), unit)
    pool = cf.ThreadPoolExecutor(max_workers=min(n, len(parts)), thread_name_prefix="uvmchunk-get")
    try:
        futures = [pool.submit(one, off, size) for off, size in parts]
        # in the run's order: the error raised is the earliest part's, as a read in order would
        # meet it (a server gone mid-body, not the refused connection of a part after it)
        for f in futures:
            f.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # no request of this run outlives the call
    _accounting.add("download_bytes", len(out), call)
