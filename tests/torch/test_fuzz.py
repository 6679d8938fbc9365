"""A differential fuzzer: Hypothesis generates state dicts, operations and stores; each example runs
in a long-lived stock worker and a long-lived library worker (fuzz_body.py, fed over a pipe) and
their outcomes must agree: each data file's bytes, .metadata as stock varies it, loaded values
bitwise, exception types, leftovers (files, incomplete multipart uploads, temporary files) and peak
host memory no more than twice stock's plus 64 MiB. tests/README.md ("torch_fuzz") says what the
strategies cover and leave out.

Budget: UVMC_FUZZ_SECONDS (default 180; 60 for the other PyTorch sets, where tools/test.sh sets
UVMC_TORCH_PYTHON), in rounds of ROUND examples, each round a Hypothesis run with its own seed
(UVMC_FUZZ_SEED + round; the seed is printed and drawn at random when unset). A divergence is
shrunk and printed as the spec of a minimal example, with both outcomes.

PENDING names divergences known and being fixed elsewhere: their generators and named examples are
off while they are in it (emptied as each fix merges)."""
import os
import pickle
import random
import select
import struct
import subprocess
import sys
import time

import pytest

from conftest import sim_env

try:
    import hypothesis
    from hypothesis import HealthCheck, settings, strategies as st
except ImportError as e:  # the venvs get it from tools/setup.sh; CI must not skip silently
    if os.environ.get("CI") == "true":
        raise
    pytest.skip(f"hypothesis is not installed ({e}); tools/setup.sh installs it", allow_module_level=True)

import s3_server

BODY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_body.py")
MIB = 1 << 20
# Divergences known but not generated here: their names turn off what exists of them (issue 38's
# items 1 and 3 have no generator yet: a second writer timed into a load, a small file system; they are
# tests/torch/test_s3_version.py and test_spill.py's no-room test). 38.6's example runs, but what it
# changed (views, lines, a page-locked block) is not among what a worker compares: test_calls.py.
PENDING: set[str] = set()
# UVMC_FUZZ_ENABLE=name,name: turns those on anyway (to see a fix hold, or a divergence found)
PENDING -= set(filter(None, os.environ.get("UVMC_FUZZ_ENABLE", "").split(",")))
# The library's settings: small thresholds and pieces, so that tensors of KiB take every path a
# table of GiB takes (split copies, pieces, lazily pinned buffers, direct reads, views)
LIB_SETTINGS = {"UVMCHUNK_DCP_VIEWS": "on", "UVMCHUNK_THRESHOLD": "4KiB", "UVMCHUNK_CHUNK_SIZE": "4KiB",
                "UVMCHUNK_PINNED_THRESHOLD": "16KiB", "UVMCHUNK_STATS": "off"}
ROUND = 25  # examples per Hypothesis run
EXAMPLE_TIMEOUT = 120  # seconds a worker may take for one example before it is killed and restarted


def budget_seconds():
    # issue 38: at most 4 minutes in CI, all sets together (140 s on the first, 50 s on 2.8 and 2.15)
    default = 50 if os.environ.get("UVMC_TORCH_PYTHON") else 140
    return float(os.environ.get("UVMC_FUZZ_SECONDS", default))


# ---- workers ------------------------------------------------------------------------------------

class Worker:
    """A fuzz_body.py process fed specs over its stdin; restarted when it dies or times out."""

    def __init__(self, name, with_lib, root, extra_env):
        self.name, self.with_lib, self.root, self.extra_env = name, with_lib, root, extra_env
        self.proc = None
        self.log = os.path.join(os.path.dirname(root), f"{name}.log")
        self.restarts = -1

    def start(self):
        env = sim_env(self.with_lib, LIB_SETTINGS if self.with_lib else None)
        if not self.with_lib:
            env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # stock: no autoload hook at all
        tmp = os.path.join(os.path.dirname(self.root), f"{self.name}-tmp")
        os.makedirs(tmp, exist_ok=True)
        os.makedirs(self.root, exist_ok=True)
        env.update(self.extra_env, UVMC_FUZZ_ROOT=self.root, TMPDIR=tmp)
        self.proc = subprocess.Popen([sys.executable, BODY], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=open(self.log, "ab"))
        self.restarts += 1
        if self._read(300) is None:
            raise RuntimeError(f"the {self.name} worker did not start: {self.tail()}")

    def tail(self):
        with open(self.log, "rb") as f:
            return f.read()[-3000:].decode(errors="replace")

    def _read(self, timeout):
        fd = self.proc.stdout.fileno()
        buf, need, deadline = b"", 8, time.monotonic() + timeout
        head = None
        while True:
            while len(buf) < need:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    return None
                chunk = os.read(fd, need - len(buf))
                if not chunk:
                    return None
                buf += chunk
            if head is None:
                head = struct.unpack("<Q", buf)[0]
                if head == 0:
                    return {}
                buf, need = b"", head
            else:
                return pickle.loads(buf)

    def send(self, spec):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        data = pickle.dumps(spec)
        try:
            self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass

    def receive(self):
        res = self._read(EXAMPLE_TIMEOUT)
        if res is None:
            died = self.proc.poll()
            self.stop()
            return {"worker_lost": "timeout" if died is None else f"exit {died}"}
        return res

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    """(stock worker, library worker, S3 stores available), moto's server started when both the
    server and a client are installed."""
    base = tmp_path_factory.mktemp("fuzz")
    env, stores, server = {}, [], None
    if not s3_server.missing(["moto", "flask", "s3fs", "boto3"]):
        server = s3_server.start(base / "moto.log")
        s3_server.wait_up(*server)
        url = server[1]
        env = {**s3_server.CREDENTIALS, "AWS_ENDPOINT_URL": url}
        for b in ("fz-stock", "fz-lib"):
            s3_server.bucket(url, b)
        stores = ["s3fs"] + ([] if s3_server.missing(["s3torchconnector"]) else ["connector"])
    elif os.environ.get("CI") == "true" and not os.environ.get("UVMC_TORCH_PYTHON"):
        pytest.fail("moto, flask, s3fs or boto3 missing: the S3 stores would not be fuzzed")
    pair = (Worker("stock", False, str(base / "fz-stock"), env), Worker("lib", True, str(base / "fz-lib"), env))
    try:
        yield pair + (stores,)
    finally:
        for w in pair:
            w.stop()
        if server:
            s3_server.stop(server[0], server[2])


# ---- strategies ---------------------------------------------------------------------------------

import torch  # noqa: E402  (after the skip: the dtypes this PyTorch has)

DTYPES = ["float32", "float16", "bfloat16", "int8", "uint16", "bool", "complex64"] + [
    d for d in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, d)]
WHERE = ["cpu", "cuda", "managed_cpu", "managed_gpu"]
KEYS = st.text("ab._", min_size=1, max_size=3)
VALUES = st.one_of(st.integers(-2**40, 2**40), st.floats(allow_nan=False), st.text(max_size=8), st.booleans(),
                   st.none(), st.lists(st.integers(0, 9), max_size=4), st.binary(max_size=8))


# a user's renaming planner (fuzz_body.renaming) beside DCP's default and the library's zero-copy ones
PLANNERS = ["default", "default", "zerocopy", "renaming"]


def forms():
    out = ["plain", "plain", "transposed", "strided"]
    if "neg_conj_views" not in PENDING:
        out += ["neg", "conj"]
    return st.sampled_from(out)


@st.composite
def shapes(draw):
    kind = draw(st.sampled_from(["small", "small", "zero_dim", "empty", "long"]))
    if kind == "zero_dim":
        return []
    if kind == "empty":
        return draw(st.lists(st.integers(0, 3), min_size=1, max_size=3).filter(lambda s: 0 in s))
    if kind == "long":
        return [draw(st.integers(1, 40000))]
    return draw(st.lists(st.integers(1, 9), min_size=1, max_size=3))


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


@st.composite
def paths(draw):
    head = draw(KEYS)
    tail = draw(st.lists(st.one_of(KEYS, st.integers(0, 2)), max_size=2))
    return [head] + tail


def conflicts(path, taken):
    """A path that is a prefix of one taken, or has one taken as its prefix (one would replace the
    other's container), or is taken."""
    return any(path[:len(t)] == t or t[:len(path)] == path for t in taken)


@st.composite
def state_specs(draw, stores):
    nbases = draw(st.integers(1, 4))
    bases = [{"where": draw(st.sampled_from(WHERE)), "dtype": draw(st.sampled_from(DTYPES)),
              "seed": draw(st.integers(0, 2**16)), "numel": 0} for _ in range(nbases)]
    entries, taken = [], []
    for _ in range(draw(st.integers(1, 6))):
        path = draw(paths())
        if conflicts(path, taken):
            continue
        taken.append(path)
        kind = draw(st.sampled_from(["tensor", "tensor", "tensor", "value", "same"]))
        if kind == "same" and not any(e["kind"] == "tensor" for e in entries):
            kind = "tensor"
        if kind == "value":
            entries.append({"path": path, "kind": "value", "value": draw(VALUES)})
        elif kind == "same":
            of = draw(st.sampled_from([i for i, e in enumerate(entries) if e["kind"] == "tensor"]))
            entries.append({"path": path, "kind": "same", "of": of})
        else:
            b = draw(st.integers(0, nbases - 1))
            shape = draw(shapes())
            form = draw(forms())
            if form == "transposed" and len(shape) != 2:
                form = "plain"
            offset = draw(st.sampled_from([0, 0, 1, 3, 64]))
            need = offset + numel(shape) * (2 if form == "strided" else 1)
            bases[b]["numel"] = max(bases[b]["numel"], need)
            entries.append({"path": path, "kind": "tensor", "base": b, "shape": shape, "form": form,
                            "offset": offset, "param": draw(st.booleans())})
    for b in bases:
        b["numel"] += draw(st.sampled_from([0, 0, 5]))
    store = draw(st.sampled_from(["local"] * 5 + ["file", "memory"] + stores))
    spec = {"bases": bases, "entries": entries, "store": store, "ops": draw(op_lists(store))}
    if "self_containing" not in PENDING and draw(st.integers(0, 19)) == 0:
        spec["self_containing"] = True
    return spec


@st.composite
def save_ops(draw, store):
    api = draw(st.sampled_from(["save", "save", "async"]))
    op = {"op": "save", "api": api, "planner": draw(st.sampled_from(PLANNERS))}
    if store == "local" and draw(st.booleans()):
        op["writer"] = {"thread_count": draw(st.integers(1, 3)),
                        "per_thread_copy_ahead": draw(st.sampled_from([0, 16, 10_000_000])),
                        "sync_files": draw(st.booleans()),
                        "single_file_per_rank": draw(st.booleans())}
    if api == "async":
        op["budget"] = draw(st.sampled_from([None, "0", "4KiB", "1GiB"]))
        stagers = [None, "default"] + ([] if "subclassed_stager" in PENDING else ["subclass"])
        op["stager"] = draw(st.sampled_from(stagers))
    return op


def load_ops():
    return st.fixed_dictionaries({"op": st.just("load"),
                                  "target": st.sampled_from(["same", "same", "retype", "cpu", "managed"]),
                                  "planner": st.sampled_from(PLANNERS)})


def damage_ops():
    """A data file harmed between a save and a load (fuzz_body.run_damage): the load must fail,
    or read what is there, as stock's does."""
    return st.fixed_dictionaries({"op": st.just("damage"), "how": st.sampled_from(["delete", "truncate", "flip"])})


@st.composite
def op_lists(draw, store):
    first = [draw(save_ops(store))]
    special = []
    if "two_threads" not in PENDING and store == "local":
        special.append({"op": "two_threads"})
    if "table_changed_during_save" not in PENDING and store == "local":
        special.append({"op": "changing"})
    if special and draw(st.integers(0, 9)) == 0:
        first = [draw(st.sampled_from(special))]
    rest = draw(st.lists(st.one_of(load_ops(), save_ops(store)), min_size=1, max_size=3))
    if draw(st.integers(0, 5)) == 0:
        # before the last op, and a load after it: what a damaged checkpoint loads as
        rest = rest[:-1] + [draw(damage_ops())] + rest[-1:] + [draw(load_ops())]
    return first + rest


# ---- comparison ---------------------------------------------------------------------------------

def _shapes(values):
    """fuzz_body.state_digest's answer without the tensors' byte digests (dtype and shape kept)."""
    if isinstance(values, tuple) and len(values) == 3 and isinstance(values[0], str) and values[0].startswith("torch."):
        return values[:2]
    if isinstance(values, dict):
        return {k: _shapes(v) for k, v in values.items()}
    if isinstance(values, (list, tuple)):
        return [_shapes(v) for v in values]
    return values


def differences(stock, lib):
    """What the library's outcome does differently from stock's (empty: the same)."""
    out = []
    if "worker_lost" in lib or "worker_lost" in stock:
        if lib.get("worker_lost") != stock.get("worker_lost"):
            out.append(f"worker lost: stock {stock.get('worker_lost')}, library {lib.get('worker_lost')}")
        return out
    for side, res in (("stock", stock), ("library", lib)):
        if "worker_error" in res:  # the harness itself failed: a bug of this test
            out.append(f"{side} worker error {res['worker_error']}: {res['trace']}")
    if out:
        return out
    if stock.get("build_error") or lib.get("build_error"):
        if stock.get("build_error") != lib.get("build_error"):
            out.append(f"building the state dict: stock {stock.get('build_error')}, library {lib.get('build_error')}")
        return out
    # the checkpoint was written while a table changed: its values are a race's (until a later save;
    # fuzz_body.run_changing puts the table's bytes back once its writer stops)
    racy = False
    for i, (s, l) in enumerate(zip(stock["ops"], lib["ops"])):
        if s["op"] == "changing":
            racy = True
        elif s["op"] not in ("load", "damage") and "error" not in s:
            racy = False
        for key in ("error", "files", "values", "uploads_left", "side_error", "side_files", "consistent", "damaged"):
            sv, lv = s.get(key), l.get(key)
            if racy and key == "values" and sv and lv:
                # which pattern each item caught differs from run to run on stock itself: only
                # what was loaded (names, dtypes, shapes) is compared
                sv, lv = _shapes(sv), _shapes(lv)
            if racy and key == "files" and isinstance(sv, dict) and isinstance(lv, dict):
                # the racy checkpoint still there (a later save failed): sizes and CRC agreement only
                sv, lv = ({k: v if k == ".metadata" else (v[0], v[2]) for k, v in d.items()} for d in (sv, lv))
            if sv != lv:
                why = f"op {i} ({s['op']}) {key}: stock {s.get(key)!r}, library {l.get(key)!r}"
                if "trace" in l:
                    why += f"\nlibrary's trace: {l['trace']}"
                if "trace" in s:
                    why += f"\nstock's trace: {s['trace']}"
                out.append(why)
    if lib["tmp_left"] > stock["tmp_left"]:
        out.append(f"temporary files left: stock {stock['tmp_left']}, library {lib['tmp_left']} {lib['tmp_names']}")
    if lib["peak_bytes"] > 2 * stock["peak_bytes"] + 64 * MIB:
        out.append(f"peak host memory: stock +{stock['peak_bytes'] / MIB:.1f} MiB, library "
                   f"+{lib['peak_bytes'] / MIB:.1f} MiB")
    if lib["kept_bytes"] > max(stock["kept_bytes"], 0) + 16 * MIB:
        out.append(f"host memory held after the example: stock +{stock['kept_bytes'] / MIB:.1f} MiB, library "
                   f"+{lib['kept_bytes'] / MIB:.1f} MiB")
    return out


_counter = [0]
_seconds = {}  # seconds each worker spent on examples


_undecided = [0]


def on_simulator_only(stock):
    """Whether stock's outcome was made by the simulated runtime, which runs no kernels (its
    cudaErrorNotSupported, tests/sim/README.md), not as it would be on a GPU: stock failed on a
    refused launch, or one was refused anywhere during an op. A refusal DCP never saw counts too:
    FileSystemWriter's extra writer threads let an exception end the thread and the save goes on
    without that file's items (torch/distributed/checkpoint/filesystem.py, _write_data), so which
    thread met the launch, the caller's or another, decided stock's outcome (CI's float8 example)."""
    return any(op.get("kernels_refused") or ("AcceleratorError" in str(op.get("error"))
                                             and "operation not supported" in str(op.get("trace")))
               for op in stock.get("ops", ()))


MEMORY_LINES = ("peak host memory:", "host memory held after the example:")
MEMORY_RERUNS = 3  # reruns of an example whose only differences are memory, all of which must show one


def _run_both(workers, spec):
    stock_w, lib_w, _ = workers
    _counter[0] += 1
    spec = dict(spec, name=f"e{_counter[0]}")
    # both workers run the example at once (one core each): each measures only its own process
    stock_w.send(spec)
    lib_w.send(spec)
    stock, lib = stock_w.receive(), lib_w.receive()
    for side, res in (("stock", stock), ("library", lib)):
        _seconds[side] = _seconds.get(side, 0.0) + res.get("seconds", 0.0)
    return stock, lib


def check(workers, spec):
    stock_w, lib_w, _ = workers
    stock, lib = _run_both(workers, spec)
    diff = differences(stock, lib)
    seen = []
    while diff and all(d.startswith(MEMORY_LINES) for d in diff) and len(seen) < MEMORY_RERUNS:
        # host memory is measured in long-lived workers, where a module's first import or a new
        # thread's malloc arena lands on whichever example first takes that path (CI saw +18.7 MiB
        # kept once, not again on the same example; and +21.7 MiB twice in a row after a
        # self-containing state dict's 60 MiB of RecursionError frames, then not again): a memory
        # difference counts when it recurs on every rerun
        seen.append(diff)
        stock, lib = _run_both(workers, spec)
        diff = differences(stock, lib)
    if on_simulator_only(stock):
        # stock needed a device kernel (a neg / conj view's .cpu() or copy_ into a CUDA target) that the
        # simulator cannot run: its outcome on hardware is unknown here, so the example decides nothing
        # (tests/torch/test_records.py holds those cases against a CPU reference instead)
        _undecided[0] += 1
        return None
    if seen and diff:
        diff += [f"(the same kind on {len(seen)} earlier runs: " + "; ".join(d[0] for d in seen) + ")"]
    if "worker_lost" in lib:
        diff.append(f"library worker log: {lib_w.tail()}")
    assert not diff, "stock and the library differ on\n" + repr({k: v for k, v in spec.items() if k != "name"}) + \
        "\n" + "\n".join(diff)
    return stock, lib


# ---- the tests ----------------------------------------------------------------------------------

# Named examples whose stock outcome the simulator makes (on_simulator_only): check() must call
# them undecided, not divergent.
ON_SIMULATOR_ONLY = {"float8_strided_zerocopy"}

# Divergences found, kept as named examples (spec, the PENDING name that disables it or None).
KNOWN = {
    # 38.2: a negative view of a float32 table, saved and loaded (into managed tables: tests/torch/
    # test_records.py, against a CPU reference: stock's sign kernel does not run on the simulator)
    "neg_view": ({"bases": [{"where": "cpu", "dtype": "float32", "seed": 1, "numel": 64}],
                  "entries": [{"path": ["w"], "kind": "tensor", "base": 0, "shape": [64], "form": "neg",
                               "offset": 0, "param": False}],
                  "store": "local",
                  "ops": [{"op": "save", "api": "save", "planner": "default"},
                          {"op": "load", "target": "cpu", "planner": "default"}]}, "neg_conj_views"),
    # 38.2: a conjugate view of complex64
    "conj_view": ({"bases": [{"where": "cpu", "dtype": "complex64", "seed": 2, "numel": 32}],
                   "entries": [{"path": ["c"], "kind": "tensor", "base": 0, "shape": [32], "form": "conj",
                                "offset": 0, "param": False}],
                   "store": "local",
                   "ops": [{"op": "save", "api": "save", "planner": "default"},
                           {"op": "load", "target": "cpu", "planner": "default"}]}, "neg_conj_views"),
    # 38.4: a DefaultStager subclass whose _stage takes no extra keywords
    "strict_stager": ({"bases": [{"where": "managed_cpu", "dtype": "float32", "seed": 3, "numel": 4096}],
                       "entries": [{"path": ["t"], "kind": "tensor", "base": 0, "shape": [4096], "form": "plain",
                                    "offset": 0, "param": False}],
                       "store": "local",
                       "ops": [{"op": "save", "api": "async", "planner": "default", "budget": "0",
                                "stager": "subclass"},
                               {"op": "load", "target": "same", "planner": "default"}]}, "subclassed_stager"),
    # 38.5: a state dict that contains itself (stock: RecursionError at once)
    "self_containing": ({"bases": [{"where": "managed_cpu", "dtype": "float32", "seed": 4, "numel": 16}],
                         "entries": [{"path": ["t"], "kind": "tensor", "base": 0, "shape": [16], "form": "plain",
                                      "offset": 0, "param": False}],
                         "store": "local", "self_containing": True,
                         "ops": [{"op": "save", "api": "save", "planner": "default"}]}, "self_containing"),
    # 38.6: another thread's dcp.save while an async_save stages
    "two_threads": ({"bases": [{"where": "managed_cpu", "dtype": "float32", "seed": 5, "numel": 1 << 22}],
                     "entries": [{"path": ["t"], "kind": "tensor", "base": 0, "shape": [1 << 22], "form": "plain",
                                  "offset": 0, "param": False}],
                     "store": "local",
                     "ops": [{"op": "two_threads"}, {"op": "load", "target": "same", "planner": "default"}]},
                    "two_threads"),
    # 38.7: a table rewritten by another thread during dcp.save: every record's CRC must match
    "changing_table": ({"bases": [{"where": "managed_cpu", "dtype": "uint16", "seed": 6, "numel": 1 << 20}],
                        "entries": [{"path": ["t"], "kind": "tensor", "base": 0, "shape": [1 << 20], "form": "plain",
                                     "offset": 0, "param": False}],
                        "store": "local", "ops": [{"op": "changing"}]}, "table_changed_during_save"),
    # found by the search (CI, seed 2045008375): two names tied to one managed element saved while it
    # changed caught different patterns, stock and library in a different order; a load after such
    # a save compares only names, dtypes and shapes (differences())
    "tied_names_changing": ({"bases": [{"where": "managed_gpu", "dtype": "float32", "seed": 0, "numel": 1}],
                             "entries": [{"path": [n], "kind": "tensor", "base": 0, "shape": [1], "form": "plain",
                                          "offset": 0, "param": False} for n in ("_", ".a")],
                             "store": "local",
                             "ops": [{"op": "changing"}, {"op": "load", "target": "same", "planner": "default"}]},
                            "table_changed_during_save"),
    # found by the search (CI, seed 836958186): after a save that raced a changing table, the
    # table kept whichever pattern its writer wrote last, so the next save's bytes differed;
    # fuzz_body.run_changing now puts the table's bytes back once the writer stops
    "save_after_changing": ({"bases": [{"where": "cuda", "dtype": "float8_e5m2", "seed": 25366, "numel": 4}],
                             "entries": [{"path": ["b", 2, "_"], "kind": "tensor", "base": 0, "shape": [4],
                                          "form": "plain", "offset": 0, "param": False}],
                             "store": "local",
                             "ops": [{"op": "changing"},
                                     {"op": "save", "api": "async", "planner": "default",
                                      "writer": {"thread_count": 2, "per_thread_copy_ahead": 10000000,
                                                 "sync_files": True, "single_file_per_rank": True},
                                      "budget": "1GiB", "stager": "subclass"},
                                     {"op": "load", "target": "same", "planner": "default"}]},
                            "table_changed_during_save"),
    # found by the search (CI, seed 1369020448): the library's worker kept +36.7 MiB after it, stock's
    # +18.0, once; not again on the same example (a first use in a long-lived worker: check() reruns
    # an example whose only difference is memory)
    "self_containing_async": ({"bases": [{"where": "cpu", "dtype": "int8", "seed": 8, "numel": 2}],
                               "entries": [{"path": ["a_.", 2], "kind": "tensor", "base": 0, "shape": [],
                                            "form": "neg", "offset": 1, "param": True}],
                               "store": "local", "self_containing": True,
                               "ops": [{"op": "save", "api": "async", "planner": "default", "budget": None,
                                        "stager": None},
                                       {"op": "save", "api": "async", "planner": "default",
                                        "writer": {"thread_count": 3, "per_thread_copy_ahead": 16, "sync_files": True,
                                                   "single_file_per_rank": True},
                                        "budget": None, "stager": "default"}]}, "self_containing"),
    # found by the search (CI, 2.11): a strided float8 view of a managed table, saved with three
    # writer threads; its .cpu() launches a copy kernel the simulator refuses, and whether the
    # caller's thread (the save raises) or another (DCP goes on without that file's items, and the
    # load raises KeyError) met it was a race, on stock as on the library: undecided here
    "float8_strided_zerocopy": ({"bases": [{"where": "managed_gpu", "dtype": "bool", "seed": 5969, "numel": 0},
                                           {"where": "managed_cpu", "dtype": "float8_e5m2", "seed": 56067, "numel": 717},
                                           {"where": "cpu", "dtype": "int8", "seed": 0, "numel": 9764}],
                                 "entries": [{"path": ["ab_", ".ba", "a"], "kind": "tensor", "base": 2, "shape": [5],
                                              "form": "plain", "offset": 0, "param": False},
                                             {"path": ["a"], "kind": "tensor", "base": 2, "shape": [9764],
                                              "form": "plain", "offset": 0, "param": True},
                                             {"path": ["_b"], "kind": "tensor", "base": 1, "shape": [133],
                                              "form": "plain", "offset": 0, "param": True},
                                             {"path": ["aaa", "_a"], "kind": "tensor", "base": 1, "shape": [358],
                                              "form": "strided", "offset": 1, "param": True},
                                             {"path": ["_.a"], "kind": "value", "value": [3, 2, 2, 1]}],
                                 "store": "local",
                                 "ops": [{"op": "save", "api": "save", "planner": "zerocopy",
                                          "writer": {"thread_count": 3, "per_thread_copy_ahead": 0,
                                                     "sync_files": False, "single_file_per_rank": False}},
                                         {"op": "load", "target": "retype", "planner": "default"},
                                         {"op": "load", "target": "same", "planner": "zerocopy"}]}, None),
}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_known(workers, name):
    """Each divergence found so far, as a named example: stock's outcome and the library's agree."""
    spec, pending = KNOWN[name]
    if pending in PENDING:
        pytest.skip(f"{name}: {pending} is PENDING (being fixed on another branch)")
    decided = check(workers, spec) is not None
    # an example whose stock outcome the simulator made is kept for the harness's sake: it must
    # come out undecided, not as a divergence (on a GPU it decides)
    assert decided == (name not in ON_SIMULATOR_ONLY), \
        f"{name}: " + ("stock's outcome was the simulator's" if not decided else "decided, on the simulator?")


def test_search(workers):
    """Random examples for UVMC_FUZZ_SECONDS, in rounds of ROUND, each round seeded and printed."""
    seed = int(os.environ.get("UVMC_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
    budget = budget_seconds()
    stores = workers[2]
    print(f"torch_fuzz: seed {seed} (UVMC_FUZZ_SEED={seed} reruns it), budget {budget:.0f} s, "
          f"stores local, file, memory{''.join(', ' + s for s in stores)}; PENDING {sorted(PENDING)}")
    t0, ran, rounds = time.monotonic(), [0], 0
    counts, ops = {}, {}

    @settings(max_examples=ROUND, deadline=None, database=None, derandomize=False, print_blob=True,
              suppress_health_check=list(HealthCheck), phases=[hypothesis.Phase.generate, hypothesis.Phase.shrink])
    @hypothesis.given(state_specs(stores))
    def one(spec):
        if time.monotonic() - t0 > budget:
            return  # over budget: the round's remaining examples do nothing
        hypothesis.assume(check(workers, spec) is not None)
        ran[0] += 1
        counts[spec["store"]] = counts.get(spec["store"], 0) + 1
        for op in spec["ops"]:
            kind = op["op"] + ("/" + op["planner"] if op.get("planner", "default") != "default" else "") + \
                ("/" + op["how"] if "how" in op else "")
            ops[kind] = ops.get(kind, 0) + 1

    while time.monotonic() - t0 < budget:
        hypothesis.seed(seed + rounds)(one)()
        rounds += 1
    print(f"torch_fuzz: {ran[0]} examples in {rounds} rounds, {time.monotonic() - t0:.0f} s "
          f"(per store {counts}; ops {dict(sorted(ops.items()))}; worker seconds {_seconds}; {_undecided[0]} left undecided: stock needed a "
          f"kernel the simulator cannot run); workers restarted: stock {workers[0].restarts}, library {workers[1].restarts}")
