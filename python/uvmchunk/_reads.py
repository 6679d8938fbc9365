"""Direct reads for dcp.load: an item whose target is a CPU view of a managed table (uvmchunk._views)
is read from the checkpoint file (a local file, or a store's object through DCP's FsspecReader or
s3torchconnector's S3StorageReader, uvmchunk._streams.open_source, each request pinned to the
object version DCP's reader of the file reads: uvmchunk._versions) straight into the table's pages,
in bounded chunks, where PyTorch's
FileSystemReader.read_data (torch/distributed/checkpoint/filesystem.py, 2.8 to 2.15) would
torch.load the item's whole slice into a new CPU tensor and copy_ it into the target.

``install`` wraps FileSystemReader.read_data once (the original stays as ``__wrapped__``). The
wrapper acts only for a planner that takes views (uvmchunk.dcp's load planners, the automatic
path's default planners) and a reader that is exactly PyTorch's (no override of read_data or
_slice_file, on a file system _streams.open_source reads); then it runs read_data's own loop, item by item, with the
target resolved before the read: an item it cannot read exactly as torch.load would (another
format, dtype or byte order, a stream transform, a non-contiguous stored tensor, a target that is
no view) takes PyTorch's per-item code unchanged, said once per reason. Extra host memory: one
bounce buffer of at most ``chunk_bytes()`` for requests that are not whole rows, nothing else."""
from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import io
import itertools
import math
import os
import pickle
import struct
import sys
import threading
import zipfile
from typing import Any, Optional

import torch
from torch.futures import Future

from . import _accounting, _downloads, _versions
from ._config import say_once, stock
from ._cuda import rt
from ._streams import Source, chunk_bytes, frames_released, kind_of, open_source
from ._views import Viewer

DIRECT_RUN = 1 << 20  # contiguous runs of at least this many bytes are read straight into the view


class _Slice(io.RawIOBase):
    """An item's slice [offset, offset + length) of a stored object, read positionally (a Source),
    so the caller's stream position is untouched. zipfile reads the archive's directory through it."""

    def __init__(self, src: Source, offset: int, length: int) -> None:
        super().__init__()
        self.src, self.offset, self.length, self.pos = src, offset, length, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, pos: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self.pos, os.SEEK_END: self.length}[whence]
        self.pos = max(0, base + pos)
        return self.pos

    def readinto(self, b: Any) -> int:
        n = min(len(b), self.length - self.pos)
        if n <= 0:
            return 0
        got = self.src.readinto(memoryview(b).cast("B")[:n], self.offset + self.pos)
        self.pos += got
        return got


class _Ends(Source):
    """The first and last ``END_BYTES`` of an item's archive at [offset, offset + length) of `src`,
    each fetched with one read at its first use; other reads go to `src`. Parsing a record reads
    the local headers, data.pkl and byteorder near the start and the zip directory at the end:
    from a store that was a request per read (seven or more), each of which moto answers with a
    copy of the whole object (moto/s3/models.py, ``FakeKey.value``)."""

    END_BYTES = 64 << 10

    def __init__(self, src: Source, offset: int, length: int) -> None:
        self.src = src
        n = min(self.END_BYTES, length)
        self.ends = {offset: n, offset + length - n: n}  # start -> bytes
        self.held: dict[int, bytes] = {}

    def readinto(self, view: memoryview, at: int) -> int:
        for start, n in self.ends.items():
            if start <= at and at + len(view) <= start + n:
                if start not in self.held:
                    self.held[start] = self.src.pread(n, start)
                got = self.held[start][at - start:at - start + len(view)]
                view[:len(got)] = got
                return len(got)
        return self.src.readinto(view, at)


class _Stored:
    """What an item's data.pkl says: _rebuild_tensor_v2(storage, storage_offset, size, stride, ...)."""

    def __init__(self, storage: tuple, offset: int, size: tuple, stride: tuple) -> None:
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)


def _rebuilt(storage: tuple, offset: int, size: tuple, stride: tuple, requires_grad: bool = False,
             backward_hooks: Any = None, *rest: Any) -> Any:
    """A _Stored for what torch._utils._rebuild_tensor_v2 would give from exactly its bytes, or why
    not (a str): anything else it would apply (a `metadata` argument: the lazy negative or conjugate
    bit Tensor._reduce_ex_internal records through torch._utils.get_tensor_metadata, which
    set_tensor_metadata restores and copy_ materialises; backward hooks; an argument a later
    PyTorch adds) is left to PyTorch's own read."""
    if rest:
        return "a record with rebuild metadata (" + ", ".join(sorted(map(str, rest[0]))) + ")" \
            if len(rest) == 1 and isinstance(rest[0], dict) else "a rebuild with arguments not read here"
    if not isinstance(requires_grad, bool) or backward_hooks:  # None or the empty OrderedDict torch.save writes
        return "a rebuild with arguments not read here"
    return _Stored(storage, offset, size, stride)


class _Meta(pickle.Unpickler):
    """Reads a plain tensor's data.pkl without building anything: any other global (a subclass,
    a parameter, a quantized or sparse rebuild) is refused, and the item takes PyTorch's path."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuilt
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch" and name.endswith("Storage"):
            from torch.storage import _get_dtype_from_pickle_storage_type
            return ("dtype", _get_dtype_from_pickle_storage_type(name))
        raise pickle.UnpicklingError(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        # torch.serialization._save: ('storage', storage_type, key, location, numel)
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], tuple) and pid[1][0] == "dtype"):
            raise pickle.UnpicklingError("persistent id")
        return (pid[1][1], str(pid[2]), int(pid[4]))  # dtype, record key, elements


def _member(src: Source, offset: int, length: int, info: zipfile.ZipInfo) -> tuple[int, int]:
    """(offset in the slice, bytes) of a stored member's data, from its local header; ValueError
    when it is compressed or lies outside the slice. Its CRC-32 is not checked: torch.load does not
    check it either, and a writer with torch.serialization.config.save.compute_crc32 off leaves it 0."""
    head = src.pread(30, offset + info.header_offset)
    if info.compress_type != zipfile.ZIP_STORED or len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise ValueError(info.filename)
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    start = info.header_offset + 30 + name_len + extra_len
    if start + info.file_size > length:
        raise ValueError(info.filename)
    return start, info.file_size


def _record(src: Source, offset: int, length: int) -> tuple[Optional[tuple], str]:
    """(dtype, stored tensor, file offset of its data record's first byte, record bytes), or None
    and why, for the torch.save archive at [offset, offset + length) of the file."""
    def member(name: str) -> bytes:
        start, n = _member(src, offset, length, zf.getinfo(name))
        return src.pread(n, offset + start)

    try:
        with zipfile.ZipFile(io.BufferedReader(_Slice(src, offset, length), 64 << 10)) as zf:  # reads the central directory only
            names = zf.namelist()
            prefix = names[0].split("/", 1)[0] if names else ""
            stored = _Meta(io.BytesIO(member(f"{prefix}/data.pkl"))).load()
            if isinstance(stored, str):
                return None, stored
            if not isinstance(stored, _Stored):
                return None, "not a plain tensor"
            order = member(f"{prefix}/byteorder").decode() if f"{prefix}/byteorder" in names else None
            dtype, key, numel = stored.storage
            start, nbytes = _member(src, offset, length, zf.getinfo(f"{prefix}/data/{key}"))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, KeyError, OSError, EOFError, ValueError, TypeError,
            IndexError, AttributeError, pickle.UnpicklingError, UnicodeDecodeError) as e:
        return None, f"not a torch.save archive read here ({type(e).__name__})"
    if order != sys.byteorder:
        return None, f"byte order {order}"
    if nbytes != numel * dtype.itemsize:
        return None, "data record of another size than its storage"
    return (dtype, stored, offset + start, nbytes), ""


def _contiguous(size: tuple, stride: tuple) -> bool:
    expect = 1
    for n, s in zip(reversed(size), reversed(stride)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _as_bytes(t: torch.Tensor) -> memoryview:
    """The bytes of the contiguous CPU tensor `t`, writable (valid while `t` lives)."""
    n = t.numel() * t.element_size()
    return memoryview((ctypes.c_ubyte * n).from_address(t.data_ptr())).cast("B")


class _Reads:
    """The direct reads of one read_data call: its chunk and its one bounce buffer."""

    def __init__(self) -> None:
        self.chunk = chunk_bytes()
        self.bounce: Optional[torch.Tensor] = None
        self.call = _accounting.current()  # made on the caller's thread (read_data): its reads count there

    def pread(self, src: Source, out: memoryview, at: int, item: str) -> None:
        """Fills `out` from file offset `at`, a chunk at a time (``Source.fill``: one request for
        all of `out` where the store streams it; concurrent parts on a store, uvmchunk._downloads); a
        file that ends early is an error naming the item (the bytes read so far, counted to the
        byte, have landed)."""
        landed = [0]

        def placed(n: int) -> None:
            landed[0] += n

        try:
            _downloads.fill(src, out, at, self.chunk, placed, self.call)
        except OSError as e:  # EIO and the like: say what has landed (stock's torch.load fails before copy_)
            raise RuntimeError(f"uvmchunk: dcp.load of {item}: reading the checkpoint file failed after {landed[0]} "
                               f"of {len(out)} bytes of its data had landed in the table ({e})") from e
        except Exception as e:  # a store client's own error (botocore's, the connector's S3Exception): raised as is
            if landed[0] and hasattr(e, "add_note"):
                e.add_note(f"uvmchunk: dcp.load of {item}: {landed[0]} of {len(out)} bytes of its data had "
                           f"landed in the table")
            raise
        if landed[0] < len(out):
            raise RuntimeError(f"uvmchunk: dcp.load of {item}: the checkpoint file ends after {landed[0]} of "
                               f"{len(out)} bytes of its data")

    def bounce_of(self, nbytes: int) -> torch.Tensor:
        if self.bounce is None or self.bounce.numel() < nbytes:
            grown = nbytes - (0 if self.bounce is None else self.bounce.numel())
            self.bounce = None  # never two at once
            self.bounce = torch.empty(nbytes, dtype=torch.uint8)
            _accounting.add("bounce_bytes", grown, self.call)  # the call's largest bounce buffer
        return self.bounce[:nbytes]

    def read(self, src: Source, rec: tuple, req: Any, target: torch.Tensor, item: str) -> bool:
        """Reads request `req` of the stored tensor described by `rec` into `target`; False (nothing
        read) when the request does not match what torch.load + narrow would give."""
        dtype, stored, data_at, _ = rec
        size, o, lengths = stored.size, list(req.storage_offsets), list(req.lengths)
        esize = dtype.itemsize
        if (dtype != target.dtype or not _contiguous(size, stored.stride) or len(o) != len(size)
                or len(lengths) != len(size) or tuple(lengths) != tuple(target.shape)
                or any(a < 0 or n < 0 or a + n > s for a, n, s in zip(o, lengths, size))
                or stored.offset + math.prod(size) > stored.storage[2]):
            return False
        stride = [math.prod(size[d + 1:]) for d in range(len(size))]
        # r: the innermost dimension the request does not take whole (0 when it takes them all).
        # The request is a set of runs: for each index of the dimensions before r, lengths[r] rows
        # of the whole dimensions after it, contiguous in the file and, in order, in the target.
        r = len(size)
        while r > 0 and lengths[r - 1] == size[r - 1]:
            r -= 1
        r = max(r - 1, 0)
        run = lengths[r] * stride[r] if size else 1  # elements per run
        outer = [range(n) for n in lengths[:max(r - 1, 0)]]
        group_dim = r - 1  # consecutive runs along this dim are one stride apart in the file
        flat = target.view(-1)
        out = _as_bytes(target)
        base = stored.offset + sum(a * s for a, s in zip(o, stride))
        if not size or math.prod(lengths[:r]) == 1:  # one run: the whole request, e.g. rows
            self.pread(src, out, data_at + base * esize, item)
            _accounting.add("direct_read_bytes", len(out), self.call)
            return True
        k = 0  # runs done, in target order
        gap = stride[group_dim]
        per_group = max(1, (self.chunk // esize - run) // gap + 1) if run * esize < DIRECT_RUN else 1
        for idx in itertools.product(*outer):
            at = base + sum(i * s for i, s in zip(idx, stride))
            left = lengths[group_dim]
            while left:
                g = min(per_group, left)
                if g == 1 and run * esize >= DIRECT_RUN or run + (g - 1) * gap > self.chunk // esize:
                    self.pread(src, out[k * run * esize:(k + 1) * run * esize], data_at + at * esize, item)
                    _accounting.add("direct_read_bytes", run * esize, self.call)
                    g = 1
                else:
                    span = (run + (g - 1) * gap) * esize
                    buf = self.bounce_of(span)
                    self.pread(src, _as_bytes(buf), data_at + at * esize, item)
                    rows = buf.view(dtype).as_strided((g, run), (gap, 1))
                    flat[k * run:(k + g) * run].view(g, run).copy_(rows)
                at += g * gap
                k += g
                left -= g
        return True


def _copied_not_viewed(tensors: int, nbytes: int, call: Optional[_accounting.Call]) -> None:
    """Counts views that PyTorch's per-item code filled (torch.load into a CPU tensor, then copy_,
    which converts another dtype) as DCP's copies through host memory, not as bytes read into the
    tables' pages: their resolve counted them as views (uvmchunk._views.Viewer.view)."""
    _accounting.add("view_tensors", -tensors, call)
    _accounting.add("view_bytes", -nbytes, call)
    _accounting.add("copied_bytes", nbytes, call)


def _pytorch_read_data(orig: Any, reader: Any, plan: Any, planner: Any, viewer: Viewer) -> Any:
    """PyTorch's own read_data for a planner that hands views: every view it resolves meanwhile
    (on this thread: read_data resolves its items itself) is filled by torch.load + copy_."""
    call = viewer.call
    if call is None:
        return orig(reader, plan, planner)
    tensors, nbytes = call.counts["view_tensors"], call.counts["view_bytes"]
    try:
        return orig(reader, plan, planner)
    finally:
        _copied_not_viewed(call.counts["view_tensors"] - tensors, call.counts["view_bytes"] - nbytes, call)


def _viewed(t: torch.Tensor) -> bool:
    """A contiguous CPU tensor over managed memory: a view of a table (uvmchunk._views)."""
    if t.device.type != "cpu" or not t.is_contiguous() or t.numel() == 0:
        return False
    runtime = rt()
    return runtime is not None and runtime.is_managed(t.data_ptr())


def _viewer(planner: Any) -> Optional[Viewer]:
    """The planner's viewer when it hands DCP views: the automatic path's (set_up_planner's
    _uvmchunk_auto) or uvmchunk.dcp's load planners' (zero_copy); else None."""
    viewer = getattr(planner, "__dict__", {}).get("_uvmchunk_auto") or getattr(planner, "zero_copy", None)
    # synced: the devices prepare() waited for, the only ones that get views; none (a load without
    # managed tables) hands no view, so PyTorch's own read_data runs, with no CUDA call of ours
    return viewer if isinstance(viewer, Viewer) and viewer.synced else None


def _why_not(reader: Any, planner: Any, wrapper: Any) -> Optional[str]:
    """Why this read_data call takes PyTorch's own code, or None when it may read directly."""
    from torch.distributed.checkpoint import filesystem
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

    cls = type(reader)
    if getattr(cls, "read_data") is not wrapper or cls._slice_file is not filesystem.FileSystemReader._slice_file:
        return f"storage reader {cls.__qualname__} overrides read_data or _slice_file"
    if kind_of(getattr(reader, "fs", None)) is None:
        return f"storage reader {cls.__qualname__} is on a file system read here no other way"
    if getattr(type(planner), "commit_tensor", None) is not DefaultLoadPlanner.commit_tensor:
        return f"planner {type(planner).__qualname__} overrides commit_tensor"
    return None


def _stock_tensor(reader: Any, req: Any, md: Any, stream: Any, target: torch.Tensor) -> None:
    """FileSystemReader.read_data's own code for one tensor item (2.8 to 2.15), into `target`."""
    from torch.distributed._shard._utils import narrow_tensor_by_index

    transform_from = reader.transforms.transform_load_stream(req, md.transform_descriptors or (),
                                                            reader._slice_file(stream, md))
    if transform_from.seekable():
        seekable = transform_from
    else:
        seekable = io.BytesIO(transform_from.read(-1))
        seekable.seek(0)
    tensor = narrow_tensor_by_index(torch.load(seekable, map_location="cpu", weights_only=True),
                                    req.storage_offsets, req.lengths)
    if target.size() != tensor.size():
        raise AssertionError(f"req {req.storage_index} mismatch sizes {target.size()} vs {tensor.size()}")
    target.copy_(tensor)


def _read_data(reader: Any, plan: Any, planner: Any, viewer: Viewer) -> Future:
    """FileSystemReader.read_data's loop with direct reads into viewed targets (`viewer`'s)."""
    from torch.distributed.checkpoint.planner import LoadItemType

    reads = _Reads()
    per_file: dict[str, list] = {}
    for req in plan.items:
        per_file.setdefault(reader.storage_data[req.storage_index].relative_path, []).append(req)
    for relative_path, reqs in per_file.items():
        path = reader.fs.concat_path(reader.path, relative_path)
        with reader.fs.create_stream(path, "rb") as stream, \
                contextlib.ExitStack() as sources:
            # the connector's object version, taken before any request for the file
            # (uvmchunk._versions: s3fs's reads are pinned through `stream` itself)
            pin = _versions.connector_pin(reader.fs, path) if kind_of(reader.fs) == "connector" else None
            src: Optional[Source] = None  # opened at the first item read directly
            records: dict[tuple[int, int], tuple] = {}  # one item read by several requests: parsed once
            skipped = False  # an item of this file was read directly, not from `stream`

            def own() -> Any:
                """The stream DCP's own reads of this file take (_streams.Source.dcp_stream)."""
                return src.dcp_stream if skipped and src is not None and src.dcp_stream is not None else stream

            for req in reqs:
                md = reader.storage_data[req.storage_index]
                if req.type == LoadItemType.BYTE_IO:
                    transform_from = reader.transforms.transform_load_stream(
                        req, md.transform_descriptors or (), reader._slice_file(own(), md))
                    read_bytes = io.BytesIO(transform_from.read(-1))
                    read_bytes.seek(0)
                    planner.load_bytes(req, read_bytes)
                    continue
                target = planner.resolve_tensor(req).detach()  # a view: the device's queued work waited for
                item = f"{req.storage_index.fqn} (file {relative_path}, offset {md.offset})"
                why, viewed = "", _viewed(target)
                if md.transform_descriptors:
                    why = "a stream transform"
                elif not viewed:
                    why = "target is no view"  # not said: stock's path is the normal one for these
                else:
                    key = (md.offset, md.length)
                    if src is None:
                        src = sources.enter_context(open_source(reader.fs, path, stream, pin))
                    if key not in records:
                        records[key] = _record(_Ends(src, md.offset, md.length), md.offset, md.length)
                    rec, why = records[key]
                    if rec is not None and not reads.read(src, rec, req, target, item):
                        why = "dtype, shape or layout differs from the request"
                    skipped = skipped or rec is not None and not why
                if why:
                    if why != "target is no view":
                        say_once(f"reads:{why}", "info", f"dcp.load: {item} read through PyTorch's path: {why}")
                    _stock_tensor(reader, req, md, own(), target)
                    if viewed:  # torch.load'ed into a CPU tensor, then copied into the pages: no view's bytes
                        _copied_not_viewed(1, target.numel() * target.element_size(), viewer.call)
                planner.commit_tensor(req, target)
            if pin is not None and src is not None:  # the library's reads, and DCP's around them: one version
                pin.check()
    fut: Future = Future()
    fut.set_result(None)
    return fut


_install_lock = threading.Lock()


def install() -> None:
    """Wraps FileSystemReader.read_data for direct reads (idempotent); nothing under stock = on."""
    from torch.distributed.checkpoint import filesystem

    if stock():
        return

    cls = filesystem.FileSystemReader
    with _install_lock:
        orig = cls.read_data
        if getattr(orig, "_uvmchunk_reads", False):
            return

        @functools.wraps(orig)
        def read_data(self: Any, plan: Any, planner: Any) -> Any:
            viewer = _viewer(planner)
            if viewer is None:
                return orig(self, plan, planner)
            why = _why_not(self, planner, read_data)
            if why is not None:
                say_once(f"reads:{why}", "info", f"dcp.load: {why}: no direct reads, PyTorch's path")
                return _pytorch_read_data(orig, self, plan, planner, viewer)
            with frames_released():
                return _read_data(self, plan, planner, viewer)

        read_data._uvmchunk_reads = True
        cls.read_data = read_data
