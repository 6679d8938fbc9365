"""uvmchunk._records.RecordCheck on a fake stream (no torch, no CUDA, under a second): a zip record
written as torch.save writes one (a local header with bit 3, the data, a data descriptor, the
central directory), its data from a table's pages (managed memory, faked), which changed after
torch.save took its CRC-32 and changed back right after the write, as a training thread
alternating two patterns does. The archive must come out consistent: the CRC-32 in its descriptor
and central directory is that of the bytes written (fails with a CRC-32 taken from the pages after
the write: tests/torch/test_fuzz.py's changing_table on PyTorch 2.8)."""
import io
import struct
import sys
import zipfile
import zlib
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "python"))
from uvmchunk import _records  # noqa: E402

NAME = b"archive/data/0"
SIZE = 3 << 20  # three of _records' copy pieces


class Flipping:
    """A local file (DCP's writer writes to one) whose write of record data puts the table back to
    pattern A once it has taken the bytes handed to it."""

    def __init__(self, path, table, a):
        self.f, self.table, self.a = open(path, "wb"), table, a

    def write(self, data):
        n = self.f.write(data)
        if n > 1024:  # the record's data, not a header
            self.table[:] = self.a
        return n

    def __getattr__(self, name):
        return getattr(self.f, name)


def archive(out, data, recorded):
    """The writes torch.save's zip writer makes for one stored record (APPNOTE.TXT 4.3.7 to 4.3.16)."""
    out.write(struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0x8, 0, 0, 0, 0, 0, 0, len(NAME), 0))
    out.write(NAME)
    at = 0
    while at < len(data):  # miniz hands the data on in one write; DCP's streams in pieces
        out.write(data[at:at + SIZE])
        at += SIZE
    out.write(struct.pack("<4sIII", b"PK\x07\x08", recorded, len(data), len(data)))
    central = struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0x8, 0, 0, 0, recorded, len(data),
                          len(data), len(NAME), 0, 0, 0, 0, 0, 0) + NAME
    out.write(central)
    out.write(struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 1, 1, len(central), 30 + len(NAME) + len(data) + 16, 0))


def test_a_table_changed_and_back_gets_the_crc_of_the_bytes_written(monkeypatch, tmp_path):
    monkeypatch.setattr(_records, "_managed", lambda view: True)
    a, b = bytes(range(256)) * (SIZE // 256), bytes(255 - i for i in range(256)) * (SIZE // 256)
    table = bytearray(b)  # torch.save took the CRC-32 of A; the table reads B when it is written
    f = Flipping(tmp_path / "ckpt", table, a)
    archive(_records.RecordCheck(f, None), memoryview(table), zlib.crc32(a))
    f.close()
    with zipfile.ZipFile(tmp_path / "ckpt") as z:
        assert z.testzip() is None  # every record's CRC-32 matches its bytes
        # what was written: the table as each piece was taken, B until the first write put A back
        assert z.read(NAME.decode())[:1 << 20] == b[:1 << 20]


def test_an_unchanged_table_is_written_as_it_was_recorded(monkeypatch, tmp_path):
    monkeypatch.setattr(_records, "_managed", lambda view: True)
    a = bytes(range(256)) * (SIZE // 256)
    table = bytearray(a)
    f = Flipping(tmp_path / "ckpt", table, a)
    archive(_records.RecordCheck(f, None), memoryview(table), zlib.crc32(a))
    f.close()
    plain = io.BytesIO()
    archive(plain, a, zlib.crc32(a))
    assert (tmp_path / "ckpt").read_bytes() == plain.getvalue()  # the bytes stock's writer would write
