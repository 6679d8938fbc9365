"""uvmchunk._downloads on fake sources (no torch, no store, under a second): a run cut at the file's
multiples of the part size, parts read at once and each placed where it belongs, the first error
raised only once no part writes into the buffer any more, and a source that cannot read
concurrently (or a run under two parts) read in order on the caller's thread."""
import sys
import threading
import time
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "python"))
from uvmchunk import _accounting, _downloads  # noqa: E402
from uvmchunk._streams import Source  # noqa: E402

PART = 1 << 20


class Fake(Source):
    """An object whose byte i is i % 251, read concurrently; `fail_at`: the offset of a part whose
    read raises at once; `slow`: seconds every other part waits before it writes."""

    concurrent = True

    def __init__(self, fail_at=None, slow=0.0):
        self.fail_at, self.slow = fail_at, slow
        self.threads, self.lock, self.inflight, self.most = set(), threading.Lock(), 0, 0
        self.writes_after = []  # (time of the write) of each piece placed
        self.asked = []  # bytes asked for by each readinto
        self.starts = []  # the offset of each readinto

    def readinto(self, view, at):
        with self.lock:
            self.threads.add(threading.get_ident())
            self.inflight += 1
            self.most = max(self.most, self.inflight)
            self.asked.append(len(view))
            self.starts.append(at)
        try:
            if at == self.fail_at:
                raise OSError("part refused")
            time.sleep(self.slow or 0.02)  # the others get going meanwhile
            view[:] = bytes((at + i) % 251 for i in range(len(view)))
            self.writes_after.append(time.monotonic())
            return len(view)
        finally:
            with self.lock:
                self.inflight -= 1


@pytest.fixture(autouse=True)
def settings(monkeypatch):
    monkeypatch.setattr(_downloads, "settings", lambda: (4, PART))


def test_ranges_cut_at_the_files_multiples():
    assert _downloads.ranges(0, 3 * PART, PART) == [(0, PART), (PART, PART), (2 * PART, PART)]
    cut = _downloads.ranges(100, 3 * PART, PART)
    assert cut[0] == (0, PART - 100) and sum(n for _, n in cut) == 3 * PART
    assert all((100 + off + n) % PART == 0 for off, n in cut[:-1]), cut
    assert [off for off, _ in cut] == [sum(n for _, n in cut[:i]) for i in range(len(cut))]


def test_parts_at_once_each_in_place():
    src, out = Fake(), bytearray(5 * PART + 123)
    call = _accounting.begin("dcp.load")
    placed = []
    try:
        _downloads.fill(src, memoryview(out), 77, 256 << 10, placed.append, call)
    finally:
        _accounting.end(call)
    assert out == bytes((77 + i) % 251 for i in range(len(out)))
    assert sum(placed) == len(out)
    assert src.most > 1 and threading.get_ident() not in src.threads, (src.most, src.threads)
    assert call.counts["download_bytes"] == len(out) and call.counts["download_connections"] > 1, call.counts
    assert call.notes["download"][1] > call.notes["download"][0]


def test_a_part_asks_at_most_the_sources_request_bytes():
    """A source whose client splits longer requests and fetches ahead (the connector's part_size)
    is asked at most that much per request, and never more than a part (s3_part_size bounds what
    a connection holds); another, a piece (or a part) per request."""
    for request, piece, most in ((PART // 4, PART, PART // 4), (2 * PART, 4 * PART, PART), (0, PART // 2, PART // 2),
                                 (0, 4 * PART, PART)):
        src, out = Fake(), bytearray(3 * PART)
        src.request_bytes = request
        _downloads.fill(src, memoryview(out), 0, piece, lambda n: None, None)
        assert out == bytes(i % 251 for i in range(len(out)))
        assert max(src.asked) == most, (request, piece, max(src.asked))


def test_request_bytes_cut_the_run_for_the_next_free_connection():
    """A source with request_bytes (the connector's part size) has its run cut at the file's
    multiples of that, each one request, so a run of one part is read on as many connections as a
    longer one (cut at the part, it was read in order on one)."""
    request = PART // 8
    for size in (PART, 4 * PART):
        src, out = Fake(), bytearray(size)
        src.request_bytes = request
        _downloads.fill(src, memoryview(out), 5, 1 << 30, lambda n: None, None)
        assert out == bytes((5 + i) % 251 for i in range(len(out)))
        assert sorted(src.starts) == [5] + list(range(request, 5 + size, request)), src.starts
        assert 1 < src.most <= 4, (size, src.most)  # settings(): 4 at most


def test_first_error_raised_once_no_part_writes():
    src, out = Fake(fail_at=7 + PART - 7, slow=0.3), bytearray(6 * PART)
    with pytest.raises(OSError, match="part refused"):
        _downloads.fill(src, memoryview(out), 7, PART, lambda n: None, None)
    returned = time.monotonic()
    assert all(t < returned for t in src.writes_after), "a part wrote after fill returned"
    time.sleep(0.5)
    assert all(t < returned for t in src.writes_after), "a part wrote after fill returned"


@pytest.mark.parametrize("case", ("not concurrent", "under two parts"))
def test_in_order_on_the_callers_thread(case):
    src = Fake()
    if case == "not concurrent":
        src.concurrent = False
    out = bytearray(3 * PART if case == "not concurrent" else 2 * PART - 1)
    _downloads.fill(src, memoryview(out), 0, 1 << 30, lambda n: None, None)
    assert src.threads == {threading.get_ident()} and src.most == 1
    assert out == bytes(i % 251 for i in range(len(out)))
