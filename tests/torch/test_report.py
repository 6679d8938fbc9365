"""The per-checkpoint report (python/uvmchunk/_report.py, _memory.py): under torchrun every rank
says one `uvmchunk: rank N dcp.save|dcp.load|dcp.async_save` line and appends the same record to
UVMCHUNK_REPORT as one JSON line, and its host memory figures agree with the job's own
measurement (VmHWM reset just before the call, as integration/checkpoint_job.py does) within
512 KiB under torchrun, 64 KiB in one process, where its bytes are also those of the files
written and read, once each; log_level = warn silences the line, not the file; the library's exit stats line counts
the views. The notice for a Python without the package's hook comes at the first managed
allocation, on the rank that made it, and names the job's interpreter (a virtual environment's,
not its base) and the install command for this checkout."""
import json
import os
import re
import sys

import pytest
from conftest import LIB_ENV, TOP, _need, pydev_path, run_body

MIB = 1 << 20
TABLE = 16 * MIB  # tables of 16 and 24 MiB per rank, and a 1 MiB ordinary CUDA tensor
BODY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report_body.py")
AUTO = {"UVMCHUNK_DCP_VIEWS": "on"}
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
CALLS = ("dcp.save", "dcp.load", "dcp.async_save")
MISSING = "has PyTorch but not the uvmchunk package's hook"
FORGOTTEN = "libuvmchunk.so is not loaded in this process; run the job as `"


def run(tmp_path, lib_env, launcher=None, extra_env=None):
    return run_body(None, True, str(TABLE), str(tmp_path / "ckpt"), script=BODY, launcher=launcher,
                    lib_env=lib_env, extra_env=extra_env, timeout=600)


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def near(a, b):
    return abs(a - b) <= 512 * 1024  # two processes: each one's reading of /proc around its own call


def test_line_and_record_on_every_rank(tmp_path):
    report = tmp_path / "report.jsonl"
    r = run(tmp_path, dict(AUTO, UVMCHUNK_REPORT=str(report)), launcher=TORCHRUN)
    assert len(r.results) == 2 and all(res["equal"] for res in r.results), r.describe()
    recs = records(report)
    assert len(recs) == 6, r.describe()
    for res in r.results:
        rank = res["rank"]
        for call in CALLS:
            mine = [x for x in recs if x["rank"] == rank and x["call"] == call]
            assert len(mine) == 1 and mine[0]["pid"] == res["pid"], (call, recs)
            rec, own = mine[0], res["own"][call]
            lines = re.findall(rf"^uvmchunk: rank {rank} {call} .*$", r.err, re.M)
            assert len(lines) == 1, r.describe()
            print(lines[0])
            print(f"  job's own: {own['seconds']:.2f} s, host +{own['peak'] / 1024:.0f} KiB at peak, "
                  f"{own['after'] / 1024:+.0f} KiB after")
            assert near(rec["host_peak_added_bytes"], own["peak"]), (rec, own)
            assert near(rec["host_after_added_bytes"], own["after"]), (rec, own)
            assert f"host +{_mib(rec['host_peak_added_bytes'])}" in lines[0] or "host +" in lines[0]
            if call == "dcp.async_save":  # staged: every CUDA tensor copied, none viewed
                assert rec["view_tensors"] == 0 and rec["copied_bytes"] == res["cuda_bytes"], rec
            else:  # both tables through views; the ordinary tensor copied (on save: by the rank that writes it)
                assert rec["view_tensors"] == 2 and rec["view_bytes"] == res["managed_bytes"], rec
                assert rec["copied_bytes"] <= res["cuda_bytes"] - res["managed_bytes"], rec
                assert f"{_mib(rec['view_bytes'])} MiB" in lines[0] and "2 managed tables' pages" in lines[0], lines[0]
        assert "stock:" in [ln for ln in r.err.splitlines() if f"rank {rank} dcp.save" in ln][0]
    assert MISSING not in r.err and FORGOTTEN not in r.err, r.describe()


def _mib(n):
    return f"{n / MIB:.3g}"


KIB = 1 << 10
ONE = 64 * MIB  # one process: tables of 64 and 96 MiB and a 1 MiB ordinary CUDA tensor
CLOSE = 64 * KIB  # a report's figure vs the job's own reading of /proc around the same call
FIGURES = (("host_peak_added_bytes", "peak"), ("host_after_added_bytes", "after"),
           ("host_anon_after_added_bytes", "anon_after"))


def _one_process(tmp, stock):
    """The body in one process (tables of 64 and 96 MiB) under the library with the automatic
    views, or under `uvmchunk-run --stock` (the launcher puts the library before the simulator's
    preload, as it would before anything of the job's): its records by call, run, result."""
    report = tmp / "report.jsonl"
    env = dict(LIB_ENV, UVMCHUNK_DCP_VIEWS="on", UVMCHUNK_REPORT=str(report))
    if stock:
        r = run_body(None, False, str(ONE), str(tmp / "ckpt"), "all", "--extra", script=BODY, timeout=600,
                     launcher=[sys.executable, "-m", "uvmchunk.launcher", "--stock", "--", sys.executable],
                     extra_env=dict(env, UVMCHUNK_LIB=_need("UVMC_LIB")))
    else:
        r = run_body(None, True, str(ONE), str(tmp / "ckpt"), "all", "--extra", script=BODY, timeout=600, lib_env=env)
    res = r.result
    assert res["equal"] and res["managed"], r.describe()
    by_call = {}
    for rec in records(report):
        by_call.setdefault(rec["call"], []).append(rec)
    return by_call, r, res


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return _one_process(tmp_path_factory.mktemp("library"), stock=False)


@pytest.fixture(scope="module")
def stock(tmp_path_factory):
    return _one_process(tmp_path_factory.mktemp("stock"), stock=True)


def _lines(err, call):
    return re.findall(rf"^uvmchunk: rank 0 {call} .*$", err, re.M)


def _agree(rec, own, line):
    """The record's host figures are the job's own within CLOSE; the line words them as sizes
    (memory that went down: "released N after"), never a negative one. An async_save's readings
    are not of one moment: DCP's thread executor drops the staged copy on its own thread as the
    upload completes (torch/distributed/checkpoint/_async_thread_executor.py, a done callback), so
    the job's "after" may read lower than the report's (at most that copy, 161 MiB here; +64 MiB
    seen) and its peak within 1 MiB."""
    for field, mine in FIGURES:  # a call whose memory only went down adds 0 at its peak
        theirs = max(own[mine], 0) if mine == "peak" else own[mine]
        if rec["call"] != "dcp.async_save":
            assert abs(rec[field] - theirs) <= CLOSE, (field, rec, own)
        elif mine == "peak":
            assert abs(rec[field] - theirs) <= MIB, (field, rec, own)
        else:
            assert -CLOSE <= rec[field] - theirs <= rec["bytes"] + CLOSE, (field, rec, own)
    figures = re.sub(r"; (to|from) \S+( \(\S+\))?$", "", line.split(" in ", 1)[-1])  # the store's path is no figure
    assert not re.search(r"-\s*\d", figures), line
    assert ("released" in line) == (rec["host_after_added_bytes"] < 0), line


def test_figures_agree_with_the_job_s_own(library):
    """One process, the library's automatic views: each call's record against the job's own
    reading of /proc/self/status around the call (RSS at peak and after, anonymous after) and the
    bytes of the checkpoint's files; a load counts each table once."""
    by_call, r, res = library
    for call in CALLS:  # the first of each (--extra's calls follow)
        rec, own, ln = by_call[call][0], res["own"][call], _lines(r.err, call)[0]
        print(ln)
        print(f"  job's own: host +{own['peak'] / KIB:.0f} KiB at peak, {own['after'] / KIB:+.0f} KiB after "
              f"({own['anon_after'] / KIB:+.0f} KiB anonymous), files {own['files'] / MIB:.2f} MiB")
        print("  report - job's own: " + ", ".join(f"{m} {rec[f] - own[m]:+d} bytes" for f, m in FIGURES)
              + f", bytes - files {rec['bytes'] - own['files']:+d}")
        _agree(rec, own, ln)
        assert abs(rec["bytes"] - own["files"]) <= CLOSE, (rec, own)  # the bytes the files hold, once
        folder = "/ckpt/" + ("b" if call == "dcp.async_save" else "a")  # a local folder: no client named
        assert rec["store"].endswith(folder) and "store_client" not in rec and ln.endswith(
            f"; {'from' if call == 'dcp.load' else 'to'} {rec['store']}"), (rec, ln)
    load = by_call["dcp.load"][0]
    assert load["view_bytes"] == res["managed_bytes"] and load["bytes"] == res["cuda_bytes"], load
    assert load["bytes"] == by_call["dcp.save"][0]["bytes"], by_call


def test_mixin_planners_count_once(library):
    """ZeroCopySavePlanner / ZeroCopyLoadPlanner (the mixins over PyTorch's planners, whose
    resolve the automatic path also wraps): each table once, as a view, and the files' bytes."""
    by_call, r, res = library
    saves, loads = by_call["dcp.save"], by_call["dcp.load"]
    assert len(saves) == 4 and len(loads) == 2, by_call  # the three calls, the mixins', CPU only, failed
    for rec, own in ((saves[1], res["own"]["mixin.save"]), (loads[1], res["own"]["mixin.load"])):
        assert rec["view_bytes"] == res["managed_bytes"] and rec["bytes"] == res["cuda_bytes"], rec
        assert abs(rec["bytes"] - own["files"]) <= CLOSE, (rec, own)


def test_cpu_only_and_failed_calls_say_what_happened(library):
    """A save of CPU tensors only says that the library did nothing, with the host figures (8 MiB
    released meanwhile: "released 8 MiB after", never a negative size); a
    save that raises says `failed (Type)`, and the job gets DCP's exception, not one of ours."""
    by_call, r, res = library
    lines = _lines(r.err, "dcp.save")
    cpu, failed = by_call["dcp.save"][2], by_call["dcp.save"][3]
    print(lines[2], lines[3], sep="\n")
    assert cpu["bytes"] == 0 and "no managed tensors in this checkpoint; the library did nothing; host +" in lines[2]
    assert cpu["host_after_added_bytes"] < -7 * MIB and "released 8" in lines[2], (cpu, lines[2])
    _agree(cpu, res["own"]["cpu.save"], lines[2])
    raised = res["own"]["failed.save"]["raised"]
    assert raised and failed["failed"] == raised and "bytes" not in failed, (failed, res["own"])
    assert re.search(rf"dcp\.save failed \({raised}\) after \d+\.\d\d s; host \+", lines[3]), lines[3]
    assert "no report of this checkpoint" not in r.err, r.describe()


def test_stock_is_measured_only(library, stock):
    """uvmchunk-run --stock: the library passes everything through (no split copy, no view), the
    simulator's preload kept after it; each call still says its line ("stock DCP, measured only")
    and record ("stock": true), true to the job's own reading; stock's save and load add at least
    a table's size of host memory, the library's a small part of one."""
    by_call, r, res = stock
    assert os.path.basename(res["preload"].split(":")[0]) == "libuvmchunk.so" and "libcuda.so.1" in res["preload"], res
    assert len(r.stats) == 1 and r.stats[0][0] == 0, r.describe()  # no copy split: passed through
    mine, _, _ = library
    for call in CALLS:
        rec, own, ln = by_call[call][0], res["own"][call], _lines(r.err, call)[0]
        print(ln)
        assert rec["stock"] and ln.startswith(f"uvmchunk: rank 0 {call} (stock DCP, measured only) "), ln
        assert rec["view_tensors"] == 0 and rec["bytes"] == res["cuda_bytes"], rec
        _agree(rec, own, ln)
        if call != "dcp.async_save":  # both stage an async save's copies in memory
            assert rec["host_peak_added_bytes"] >= ONE, rec
            assert mine[call][0]["host_peak_added_bytes"] < ONE // 4, mine[call][0]
        if rec.get("copied_pinned_bytes", 0) >= ONE:  # stock keeps what its host cache holds
            assert rec["host_after_added_bytes"] >= ONE, rec
        assert "stock" not in mine[call][0], mine[call][0]
    # the mixins' planners take no view under stock either; the CPU-only and failed saves say so
    saves, loads = by_call["dcp.save"], by_call["dcp.load"]
    for rec in saves[1:2] + loads[1:]:
        assert rec["stock"] and rec["view_tensors"] == 0 and "direct_read_bytes" not in rec, rec
        assert abs(rec["bytes"] - res["own"]["mixin.save"]["files"]) <= CLOSE, rec
    lines = _lines(r.err, "dcp.save")
    assert "(stock DCP, measured only) in " in lines[2] and "no CUDA tensors in this checkpoint" in lines[2], lines
    assert "(stock DCP, measured only) failed (" in lines[3], lines


def test_warn_silences_the_line_and_stats_count_views(tmp_path):
    report = tmp_path / "report.jsonl"
    r = run(tmp_path, dict(AUTO, UVMCHUNK_LOG_LEVEL="warn", UVMCHUNK_REPORT=str(report)))
    assert "uvmchunk: rank" not in r.err, r.describe()
    assert len(records(report)) == 3, r.describe()  # the file is written at any log level
    res = r.result
    m = re.search(r"zero-copy views: (\d+) tensors? saved \(([^)]*)\), (\d+) loaded \(([^)]*)\)", r.err)
    assert m and m.group(1) == "2" and m.group(3) == "2", r.describe()
    assert m.group(2) == f"{res['managed_bytes'] // MIB} MiB", r.describe()


def test_missing_package_is_said_at_the_first_managed_allocation(tmp_path):
    """A Python with PyTorch but without the package's hook (its entry point missing) under the
    library: one notice per affected rank, at its first managed allocation (no split copy, no lazily
    served request: the threshold above every copy), naming sys.executable as the job ran it (the
    virtual environment's interpreter) and `-m pip install <checkout>`. Under torchrun with managed
    tables on rank 1 only, rank 1 alone says it; rank 0, which allocates no managed memory, does not."""
    r = run_body(None, True, str(TABLE), str(tmp_path / "ckpt"), "1", script=BODY, launcher=TORCHRUN,
                 lib_env=dict(AUTO, UVMCHUNK_THRESHOLD="1GiB", UVMCHUNK_STATS="on"),
                 extra_env={"PYTHONPATH": pydev_path(hook=False)}, timeout=600)
    by_rank = {res["rank"]: res for res in r.results}
    assert sorted(by_rank) == [0, 1] and by_rank[1]["managed"] and not by_rank[0]["managed"], r.describe()
    assert all(res["equal"] for res in r.results), r.describe()
    assert len(r.stats) == 2 and all(s[0] == 0 for s in r.stats), r.describe()  # no split copy said it
    notices = [ln for ln in r.err.splitlines() if MISSING in ln]
    assert len(notices) == 1, r.describe()
    print(notices[0])
    one = by_rank[1]
    assert f"this Python ({one['executable']}, pid {one['pid']}, rank 1)" in notices[0], r.describe()
    assert f"`{one['executable']} -m pip install {TOP}`" in notices[0], r.describe()
    assert one["executable"] == sys.executable, r.describe()  # the venv's interpreter, not its base
    assert "uvmchunk: rank" not in r.err, r.describe()  # no package hook: no report either
    # enabled = off passes everything through: nothing is missing then
    off = run_body(None, True, str(TABLE), str(tmp_path / "off"), script=BODY, lib_env=dict(AUTO, UVMCHUNK_ENABLED="off"),
                   extra_env={"PYTHONPATH": pydev_path(hook=False)}, timeout=600)
    assert off.result["managed"] and MISSING not in off.err, off.describe()


def test_missing_package_is_said_after_a_managed_allocation_before_torch(tmp_path):
    """A C extension that allocates managed memory before `import torch` (here: ctypes, in the same
    Python without the package's hook): the library cannot tell then whether PyTorch will come, so
    it asks again at the next managed allocation; once PyTorch is there, the notice comes, once."""
    early = tmp_path / "early.py"
    early.write_text(
        "import ctypes, runpy, sys\n"
        "p = ctypes.c_void_p()\n"
        "assert ctypes.CDLL(None).cudaMallocManaged(ctypes.byref(p), 1 << 20, 1) == 0\n"
        f"sys.argv = [{BODY!r}] + sys.argv[1:]\n"
        f"runpy.run_path({BODY!r}, run_name='__main__')\n")
    r = run_body(None, True, str(TABLE), str(tmp_path / "ckpt"), script=str(early), lib_env=dict(AUTO),
                 extra_env={"PYTHONPATH": pydev_path(hook=False)}, timeout=600)
    assert r.result["managed"] and r.result["equal"], r.describe()
    assert len([ln for ln in r.err.splitlines() if MISSING in ln]) == 1, r.describe()


OVERLAP = """
import os, sys, threading
sys.path.insert(0, {tests!r})
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
from torch_body import cuda_from, pattern, result
met = threading.Barrier(2)
class Met(DefaultSavePlanner):  # both saves open before either resolves an item
    def create_local_plan(self):
        plan = super().create_local_plan()
        met.wait(timeout=120)
        return plan
tables = {{"a": cuda_from(pattern(16 << 20, 1), managed=True), "b": cuda_from(pattern(24 << 20, 2), managed=True)}}
def save(k):
    dcp.save({{k: tables[k]}}, checkpoint_id=os.path.join({ckpt!r}, k), planner=Met(), no_dist=True)
threads = [threading.Thread(target=save, args=(k,)) for k in tables]
[t.start() for t in threads]
[t.join() for t in threads]
result(done=True)
"""


def test_overlapping_saves_each_count_their_own(tmp_path):
    """Two dcp.save calls of one process that overlap (two threads, met after planning): each
    record counts the views of its own table (16 and 24 MiB), not all of them the call opened last."""
    script = tmp_path / "overlap.py"
    script.write_text(OVERLAP.format(tests=os.path.dirname(BODY), ckpt=str(tmp_path / "ckpt")))
    report = tmp_path / "report.jsonl"
    r = run_body(None, True, script=str(script), lib_env=dict(AUTO, UVMCHUNK_REPORT=str(report)), timeout=600)
    assert r.result["done"], r.describe()
    saves = sorted(rec["view_bytes"] for rec in records(report) if rec["call"] == "dcp.save")
    print(f"view bytes of the two records: {[b // MIB for b in saves]} MiB")
    assert saves == [16 * MIB, 24 * MIB], r.describe()


def test_forgotten_launcher_is_said_at_the_first_save(tmp_path):
    """The package installed (its hook on PYTHONPATH) but the library not preloaded (only the
    simulator is): the first dcp.save of managed tensors says, on the rank that copies them, how
    many bytes of managed memory it copies and the command that runs the job under uvmchunk-run;
    rank 0, whose tensors are ordinary CUDA memory, says nothing; later calls say nothing either."""
    r = run_body(None, False, str(TABLE), str(tmp_path / "ckpt"), "1", script=BODY, launcher=TORCHRUN, timeout=600)
    by_rank = {res["rank"]: res for res in r.results}
    assert sorted(by_rank) == [0, 1] and all(res["equal"] for res in r.results), r.describe()
    lines = [ln for ln in r.err.splitlines() if FORGOTTEN in ln]
    assert len(lines) == 1, r.describe()
    print(lines[0])
    managed = by_rank[1]["managed_bytes"]
    assert lines[0].startswith(f"uvmchunk: rank 1 dcp.save copies {managed // MIB} MiB of managed memory (2 tensors) "
                               "through host memory"), r.describe()
    assert re.search(r"run the job as `(\S*/)?uvmchunk-run -- torchrun \.\.\.`", lines[0]), r.describe()
    # the same line says how to measure stock's figures (issue 40.5): the launcher's --stock
    assert re.search(r"measure stock DCP's figures with `(\S*/)?uvmchunk-run --stock -- torchrun \.\.\.`", lines[0]), \
        r.describe()


LATER = """
import os, sys
sys.path.insert(0, {tests!r})
import torch
import torch.distributed.checkpoint as dcp
from torch_body import cuda_from, pattern, result
dcp.save({{"step": torch.tensor(7)}}, checkpoint_id=os.path.join({ckpt!r}, "cpu"), no_dist=True)  # decides nothing
tables = {{"t": cuda_from(pattern(8 << 20, 1), managed=True)}}
r = dcp.async_save(tables, checkpoint_id=os.path.join({ckpt!r}, "tables"))
getattr(r, "upload_completion", r).result()
dcp.save(tables, checkpoint_id=os.path.join({ckpt!r}, "again"), no_dist=True)
result(done=True)
"""


def test_forgotten_launcher_is_said_at_the_first_call_with_managed_tensors(tmp_path):
    """A CPU-only dcp.save first (a step counter), then dcp.async_save of an 8 MiB managed table,
    then a dcp.save of it, without the library: the CPU-only save decides nothing; the async_save
    says the line, once."""
    script = tmp_path / "later.py"
    script.write_text(LATER.format(tests=os.path.dirname(BODY), ckpt=str(tmp_path / "ckpt")))
    r = run_body(None, False, script=str(script), timeout=600)
    lines = [ln for ln in r.err.splitlines() if FORGOTTEN in ln]
    assert r.result["done"] and len(lines) == 1, r.describe()
    print(lines[0])
    assert lines[0].startswith("uvmchunk: rank 0 dcp.async_save copies 8 MiB of managed memory (1 tensor)"), r.describe()
    # one process: the commands run this interpreter and script, with and without --stock
    ran = re.escape(f"{sys.executable} {script}")
    assert re.search(rf"run the job as `(\S*/)?uvmchunk-run -- {ran}` for zero-copy views", lines[0]), r.describe()
    assert re.search(rf"measure stock DCP's figures with `(\S*/)?uvmchunk-run --stock -- {ran}`", lines[0]), r.describe()


PLANNER = """
import os, sys
sys.path.insert(0, {tests!r})
import torch.distributed.checkpoint as dcp
from torch_body import cuda_from, pattern, result
from uvmchunk.dcp import ZeroCopySavePlanner, views_taken
table = cuda_from(pattern(8 << 20, 1), managed=True)  # FBGEMM's advice: viewed
strided = cuda_from(pattern(4 << 20, 2), managed=True).view(1024, 4096).t()  # not contiguous: copied
dcp.save({{"t": table}}, checkpoint_id=os.path.join({ckpt!r}, "views"), planner=ZeroCopySavePlanner(), no_dist=True)
dcp.save({{"t": table, "s": strided}}, checkpoint_id=os.path.join({ckpt!r}, "both"), planner=ZeroCopySavePlanner(),
         no_dist=True)
result(done=True, views=views_taken()["save"])
"""


def test_forgotten_launcher_counts_only_what_the_planner_copies(tmp_path):
    """ZeroCopySavePlanner passed explicitly, without the library: its views need no library, so a
    save whose managed table it views says nothing and decides nothing; the next save, with a
    4 MiB strided managed tensor it cannot view beside the table, says the 4 MiB copied through
    host memory, not the table's 8 MiB (python/uvmchunk/_no_launcher.py)."""
    script = tmp_path / "planner.py"
    script.write_text(PLANNER.format(tests=os.path.dirname(BODY), ckpt=str(tmp_path / "ckpt")))
    r = run_body(None, False, script=str(script), timeout=600)
    lines = [ln for ln in r.err.splitlines() if FORGOTTEN in ln]
    assert r.result["done"] and r.result["views"] == 2 and len(lines) == 1, r.describe()
    print(lines[0])
    assert lines[0].startswith("uvmchunk: rank 0 dcp.save copies 4 MiB of managed memory (1 tensor) through host "
                               "memory"), r.describe()


MIXED = """
import os, sys
sys.path.insert(0, {tests!r})
import torch
import torch.distributed.checkpoint as dcp
from torch_body import cuda_from, pattern, result
ckpt = {ckpt!r}
table = cuda_from(pattern(8 << 20, 1), managed=True)
dcp.save({{"t": table, "w": torch.ones(1 << 20), "step": 7, "name": "run-1"}}, checkpoint_id=os.path.join(ckpt, "mixed"),
         no_dist=True)
half = cuda_from((torch.arange(3 << 19) % 2048).half().view(torch.uint8), managed=True).view(torch.float16)
dcp.save({{"e": half}}, checkpoint_id=os.path.join(ckpt, "half"), no_dist=True)
full = cuda_from(torch.zeros(6 << 20, dtype=torch.uint8), managed=True).view(torch.float32)
dcp.load({{"e": full}}, checkpoint_id=os.path.join(ckpt, "half"), no_dist=True)
from uvmchunk.dcp import ZeroCopyLoadPlanner
class Committing(ZeroCopyLoadPlanner):  # views, but PyTorch's own read_data (uvmchunk._reads._why_not)
    def commit_tensor(self, read_item, tensor):
        super().commit_tensor(read_item, tensor)
again = cuda_from(torch.zeros(8 << 20, dtype=torch.uint8), managed=True)
dcp.load({{"t": again}}, checkpoint_id=os.path.join(ckpt, "mixed"), planner=Committing(), no_dist=True)
result(equal=torch.equal(full.cpu(), half.cpu().float()) and torch.equal(again.cpu(), table.cpu()))
"""


def test_headline_counts_cuda_tensors_and_a_converted_load_is_copied(tmp_path):
    """A save of an 8 MiB managed table beside 4 MiB of CPU weights, a step and a name: the line's
    headline is the CUDA tensors' 8 MiB and says so (the files hold 12 MiB and more). A load of a
    float16 item (3 MiB in the file) into a 6 MiB float32 managed table: its view takes PyTorch's
    path (torch.load into a CPU tensor, then copy_ converting into the pages), so its 6 MiB are
    counted as copied, not as read into the table's pages; so are the 8 MiB a planner overriding
    commit_tensor loads (PyTorch's whole read_data)."""
    script = tmp_path / "mixed.py"
    script.write_text(MIXED.format(tests=os.path.dirname(BODY), ckpt=str(tmp_path / "ckpt")))
    report = tmp_path / "report.jsonl"
    r = run_body(None, True, script=str(script), lib_env=dict(AUTO, UVMCHUNK_REPORT=str(report)), timeout=600)
    assert r.result["equal"], r.describe()
    mixed, _, load, whole = records(report)
    lines = _lines(r.err, "dcp.save") + _lines(r.err, "dcp.load")
    print(*lines, sep="\n")
    assert mixed["bytes"] == 8 * MIB, mixed  # the files hold the 4 MiB of CPU weights and more besides
    assert lines[0].startswith("uvmchunk: rank 0 dcp.save 8 MiB of CUDA tensors in "), lines
    assert load["view_tensors"] == 0 and load["copied_bytes"] == load["bytes"] == 6 * MIB, load
    assert "no managed table's pages viewed, 6 MiB copied" in lines[2], lines
    assert whole["view_tensors"] == 0 and whole["copied_bytes"] == whole["bytes"] == 8 * MIB, whole


RESIDENCY = os.path.join(os.path.dirname(BODY), "residency_body.py")
FRESH = 256 * MIB  # the table loaded into a fresh allocation (the 512 MiB, halved for time)


@pytest.mark.parametrize("side", ("library", "stock"))
def test_pages_made_resident_are_said_apart(tmp_path, side):
    """dcp.load of a 256 MiB table into a freshly allocated managed table makes each of its pages
    resident for the first time: the record says those bytes (tensor_pages_made_resident_bytes),
    to the byte what the job reads independently (its pages' present bits in
    /proc/self/pagemap, around the same call), and apart from them the extra host memory the call
    used: a small part of the table under the library (reads straight into the pages), at least
    the table under --stock (DCP's CPU copy beside the pages). The line says both; the save before
    it, from pages already resident, makes none resident."""
    report = tmp_path / "report.jsonl"
    env = dict(LIB_ENV, UVMCHUNK_DCP_VIEWS="on", UVMCHUNK_REPORT=str(report))
    args = (str(FRESH), str(tmp_path / "ckpt"))
    if side == "stock":
        r = run_body(None, False, *args, script=RESIDENCY, timeout=600,
                     launcher=[sys.executable, "-m", "uvmchunk.launcher", "--stock", "--", sys.executable],
                     extra_env=dict(env, UVMCHUNK_LIB=_need("UVMC_LIB")))
    else:
        r = run_body(None, True, *args, script=RESIDENCY, timeout=600, lib_env=env)
    res = r.result
    assert res["equal"] and res["before"] == 0, r.describe()  # a fresh table: no page resident yet
    save, load = records(report)
    ln = _lines(r.err, "dcp.load")[0]
    print(ln)
    print(f"  job's own (pagemap's present pages of the table): {res['before']} -> {res['after']} bytes")
    made = load["tensor_pages_made_resident_bytes"]
    assert made == res["after"] - res["before"] == FRESH, (load, res)
    assert load["host_peak_extra_bytes"] == max(load["host_peak_added_bytes"] - made, 0), load
    assert load["host_after_extra_bytes"] == load["host_after_added_bytes"] - made, load
    if side == "stock":
        assert load["stock"] and load["host_peak_extra_bytes"] >= FRESH, load
    else:
        assert load["host_peak_extra_bytes"] < FRESH // 8, load
    from uvmchunk._report import size_text
    assert (f"({size_text(made)} of it the managed tables' own pages made resident; "
            f"+{size_text(load['host_peak_extra_bytes'])} extra at peak)") in ln, ln
    assert save["tensor_pages_made_resident_bytes"] == 0, save
    assert "made resident" not in _lines(r.err, "dcp.save")[0], r.err
