"""Worker of tests/torch/test_fuzz.py: one long-lived process, stock or under the library, that runs
the examples the test sends it and answers each with a digest of what happened. No op launches a
kernel (the simulator cannot run one): CUDA tensors are filled by host-to-device copies.

Protocol: the test writes length-prefixed pickles (8-byte little-endian length) of example specs to
stdin; the worker answers each with one on the file descriptor that was stdout at start (fd 1 is
then pointed at stderr, so nothing PyTorch or a client prints can corrupt the channel).

A spec (plain data, made by test_fuzz.py's strategies):
  name     a folder / prefix name unique per example (the same in both workers)
  store    local | file | memory | s3fs | connector
  bases    [{where, dtype, numel, seed}]: allocations; where is cpu, cuda, managed_cpu (FBGEMM's
           advice: preferred location CPU) or managed_gpu (advice unset)
  entries  [{path, kind: tensor|value|same, ...}]: where each item sits in the (nested) state dict;
           a tensor is {base, offset, shape, form: plain|transposed|strided|neg|conj, param}; a
           value is {value}; same is {of: index of an earlier entry} (one object, two names)
  ops      [{op: save|load|two_threads|changing|damage, ...}] run in order; see run_save, run_load,
           run_two_threads, run_changing, run_damage (planner: default, zerocopy or renaming)
The digest: per op its error (type names, CheckpointException's per-rank failures included), the
checkpoint's files (bytes hashed; .metadata unpickled and compared as stock varies it), loaded
values (bytes hashed), leftovers and the peak resident memory above the start.
"""
import ctypes
import gc
import hashlib
import io
import os
import pickle
import struct
import sys
import threading
import time
import traceback
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_body import _clear_hwm, _status_kib, sim_driver, unset_cpu_preference  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
from uvmc_managed import managed_empty  # noqa: E402

warnings.filterwarnings("ignore")
import torch.distributed.checkpoint as dcp  # noqa: E402
from torch.distributed.checkpoint import FileSystemWriter  # noqa: E402
# a BaseException, not an Exception (torch/distributed/checkpoint/api.py)
from torch.distributed.checkpoint.api import CheckpointException  # noqa: E402

DTYPES = {name: getattr(torch, name) for name in (
    "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8", "uint16", "bool", "complex64",
    "int64", "float64")
    if hasattr(torch, name)}
REGION = "us-east-1"
ROOT = os.environ["UVMC_FUZZ_ROOT"]  # this worker's folder (local stores) and bucket name (S3)
ENDPOINT = os.environ.get("AWS_ENDPOINT_URL")
_DRV = None  # the simulated driver (torch_body.sim_driver), set in main


def lib_loaded():
    with open("/proc/self/maps") as f:
        return any(line.rstrip().endswith("/libuvmchunk.so") for line in f)


LIBRARY = lib_loaded()


# ---- state dicts -------------------------------------------------------------------------------

def base_bytes(b):
    """The bytes a base holds: seeded random bytes (every bit pattern, NaNs included: compared
    bitwise), 0/1 for bool."""
    dtype = DTYPES[b["dtype"]]
    size = torch.empty((), dtype=dtype).element_size()
    g = torch.Generator().manual_seed(b["seed"])
    raw = torch.randint(0, 256, (b["numel"] * size,), dtype=torch.uint8, generator=g)
    if dtype == torch.bool:
        raw &= 1
    return raw


def alloc(where, nbytes):
    """A uint8 tensor of nbytes on `where` (contents unset)."""
    if where == "cpu":
        return torch.empty(nbytes, dtype=torch.uint8)
    if where == "cuda":
        return torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    t = managed_empty((max(nbytes, 1),), torch.uint8)[:nbytes]
    if where == "managed_gpu" and nbytes:
        unset_cpu_preference(t)
    return t


def make_base(b):
    raw = base_bytes(b)
    t = alloc(b["where"], raw.numel())
    t.copy_(raw)  # host-to-device (or host) copy: no kernel
    if t.is_cuda:
        torch.cuda.synchronize()
    return t.view(DTYPES[b["dtype"]])


def make_tensor(e, bases):
    base = bases[e["base"]]
    n = 1
    for s in e["shape"]:
        n *= s
    form, off, shape = e["form"], e["offset"], tuple(e["shape"])
    if form == "strided":
        t = base[off:off + 2 * n:2].view(-1)[:n] if n else base[off:off]
        t = t.as_strided(shape, _contig_strides(shape, 2), t.storage_offset()) if n else t.reshape(shape)
    elif form == "transposed":
        t = base[off:off + n].view(tuple(reversed(shape))).t() if len(shape) == 2 else base[off:off + n].view(shape)
    else:
        t = base[off:off + n].view(shape)
    if form == "neg" and not t.dtype.is_complex and t.dtype != torch.bool and t.dtype.is_floating_point:
        t = torch._neg_view(t)
    if form == "conj" and t.dtype.is_complex:
        t = t.conj()
    if e.get("param"):
        t = torch.nn.Parameter(t, requires_grad=t.dtype.is_floating_point or t.dtype.is_complex)
    return t


def _contig_strides(shape, step):
    strides, acc = [], step
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def place(root, path, obj):
    """Puts obj at path in the nested containers of root (dicts; an int key makes a list)."""
    node = root
    for key, nxt in zip(path[:-1], path[1:]):
        if isinstance(node, list):
            while len(node) <= key:
                node.append(None)
            if node[key] is None:
                node[key] = [] if isinstance(nxt, int) else {}
            node = node[key]
        else:
            node = node.setdefault(key, [] if isinstance(nxt, int) else {})
    if isinstance(node, list):
        while len(node) <= path[-1]:
            node.append(None)
        node[path[-1]] = obj
    else:
        node[path[-1]] = obj


def build(spec, target=None):
    """The state dict of spec; target: None (the source), or how to make load targets: same (a
    fresh zeroed tensor like each source tensor, same place), retype (another dtype of the same
    kind), cpu, managed (every tensor on the CPU, or managed with the CPU preference)."""
    bases = [make_base(b) for b in spec["bases"]]
    sd, objs = {}, []
    for e in spec["entries"]:
        if e["kind"] == "tensor":
            obj = make_tensor(e, bases)
            if target is not None:
                obj = target_like(obj, spec["bases"][e["base"]]["where"], target)
        elif e["kind"] == "value":
            obj = e["value"] if target is None else ZERO_OF.get(type(e["value"]), None)
        else:
            obj = objs[e["of"]]
        objs.append(obj)
        place(sd, e["path"], obj)
    if spec.get("self_containing"):
        sd["me"] = sd
    return sd


ZERO_OF = {int: 0, float: 0.0, str: "", bool: False, bytes: b""}
RETYPE = {torch.float32: torch.bfloat16, torch.bfloat16: torch.float32, torch.float16: torch.float32,
          torch.int8: torch.int64, torch.complex64: torch.complex64, torch.bool: torch.bool,
          torch.uint16: torch.int64}


def target_like(t, where, how):
    dtype = RETYPE.get(t.dtype, t.dtype) if how == "retype" else t.dtype
    where = {"cpu": "cpu", "managed": "managed_cpu"}.get(how, where)
    nbytes = t.numel() * torch.empty((), dtype=dtype).element_size()
    out = alloc(where, nbytes)
    out.copy_(torch.zeros(nbytes, dtype=torch.uint8))
    if out.is_cuda:
        torch.cuda.synchronize()
    out = out.view(dtype).view(tuple(t.shape))
    if isinstance(t, torch.nn.Parameter):
        out = torch.nn.Parameter(out, requires_grad=out.dtype.is_floating_point or out.dtype.is_complex)
    return out


# ---- stores ------------------------------------------------------------------------------------

def location(spec):
    """checkpoint_id of the example, its root-free name for the digest."""
    store, name = spec["store"], spec["name"]
    if store == "local":
        return os.path.join(ROOT, name)
    if store == "file":
        return f"file://{ROOT}/{name}"
    if store == "memory":
        return f"memory://{os.path.basename(ROOT)}/{name}"
    return f"s3://{os.path.basename(ROOT)}/{name}"


def _connector_fs(reader=None):
    from s3torchconnector import S3ClientConfig
    from s3torchconnector._s3client import S3Client
    from s3torchconnector.dcp.s3_file_system import S3FileSystem
    client = S3Client(REGION, endpoint=ENDPOINT, s3client_config=S3ClientConfig(force_path_style=True))
    return S3FileSystem(REGION, s3_client=client,
                        reader_constructor=reader._reader_constructor if reader is not None else None)


def storage(spec, writer_opts, write):
    """Keywords naming the checkpoint for dcp.save / async_save / load."""
    cid = location(spec)
    if spec["store"] == "connector":
        from s3torchconnector.dcp import S3StorageReader, S3StorageWriter
        if write:
            w = S3StorageWriter(REGION, cid, **({"thread_count": writer_opts["thread_count"]} if writer_opts else {}))
            w.fs = _connector_fs()
            return {"storage_writer": w}
        r = S3StorageReader(REGION, cid)
        r.fs = _connector_fs(r)
        return {"storage_reader": r}
    if write and writer_opts and spec["store"] == "local":
        return {"storage_writer": FileSystemWriter(cid, **writer_opts)}
    return {"checkpoint_id": cid}


def fsspec_fs(spec):
    store = spec["store"]
    if store == "local":
        return None
    import fsspec
    if store in ("s3fs", "connector"):
        import s3fs
        return s3fs.S3FileSystem(client_kwargs={"endpoint_url": ENDPOINT}, skip_instance_cache=True)
    return fsspec.filesystem(store)


def store_path(spec):
    """The example's location as its fsspec file system names it: absolute for file:// and
    memory://, bucket/prefix for S3."""
    path = location(spec).split("://", 1)[1].strip("/")
    return ("/" + path) if spec["store"] in ("file", "memory") else path


def list_files(spec):
    """{relative path: bytes} of everything under the example's location."""
    cid = location(spec)
    fs = fsspec_fs(spec)
    if fs is None:
        out = {}
        for d, _, files in os.walk(cid):
            for f in files:
                p = os.path.join(d, f)
                with open(p, "rb") as fh:
                    out[os.path.relpath(p, cid)] = fh.read()
        return out
    path = store_path(spec)
    out = {}
    try:
        fs.invalidate_cache()
        names = fs.find(path)
    except (FileNotFoundError, OSError):
        return out
    for p in names:
        out[p.lstrip("/")[len(path.lstrip("/")):].lstrip("/")] = fs.cat_file(p)
    return out


def remove(spec):
    cid = location(spec)
    fs = fsspec_fs(spec)
    if fs is None:
        import shutil
        shutil.rmtree(cid, ignore_errors=True)
        return
    try:
        fs.rm(store_path(spec), recursive=True)
    except (FileNotFoundError, OSError):
        pass


def uploads_left(spec):
    """Incomplete multipart uploads under the example's prefix (S3 only; -1 elsewhere)."""
    if spec["store"] not in ("s3fs", "connector"):
        return -1
    import boto3
    s3 = boto3.client("s3", endpoint_url=ENDPOINT, region_name=REGION)
    r = s3.list_multipart_uploads(Bucket=os.path.basename(ROOT), Prefix=spec["name"] + "/")
    for u in r.get("Uploads", []):
        s3.abort_multipart_upload(Bucket=os.path.basename(ROOT), Key=u["Key"], UploadId=u["UploadId"])
    return len(r.get("Uploads", []))


# ---- digests -----------------------------------------------------------------------------------

def error_of(e):
    """Type names of an exception: CheckpointException's per-rank failures (WrappedException's
    exception) inside brackets."""
    name = type(e).__name__
    failures = getattr(e, "failures", None)
    if isinstance(failures, dict):
        # WrappedException is a NamedTuple (exc, formatted_exc): torch/distributed/checkpoint/api.py
        inner = sorted(type(f[0] if isinstance(f, tuple) else f).__name__ for f in failures.values())
        name += "[" + ",".join(inner) + "]"
    return name


def tensor_digest(t):
    if hasattr(t, "local_shards"):
        return [tensor_digest(s.tensor) for s in t.local_shards()]
    t = t.detach()
    c = t.cpu() if t.is_cuda else t
    c = c.resolve_conj().resolve_neg().contiguous()
    return (str(c.dtype), tuple(c.shape), hashlib.sha256(c.reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()[:16])


def state_digest(obj, seen=None):
    seen = seen if seen is not None else set()
    if id(obj) in seen:
        return "<cycle>"
    if isinstance(obj, torch.Tensor):
        return tensor_digest(obj)
    if isinstance(obj, dict):
        seen = seen | {id(obj)}
        return {str(k): state_digest(v, seen) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        seen = seen | {id(obj)}
        return [state_digest(v, seen) for v in obj]
    return repr(obj)


def metadata_digest(raw, spec):
    """The .metadata as stock varies it: storage_meta's save_id is a fresh uuid per save, its
    checkpoint_id names this worker's root."""
    try:
        md = pickle.loads(raw)
    except Exception as e:  # noqa: BLE001  (an unreadable record is an outcome too)
        return f"unpicklable: {type(e).__name__}"
    sm = getattr(md, "storage_meta", None)
    if sm is not None:
        md.storage_meta = None
        extra = (str(sm.checkpoint_id).replace(location(spec), "<id>"), getattr(sm, "modules", None))
    else:
        extra = None
    return hashlib.sha256(repr((canonical(md), extra)).encode()).hexdigest()[:16]


def canonical(obj):
    """obj with every dict's items sorted (FileSystemWriter(thread_count > 1) fills storage_data in
    the order its threads finish: stock's own .metadata varies so) and dataclasses as their fields."""
    import dataclasses
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj).__name__, tuple((f.name, canonical(getattr(obj, f.name))) for f in dataclasses.fields(obj)))
    if isinstance(obj, dict):
        return ("dict", tuple(sorted((repr(canonical(k)), canonical(v)) for k, v in obj.items())))
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(canonical(v) for v in obj))
    return repr(obj)


def files_digest(spec):
    out = {}
    for name, raw in sorted(list_files(spec).items()):
        if name == ".metadata":
            out[name] = ("metadata", metadata_digest(raw, spec))
        else:
            out[name] = (len(raw), hashlib.sha256(raw).hexdigest()[:16], records_consistent(raw))
    return out


def records_consistent(raw):
    """Whether every zip record found in a data file has a CRC-32 that matches its bytes
    (zipfile.testzip over each torch.save archive the file holds; DCP appends one per item)."""
    import zipfile
    bad = 0
    start = 0
    while True:
        i = raw.find(b"PK\x03\x04", start)
        if i < 0:
            break
        end = raw.find(b"PK\x05\x06", i)
        if end < 0:
            break
        end += 22 + int.from_bytes(raw[end + 20:end + 22], "little")
        try:
            with zipfile.ZipFile(io.BytesIO(raw[i:end])) as z:
                bad += z.testzip() is not None
        except Exception:  # noqa: BLE001  (not a whole archive: stop looking)
            return "unreadable"
        start = end
    return bad == 0


# ---- operations --------------------------------------------------------------------------------

def set_budget(budget):
    """The async spill budget of this call (the library's async_memory_budget, read once per
    process by uvmchunk._config.configuration: changed in its parsed copy)."""
    if not LIBRARY:
        return
    from uvmchunk import _config
    cfg = _config.configuration()
    if budget is None:
        cfg.pop("async_memory_budget", None)
    else:
        cfg["async_memory_budget"] = budget


def zero_copy(kind):
    from uvmchunk.dcp import ZeroCopyLoadPlanner, ZeroCopySavePlanner
    return ZeroCopySavePlanner() if kind == "save" else ZeroCopyLoadPlanner()


def _renamed(state_dict):
    return {"r_" + str(k): v for k, v in state_dict.items()}


def renaming(kind):
    """A user's planner that names every top-level key anew ("r_" + key) before DCP flattens the
    state dict, as the RenamePlanner examples in SavePlanner's and LoadPlanner's docstrings do
    (torch/distributed/checkpoint/planner.py). Loading with it reads the renamed names; tensors load
    in place, other values into the renamed copy (the target's own stay as they were, on stock too)."""
    from torch.distributed.checkpoint import DefaultLoadPlanner, DefaultSavePlanner

    class RenamingSave(DefaultSavePlanner):
        def set_up_planner(self, state_dict, *args, **kwargs):
            super().set_up_planner(_renamed(state_dict), *args, **kwargs)

    class RenamingLoad(DefaultLoadPlanner):
        def set_up_planner(self, state_dict, *args, **kwargs):
            super().set_up_planner(_renamed(state_dict), *args, **kwargs)

    return RenamingSave() if kind == "save" else RenamingLoad()


def planner_for(op, kind):
    """The planner an op names: default (None: DCP's own), zerocopy or renaming."""
    name = op.get("planner")
    if name == "zerocopy":
        return zero_copy(kind)
    if name == "renaming":
        return renaming(kind)
    return None


def stager_for(kind):
    from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
    opts = StagingOptions(use_pinned_memory=False, use_shared_memory=False, use_async_staging=False,
                          use_non_blocking_copy=False)
    if kind == "default":
        return DefaultStager(opts)

    class Strict(DefaultStager):
        """A user's stager whose _stage takes the state dict and nothing else (PyTorch's docs
        invite subclassing)."""

        def _stage(self, state_dict):  # noqa: D401
            return super()._stage(state_dict)

    return Strict(opts)


def run_save(spec, op, sd):
    kw = storage(spec, op.get("writer"), True)
    planner = planner_for(op, "save")
    if op["api"] == "save":
        dcp.save(sd, planner=planner, **kw)
        return
    set_budget(op.get("budget"))
    stager = stager_for(op["stager"]) if op.get("stager") else None
    try:
        resp = dcp.async_save(sd, planner=planner, **({"async_stager": stager} if stager else {}), **kw)
        fut = getattr(resp, "upload_completion", resp)
        fut.result(timeout=120)
    finally:
        if stager is not None:
            stager.close()
        set_budget(None)


def run_two_threads(spec, op, sd):
    """An async_save (given only checkpoint_id) staging on this thread while another thread runs
    an ordinary dcp.save of the same state to a second checkpoint."""
    other = dict(spec, name=spec["name"] + "-t2")
    errors = []

    def side():
        try:
            dcp.save(sd, **storage(other, None, True))
        except (Exception, CheckpointException) as e:  # noqa: BLE001
            errors.append(error_of(e))

    th = threading.Thread(target=side)
    th.start()
    resp = dcp.async_save(sd, **storage(spec, None, True))
    getattr(resp, "upload_completion", resp).result(timeout=120)
    th.join()
    try:
        return {"side_error": errors, "side_files": files_digest(other)}
    finally:
        remove(other)


def run_changing(spec, op, sd):
    """A dcp.save while another thread rewrites the first CUDA tensor (host-to-device copies of
    alternating patterns): records must stay internally consistent (their CRC matches)."""
    tensors = [t for t in _tensors(sd) if t.is_cuda and t.is_contiguous() and t.numel()
               and not t.is_neg() and not t.is_conj()]  # a dtype view of those raises
    stop = threading.Event()

    def writer():
        t = tensors[0]
        raw = t.detach().reshape(-1).view(torch.uint8)
        pats = [torch.full((raw.numel(),), v, dtype=torch.uint8) for v in (0x11, 0xEE)]
        i = 0
        while not stop.is_set():
            raw.copy_(pats[i & 1])
            i += 1

    # the table's bytes before, put back once the writer stops: which pattern it wrote last is a
    # race, and the example's later operations must start from the same state on both sides
    before = tensors[0].detach().reshape(-1).view(torch.uint8).cpu() if tensors else None
    th = threading.Thread(target=writer) if tensors else None
    if th:
        th.start()
    try:
        dcp.save(sd, **storage(spec, None, True))
    finally:
        stop.set()
        if th:
            th.join()
            tensors[0].detach().reshape(-1).view(torch.uint8).copy_(before)
            torch.cuda.synchronize()
    # the bytes differ from run to run (a race): only whether each record is consistent counts
    return {"consistent": {k: v[2] for k, v in files_digest(spec).items() if k != ".metadata"}}


def _tensors(obj, seen=None):
    seen = seen if seen is not None else set()
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tensors(v, seen)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tensors(v, seen)]
    return []


def run_load(spec, op):
    target = build(spec, op["target"])
    planner = planner_for(op, "load")
    dcp.load(target, planner=planner, **storage(spec, None, False))
    if any(t.is_cuda for t in _tensors(target)):
        torch.cuda.synchronize()
    return state_digest(target)


def run_damage(spec, op):
    """Harms the checkpoint's largest data file (ties: the first name) between a save and a load,
    as a store or a person can: delete (the object gone), truncate (to half its length), flip
    (16 bytes in its middle inverted: a record whose bytes no longer match its CRC-32)."""
    files = {k: v for k, v in list_files(spec).items() if k != ".metadata"}
    if not files:
        return {"damaged": None}
    name = max(sorted(files), key=lambda k: len(files[k]))
    raw = files[name]
    if op["how"] == "truncate":
        new = raw[:len(raw) // 2]
    elif op["how"] == "flip":
        mid = len(raw) // 2
        new = raw[:mid] + bytes(b ^ 0xFF for b in raw[mid:mid + 16]) + raw[mid + 16:]
    else:
        new = None
    cid, fs = location(spec), fsspec_fs(spec)
    if fs is None:
        path = os.path.join(cid, name)
        if new is None:
            os.remove(path)
        else:
            with open(path, "wb") as f:
                f.write(new)
    else:
        path = store_path(spec) + "/" + name
        if new is None:
            fs.rm(path)
        else:
            fs.pipe_file(path, new)
    return {"damaged": name}


def kernels_refused():
    """Kernel launches the simulated runtime refused in this process so far (0 on a GPU)."""
    return _DRV.uvmsim_stat(b"kernels_refused") if _DRV is not None else 0


def run_example(spec):
    remove(spec)
    tmp = os.environ.get("TMPDIR", "/tmp")
    tmp_before = set(os.listdir(tmp))
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    _clear_hwm()
    rss0 = _status_kib("VmRSS")
    outcome = []
    sd = None
    try:
        sd = build(spec)
    except Exception as e:  # noqa: BLE001  (a state dict PyTorch itself refuses: same on both)
        return {"build_error": error_of(e)}
    for op in spec["ops"]:
        res = {"op": op["op"]}
        refused = kernels_refused()
        try:
            if op["op"] == "save":
                run_save(spec, op, sd)
            elif op["op"] == "two_threads":
                res.update(run_two_threads(spec, op, sd))
            elif op["op"] == "changing":
                res.update(run_changing(spec, op, sd))
            elif op["op"] == "damage":
                res.update(run_damage(spec, op))
            else:
                res["values"] = run_load(spec, op)
        except (Exception, CheckpointException) as e:  # noqa: BLE001  (its type is the outcome compared)
            res["error"] = error_of(e)
            res["trace"] = traceback.format_exc()[-1500:]
        if op["op"] in ("save", "two_threads"):
            res["files"] = files_digest(spec)
        if op["op"] == "changing":
            res["files"] = sorted(files_digest(spec))
        res["uploads_left"] = uploads_left(spec)
        # a launch refused anywhere during the op, a writer thread's whose exception DCP never sees
        # included (FileSystemWriter's extra threads: torch/distributed/checkpoint/filesystem.py)
        res["kernels_refused"] = kernels_refused() - refused
        outcome.append(res)
    del sd
    gc.collect()
    peak = (_status_kib("VmHWM") - rss0) * 1024
    torch._C._host_emptyCache()  # what PyTorch's host cache keeps is stock's too: released on both sides
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    kept = (_status_kib("VmRSS") - rss0) * 1024
    leftovers = sorted(set(os.listdir(tmp)) - tmp_before)
    remove(spec)
    return {"ops": outcome, "peak_bytes": peak, "kept_bytes": kept, "tmp_left": len(leftovers), "tmp_names": leftovers[:5]}


def main():
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into the answers
    global _DRV
    torch.cuda.init()
    _DRV = sim_driver()
    if _DRV is not None:
        _DRV.uvmsim_stat.restype = ctypes.c_ulonglong
        _DRV.uvmsim_stat.argtypes = [ctypes.c_char_p]
    managed_empty((1,), torch.uint8)  # the allocator loaded before the first example
    inp = sys.stdin.buffer
    out.write(struct.pack("<Q", 0))  # ready
    out.flush()
    while True:
        head = inp.read(8)
        if len(head) < 8:
            return
        spec = pickle.loads(inp.read(struct.unpack("<Q", head)[0]))
        t0 = time.monotonic()
        try:
            res = run_example(spec)
        except BaseException as e:  # noqa: BLE001  (the worker answers; the test decides)
            res = {"worker_error": error_of(e), "trace": traceback.format_exc()[-3000:]}
        res["seconds"] = time.monotonic() - t0
        data = pickle.dumps(res)
        out.write(struct.pack("<Q", len(data)) + data)
        out.flush()


if __name__ == "__main__":
    main()
