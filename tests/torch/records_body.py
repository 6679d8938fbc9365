"""Bodies of tests/torch/test_records.py: what a checkpoint's records say, read back as torch.load
reads them, on the simulated CUDA runtime. Each prints one `RESULT <json>` line. No op launches a
kernel: tables are filled and compared through host-to-device / device-to-host copies, and lazy
negative / conjugate views are views (torch._neg_view, Tensor.conj), not kernels.

usage: python records_body.py rebuild|torn --dir DIR [--mode stock|auto|planner] [--size BYTES]
"""
import argparse
import hashlib
import io
import os
import sys
import threading
import zipfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load_body import count_torch_load, planner_for, torch_loads  # noqa: E402
from torch_body import cuda_from, result  # noqa: E402


def _managed(cpu):
    """A managed CUDA copy of the CPU tensor `cpu` (any dtype), through its bytes."""
    raw = cpu.contiguous().view(torch.uint8).reshape(-1)
    return cuda_from(raw, managed=True).view(cpu.dtype).view(cpu.shape)


def _items(path):
    """fqn -> sha256 of each item record's data.pkl and data records (what torch.load reads;
    .data/serialization_id is random per save and left out), from a DCP checkpoint folder."""
    from torch.distributed.checkpoint import FileSystemReader
    md = FileSystemReader(path).read_metadata()
    out = {}
    for index, info in md.storage_data.items():
        with open(os.path.join(path, info.relative_path), "rb") as f:
            f.seek(info.offset)
            blob = f.read(info.length)
        with zipfile.ZipFile(io.BytesIO(blob)) as zf:
            h = hashlib.sha256()
            for name in sorted(zf.namelist()):
                if name.endswith("/data.pkl") or "/data/" in name:
                    h.update(name.encode() + zf.read(name))
        out[index.fqn] = h.hexdigest()
    return out


def _testzip(path):
    """fqn -> zipfile.testzip of the item's record (None: every member's CRC-32 matches its bytes),
    each item's archive read from its own slice of its data file (a folder or an fsspec URL)."""
    import fsspec
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader
    md = FsspecReader(path).read_metadata()
    fs, root = fsspec.core.url_to_fs(path)
    out = {}
    for index, info in md.storage_data.items():
        with fs.open(f"{root}/{info.relative_path}", "rb") as f:
            f.seek(info.offset)
            blob = f.read(info.length)
        with zipfile.ZipFile(io.BytesIO(blob)) as zf:
            out[index.fqn] = zf.testzip()
    return out


def body_rebuild(a):
    """Tensors saved with PyTorch's lazy negative or conjugate bit (CPU tensors; dcp.save to a
    folder and through fsspec's file://), each loaded into a managed table of its dtype: per case the loaded values bitwise against the materialised tensor, the
    torch.load calls, and a digest of each saved item's records (the save side: the same as stock's).
    A plain float32 table is the control: read directly, no torch.load."""
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    count_torch_load()
    g = torch.Generator().manual_seed(5)
    real = torch.randn(256, 64, generator=g)
    cplx = torch.complex(torch.randn(256, 32, generator=g), torch.randn(256, 32, generator=g))
    cases = {  # name: (what is saved, checkpoint url prefix)
        "plain_f32": (lambda: _managed(real), ""),
        "neg_f32_cpu": (lambda: torch._neg_view(real), ""),
        "conj_c64_cpu": (lambda: cplx.conj(), ""),
        "neg_f32_cpu_fsspec": (lambda: torch._neg_view(real), "file://"),
    }
    out = {}
    for name, (make, url) in cases.items():
        path = os.path.join(a.dir, name)
        saved = make()
        expect = saved.cpu().resolve_neg().resolve_conj()
        dcp.save({"x": saved}, checkpoint_id=url + path)
        # stock into a CPU tensor: its copy_ of a negative or conjugate CPU tensor into a CUDA
        # target runs a kernel for the sign (ATen's copy_), which the simulator cannot run
        target = torch.zeros_like(expect) if a.mode == "stock" else _managed(torch.zeros_like(expect))
        before = torch_loads[0]
        dcp.load({"x": target}, checkpoint_id=url + path, planner=planner_for(a.mode))
        back = target.cpu()
        out[name] = dict(equal=torch.equal(back.view(torch.uint8), expect.view(torch.uint8)),
                         torch_loads=torch_loads[0] - before, items=_items(path))
    # a managed table's negative or conjugate view: no view of its raw bytes is handed to DCP, whose
    # own path (Tensor.cpu, a kernel that materialises the sign: not on the simulator) writes it
    from uvmchunk._views import Viewer
    viewer = Viewer(any_managed=True)
    eligible = {"neg_table": viewer.eligible(torch._neg_view(_managed(real))),
                "conj_table": viewer.eligible(_managed(cplx).conj()), "table": viewer.eligible(_managed(real))}
    result(cases=out, eligible=eligible)


def body_torn(a):
    """A managed table rewritten by another thread (host-to-device copies in a loop) while a
    synchronous dcp.save writes it, three times to a folder and three to memory://: per save, zipfile.testzip of each data file (None:
    every record's CRC-32 matches its bytes) and the report's record (UVMCHUNK_REPORT) fields
    that say the table changed during the save."""
    import json
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    rows = a.size // 1024
    table = _managed(torch.zeros(rows, 256))
    fills = [torch.full((64, 256), float(i + 1)) for i in range(2)]
    stop = threading.Event()
    writes = [0]

    def writer():
        """Rewrites the table a slice of 64 rows (64 KiB) at a time, so some part of it changes
        throughout the save."""
        stream = torch.cuda.Stream()
        step = 64
        with torch.cuda.stream(stream):
            while not stop.is_set():
                k = writes[0] % (rows // step)
                table[k * step:(k + 1) * step].copy_(fills[(writes[0] // (rows // step)) % 2][:step])
                stream.synchronize()
                writes[0] += 1

    runs = []
    # a local folder (a file DCP writes with write(2)) and fsspec's memory:// (a store's stream,
    # written in pieces by uvmchunk._streams), three saves each
    for i, path in enumerate([os.path.join(a.dir, f"save{i}") for i in range(3)]
                             + [f"memory://torn/save{i}" for i in range(3)]):
        stop.clear()
        t = threading.Thread(target=writer)
        t.start()
        try:
            while writes[0] < 16 * (i + 1):
                pass  # the writer is running before the save starts
            dcp.save({"t": table, "small": torch.arange(10)}, checkpoint_id=path, planner=None)
        finally:
            stop.set()
            t.join()
        runs.append(dict(testzip=_testzip(path)))
    # the control: a table nobody writes during its save is not said to have changed
    dcp.save({"t": table}, checkpoint_id=os.path.join(a.dir, "still"))
    runs.append(dict(testzip=_testzip(os.path.join(a.dir, "still"))))
    records = []
    report = os.environ.get("UVMCHUNK_REPORT")
    if report and os.path.exists(report):
        with open(report) as f:
            records = [json.loads(line) for line in f if '"dcp.save"' in line]
    result(runs=runs, writes=writes[0], records=records)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("body")
    p.add_argument("--dir", required=True)
    p.add_argument("--mode", default="auto")
    p.add_argument("--size", type=int, default=32 << 20)
    a = p.parse_args()
    globals()["body_" + a.body](a)


if __name__ == "__main__":
    main()
