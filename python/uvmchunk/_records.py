"""Records whose CRC-32 matches their bytes when a table changes during a save. ``torch.save``
computes a storage record's CRC-32 in one pass over the storage and writes its bytes in another
(caffe2/serialize/inline_container.cc, ``PyTorchStreamWriter::writeRecord``, through miniz's
``mz_zip_writer_add_mem_ex_v2``): stock DCP saves a CUDA tensor from a private copy, so the two
agree; written from a managed table's own pages (a view, uvmchunk._views), a table that training
changes meanwhile would leave a CRC that does not match the bytes (``zipfile.testzip``: bad CRC).

``install`` wraps the streams DCP's writer threads write records to (as uvmchunk._streams does):
``RecordCheck`` follows each torch.save archive as it passes: a 30-byte local header with bit 3
(the CRC comes after the data, in a data descriptor: both PyTorch 2.8 and 2.11 write so), its name
and extra field, the data, the 16- or 24-byte data descriptor, and at the archive's end its
central directory, which repeats the CRC. Only a record whose data lies in managed memory (a view)
is checked: DCP's own copies and CPU tensors are written as stock writes them. Its CRC-32 is
computed once more over exactly the bytes written: a private copy of at most _COPY bytes at a
time, which is what is written (to a store, the piece it would copy inside ``write`` anyway:
fsspec's buffer, the connector's ``bytes``). A CRC-32 of the pages taken after a write directly
from them is not enough: a table changed and changed back between the write and that pass (a
writer alternating two patterns) left bytes in the file that neither CRC-32 covered
(tests/torch/test_fuzz.py, changing_table, on PyTorch 2.8). Where the bytes written are not those
torch.save's CRC-32 covered, the data descriptor and the central directory carry the CRC-32 of
the bytes written, so the record is consistent (the values are the table's as it changed: stock's
copy of a table written during its copy is no better), and the call's report and JSON record
count the table as changed during the save (``changed_tensors``, uvmchunk._report). Cost: one
more CRC-32 pass and a copy of each _COPY piece of each viewed table; memory: that piece."""
from __future__ import annotations

import contextlib
import functools
import struct
import threading
import zlib
from typing import Any, Callable, Iterator, Optional

from . import _accounting
from ._config import log, stock

_LOCAL_HEADER = b"PK\x03\x04"  # APPNOTE.TXT 4.3.7
_DESCRIPTOR = b"PK\x07\x08"    # 4.3.9, with its optional signature (miniz writes it)
_CENTRAL = b"PK\x01\x02"       # 4.3.12
_END = b"PK\x05\x06"           # 4.3.16
_COPY = 1 << 20                # bytes per private copy a viewed table's data is written in


def _managed(view: memoryview) -> bool:
    """The buffer lies in CUDA managed memory: a view of a table's pages (uvmchunk._views)."""
    from ._cuda import rt
    from ._spill_upload import buffer_address

    runtime = rt()
    address = buffer_address(view)
    return runtime is not None and address is not None and runtime.is_managed(address)


class RecordCheck:
    """A writable stream that passes every write to the one it wraps and keeps the CRC-32 of each
    torch.save record written from managed memory true to the bytes it wrote (module docstring);
    every other attribute is the stream's own. `call`: the accounting call its counts go to."""

    def __init__(self, stream: Any, call: Optional[_accounting.Call]) -> None:
        self._stream, self._call = stream, call
        self._state = "idle"  # idle, tail (the header's name and extra field), data
        self._tail = 0        # bytes of the name and extra field still to pass
        self._name_len = 0
        self._name = b""
        self._patched: dict[bytes, tuple[int, int]] = {}  # this archive's member -> (recorded, written)

    def write(self, data: Any) -> Any:
        view = memoryview(data)
        if not view.c_contiguous:
            self._state = "idle"
            return self._stream.write(data)
        view = view.cast("B")
        if self._state == "data":
            if len(view) in (16, 24) and view[:4] == _DESCRIPTOR and self._sizes_match(view):
                return self._stream.write(self._descriptor(view))
            return self._data(data, view)
        if self._state == "tail":
            if len(view) > self._tail:  # not the archive laid out as expected: leave it alone
                self._state = "idle"
            else:
                need = self._name_len - len(self._name)
                if need > 0:
                    self._name += bytes(view[:need])
                self._tail -= len(view)
            n = self._stream.write(data)
            if self._state == "tail" and self._tail == 0:
                self._begin_data()  # after the write: the data's first byte is at the stream's position
            return n
        if len(view) == 30 and view[:4] == _LOCAL_HEADER:
            flags, = struct.unpack_from("<H", view, 6)
            name_len, extra_len = struct.unpack_from("<HH", view, 26)
            n = self._stream.write(data)
            if flags & 0x8:  # the CRC in a data descriptor after the data: it can be set as it passes
                self._state, self._tail, self._name_len, self._name = "tail", name_len + extra_len, name_len, b""
                if self._tail == 0:
                    self._begin_data()
            return n
        elif view[:4] == _CENTRAL and self._patched:
            return self._stream.write(self._central(view))
        elif view[:4] == _END:
            self._patched = {}  # the archive ends: the next one's members are its own
        return self._stream.write(data)

    def _begin_data(self) -> None:
        self._state, self._n, self._crc, self._view = "data", 0, 0, None

    def _data(self, data: Any, view: memoryview) -> Any:
        """One write of a record's data: as it is when not in managed memory; from a table's pages,
        a copy of at most _COPY bytes at a time, each written and its CRC-32 taken, so the CRC-32
        is that of exactly the bytes written."""
        if self._view is None:
            self._view = _managed(view)
        if not self._view:
            self._n += len(view)
            return self._stream.write(data)
        done = 0
        while done < len(view):
            piece = bytes(view[done:done + _COPY])  # immutable: a store that keeps it (an upload queue) may
            n = self._stream.write(piece)
            n = len(piece) if n is None else n
            if n <= 0:
                break
            self._crc = zlib.crc32(memoryview(piece)[:n], self._crc)
            done += n
            if n < len(piece):
                break  # the stream took part of it: the caller hands the rest again
        self._n += done
        return done

    def _sizes_match(self, view: memoryview) -> bool:
        size = struct.unpack_from("<I" if len(view) == 16 else "<Q", view, 8)[0]
        return size == self._n

    def _descriptor(self, view: memoryview) -> Any:
        """The data descriptor as it is to be written: its CRC-32 that of the bytes written."""
        self._state = "idle"
        recorded, = struct.unpack_from("<I", view, 4)
        if not self._view or self._crc == recorded:
            return view
        _accounting.add("changed_tensors", 1, self._call)
        self._patched[self._name] = (recorded, self._crc)
        log("warn", f"a managed table ({self._n} bytes) changed during the save: its record holds the bytes "
                    f"as they were written, with their CRC-32")
        out = bytearray(view)
        struct.pack_into("<I", out, 4, self._crc)
        return out

    def _central(self, view: memoryview) -> Any:
        """The central directory with the patched members' CRC-32 (APPNOTE.TXT 4.3.12: 46 bytes,
        then the name, extra field and comment)."""
        out = bytearray(view)
        at = 0
        while at + 46 <= len(out) and out[at:at + 4] == _CENTRAL:
            name_len, extra_len, comment_len = struct.unpack_from("<HHH", out, at + 28)
            name = bytes(out[at + 46:at + 46 + name_len])
            if name in self._patched and struct.unpack_from("<I", out, at + 16)[0] == self._patched[name][0]:
                struct.pack_into("<I", out, at + 16, self._patched[name][1])
            at += 46 + name_len + extra_len + comment_len
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def checked(create_stream: Callable) -> Callable:
    """`create_stream` (a FileSystemBase's, as DCP's writer threads call it) whose writable streams
    are RecordCheck's; readable ones are its own."""
    @contextlib.contextmanager
    def create(path: Any, mode: str) -> Iterator[Any]:
        with create_stream(path, mode) as stream:
            # an s3fs save's concurrent upload sends its parts straight from the pages while the
            # write waits (uvmchunk._uploads): a private copy here would cost a part per connection,
            # so its records are not checked (docs/limits.md)
            from ._uploads import MultipartWriter
            check = "w" in mode and not isinstance(stream, MultipartWriter)
            yield RecordCheck(stream, _accounting.current()) if check else stream

    return create


_install_lock = threading.Lock()


def install() -> None:
    """Every DCP save through a FileSystemWriter (and its subclasses) writes through RecordCheck
    (idempotent; nothing under stock = on): DCP's writer threads take their streams from the
    create_stream handed to _write_files_from_queue (torch/distributed/checkpoint/filesystem.py,
    PyTorch 2.8 to 2.15)."""
    from torch.distributed.checkpoint import filesystem

    if stock():
        return
    with _install_lock:
        orig = getattr(filesystem, "_write_files_from_queue", None)
        if orig is None or getattr(orig, "_uvmchunk_records", False):
            return

        @functools.wraps(orig)
        def write_files(create_stream: Callable, *args: Any, **kwargs: Any) -> Any:
            return orig(checked(create_stream), *args, **kwargs)

        write_files._uvmchunk_records = True
        filesystem._write_files_from_queue = write_files
