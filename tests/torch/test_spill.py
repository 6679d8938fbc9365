"""dcp.async_save's spill (python/uvmchunk/_spill.py): with the library and the package, managed
tensors above async_memory_budget are staged in a file-backed mapping of an unlinked file in the
spill folder instead of anonymous memory. Bodies in spill_body.py: a small managed table (8 MiB,
within the budget), a large one and a 4 MiB ordinary CUDA tensor, the upload held back while the
body looks at the spill folder.

- point in time: both tables rewritten right after async_save returns; the checkpoint loads
  bitwise equal to the values at the call (a spill skipped shows no spilled bytes, a lazy one loads
  the rewritten bytes); peak extra RssAnon within budget + 16 MiB (stock: at least the table);
- every stager: DefaultStager (2.11+), the FileSystemWriter as stager, pinned stagers;
- below the budget, or async_spill = off: nothing spilled;
- the default budget under a fake cgroup limit (v1, v2): a quarter of the room left under it, the
  limit named in the report, the spill's page cache dropped as it is written and read;
- failures: a spill folder on tmpfs refused (next candidate used), one without room stages in
  memory (or refuses the call with async_spill = required), an upload failing with ENOSPC after a
  spill fails as stock's does, kill -9 during the upload: nothing left in the spill folder."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import run_body, sim_env

MIB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
BODY = os.path.join(HERE, "spill_body.py")
BUDGET = 16 * MIB
BLOCK = 64 * MIB  # uvmchunk._spill_file.BLOCK
LIB = {"UVMCHUNK_DCP_VIEWS": "on", "UVMCHUNK_ASYNC_MEMORY_BUDGET": "16MiB", "UVMCHUNK_LOG_LEVEL": "info"}


def disk_dir(prefix):
    """A fresh folder on the build's disk (a test's tmp_path may be on tmpfs, which is refused)."""
    return tempfile.mkdtemp(prefix=prefix, dir=os.path.dirname(os.environ["UVMC_LIB"]))


def spill(with_lib, ckpt, watch, *args, lib_env=None, extra_env=None, size=64 * MIB):
    os.makedirs(ckpt, exist_ok=True)
    r = run_body("spill", with_lib, "--dir", ckpt, "--watch", watch, "--size", str(size), *args,
                 script=BODY, lib_env=dict(LIB, **(lib_env or {})), extra_env=extra_env, timeout=600)
    return r, r.result


def show(label, res):
    print(f"{label:38s} table {res['table'] / MIB:.0f} MiB: peak extra RssAnon {res['peak_anon_extra'] / MIB:.0f} MiB, "
          f"spilled {res['spilled_bytes'] / MIB:.0f} MiB, stall {res['stall_s']:.3f} s, upload done {res['upload_s']:.3f} s")


def assert_spilled_and_released(r, res, size):
    assert res["error"] is None, r.describe()
    assert all(res["tables_now"].values()), r.describe()                # the rewrite after the call took
    assert all(res["loaded"].values()), r.describe()                    # the checkpoint holds the values at the call
    assert res["spilled_bytes"] == size, r.describe()                   # the large table spilled, not the small one
    assert res["maps_during"][0] >= 1 and res["maps_during"][1] >= size, r.describe()
    assert res["names_during"] == [], r.describe()                      # unlinked: no name, even while mapped
    assert res["maps_after"] == [0, 0, 0], r.describe()                 # unmapped once the upload completed


@pytest.fixture
def folders():
    made = []

    def make(prefix):
        made.append(disk_dir(prefix))
        return made[-1]
    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


def test_point_in_time_and_memory(folders):
    size = 256 * MIB
    d = folders("uvmc-spill-")
    r, stock = spill(False, f"{d}/stock", f"{d}/stock", size=size)
    show("stock DCP async_save", stock)
    assert all(stock["loaded"].values()) and stock["peak_anon_extra"] >= size, r.describe()
    r, res = spill(True, f"{d}/lib", f"{d}/lib", size=size)
    show("uvmchunk-run, budget 16 MiB", res)
    assert_spilled_and_released(r, res, size)
    assert res["peak_anon_extra"] <= BUDGET + 16 * MIB, r.describe()
    assert "16 MiB (async_memory_budget): 256 MiB spilled to" in r.err, r.describe()


@pytest.mark.parametrize("mode", ["writer", "pinned"])
def test_every_stager(folders, mode):
    d = folders(f"uvmc-spill-{mode}-")
    r, res = spill(True, d, d, "--mode", mode)
    show(f"uvmchunk-run, {mode} stager", res)
    if mode == "pinned":
        assert r.err.count("the spilled part of its staged copy is not page-locked") == 1, r.describe()
    cached = res["maps_after"] != [0, 0, 0]  # 2.8's FileSystemWriter(cache_staged_state_dict=True) keeps its copy
    if cached:
        assert mode == "pinned" and res["maps_dropped"] == [0, 0, 0], r.describe()
        res["maps_after"] = [0, 0, 0]
    assert_spilled_and_released(r, res, 64 * MIB)


def test_below_the_budget_or_off_nothing_changes(folders):
    d = folders("uvmc-spill-below-")
    for name, env in (("auto", {"UVMCHUNK_ASYNC_MEMORY_BUDGET": "auto"}), ("off", {"UVMCHUNK_ASYNC_SPILL": "off"})):
        r, res = spill(True, f"{d}/{name}", f"{d}/{name}", lib_env=env)
        assert res["spilled_bytes"] == 0 and res["maps_during"] == [0, 0, 0], r.describe()
        assert all(res["loaded"].values()) and all(res["tables_now"].values()), r.describe()
        assert res["peak_anon_extra"] >= 64 * MIB, r.describe()  # staged in memory, as PyTorch stages it
        if name == "auto":  # the per-call line says the budget and where it came from (this machine's limit, if any)
            assert "(a quarter of " in r.err and "): none spilled, 72 MiB in memory" in r.err, r.describe()


def fake_cgroup(root, kind, limit, used):
    """Fake /proc and cgroup files under `root` (uvmchunk._limits' UVMC_TEST_CGROUP_ROOT): the process
    in /kubepods/pod, whose memory limit is `limit` bytes with `used` bytes used (cgroup `kind` v1 or
    v2); returns the limit file's path as the package names it."""
    if kind == "v2":
        mount, cgroup, names = ("/", "/sys/fs/cgroup", "cgroup2", "rw"), "0::/kubepods/pod\n", ("memory.max", "memory.current")
    else:
        mount, cgroup, names = (("/", "/sys/fs/cgroup/memory", "cgroup", "rw,memory"), "4:memory:/kubepods/pod\n0::/\n",
                                ("memory.limit_in_bytes", "memory.usage_in_bytes"))
    folder = f"{mount[1]}/kubepods/pod"
    os.makedirs(f"{root}/proc/self")
    os.makedirs(f"{root}{folder}")
    with open(f"{root}/proc/self/mountinfo", "w") as f:
        f.write(f"31 23 0:28 {mount[0]} {mount[1]} rw,relatime - {mount[2]} {mount[2]} {mount[3]}\n")
    for path, text in (("/proc/self/cgroup", cgroup), ("/proc/meminfo", "MemAvailable: 67108864 kB\n"),
                       (f"{folder}/{names[0]}", f"{limit}\n"), (f"{folder}/{names[1]}", f"{used}\n")):
        with open(root + path, "w") as f:
            f.write(text)
    return f"{folder}/{names[0]}"


@pytest.mark.parametrize("kind", ["v2", "v1"])
def test_budget_under_a_container_limit(folders, kind):
    """A fake 2 GiB cgroup limit with 1.5 GiB used (MemAvailable 64 GiB, the host's): the default
    budget is a quarter of the 512 MiB left, 128 MiB, so async_save of a 600 MiB managed table spills
    it and adds at most 192 MiB of anonymous memory (a quarter of MemAvailable staged all of it
    there: +665 MiB). The spill file's page cache is written back and dropped per 64 MiB block as
    it is filled (at most two blocks before the upload; else all of it, dirty) and as the upload
    writes it out (a block at most once written; else all of it until the release). torch.save
    reads a whole record for its CRC-32 before writing it, so the upload's peak is the record's
    size in clean, reclaimable cache: printed, not asserted. The point in time holds; the
    per-checkpoint line names the limit file. The v1 run's table has no CPU preference: the copy
    into the mapping (per block) rather than pwrite fills its spill."""
    size = 600 * MIB
    d = folders(f"uvmc-spill-cgroup-{kind}-")
    limit_file = fake_cgroup(f"{d}/root", kind, 2 << 30, 3 << 29)
    # v1's run: the table without the CPU preference, so it is copied into the mapping, not pwritten
    r, res = spill(True, f"{d}/ck", f"{d}/ck", "--cached", *(["--no-cpu-preference"] if kind == "v1" else []), size=size,
                   lib_env={"UVMCHUNK_ASYNC_MEMORY_BUDGET": "auto"}, extra_env={"UVMC_TEST_CGROUP_ROOT": f"{d}/root"})
    show(f"uvmchunk-run, fake {kind} limit", res)
    print(f"{'':38s} spill page cache: at most {res['peak_cached_staging'] / MIB:.0f} MiB while staged, "
          f"{res['cached_written'] / MIB:.0f} MiB once written out, {res['peak_cached'] / MIB:.0f} MiB at peak")
    assert_spilled_and_released(r, res, size)
    assert res["peak_anon_extra"] <= 192 * MIB, r.describe()
    assert res["peak_cached_staging"] <= 2 * BLOCK, r.describe()  # written back and dropped per block
    assert res["cached_written"] <= BLOCK, r.describe()  # dropped per piece as the upload wrote it
    why = f"a quarter of the room under the 2 GiB limit of {limit_file}"
    assert f"budget 128 MiB ({why}): 600 MiB spilled to" in r.err, r.describe()  # the per-call info line
    assert f"600 MiB staged in a file-backed mapping (budget 128 MiB: {why})" in r.err, r.describe()  # the report


def _mount(args, where):
    p = subprocess.run(["mount", *args, where], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount ({' '.join(args)}): {p.stderr.strip() or p.returncode}")


@pytest.fixture
def mounts():
    done = []

    def mount(kind, where, size_mib):
        os.makedirs(where, exist_ok=True)
        if kind == "tmpfs":
            _mount(["-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs"], where)
        else:  # a small ext4 on a loop device: a local disk without room
            img = where + ".img"
            with open(img, "wb") as f:
                f.truncate(size_mib * MIB)
            p = subprocess.run(["mkfs.ext4", "-q", "-F", img], capture_output=True, text=True)
            if p.returncode != 0:
                pytest.skip(f"mkfs.ext4 failed: {p.stderr.strip()}")
            _mount(["-o", "loop", img], where)
        done.append(where)
        return where
    yield mount
    for where in reversed(done):
        subprocess.run(["umount", where], capture_output=True)


def test_tmpfs_refused_and_no_room(folders, mounts):
    d = folders("uvmc-spill-fail-")
    shm = mounts("tmpfs", f"{d}/shm", 8)
    # a spill folder on tmpfs: refused (one line), the next candidate (the checkpoint's folder) used
    r, res = spill(True, f"{d}/ck1", f"{d}/ck1", lib_env={"UVMCHUNK_ASYNC_SPILL_DIR": shm})
    assert r.err.count(f"{shm} refused as a spill folder (on tmpfs") == 1, r.describe()
    assert_spilled_and_released(r, res, 64 * MIB)
    assert os.listdir(shm) == [], r.describe()
    # a local folder without room: one line, staged in memory as PyTorch stages it
    small = mounts("ext4", f"{d}/small", 32)
    r, res = spill(True, f"{d}/ck2", small, lib_env={"UVMCHUNK_ASYNC_SPILL_DIR": small})
    assert res["spilled_bytes"] == 0 and res["maps_during"] == [0, 0, 0], r.describe()
    assert f"spill folder {small} has" in r.err and "staged in memory" in r.err, r.describe()
    assert all(res["loaded"].values()) and all(res["tables_now"].values()), r.describe()
    # ... or, with async_spill = required, the call is refused and nothing is left
    r, res = spill(True, f"{d}/ck3", small, lib_env={"UVMCHUNK_ASYNC_SPILL_DIR": small, "UVMCHUNK_ASYNC_SPILL": "required"})
    assert "SpillRefused" in res["refused"] and "async_spill = required" in res["refused"], r.describe()
    assert res["maps_after"] == [0, 0, 0] and all(res["tables_now"].values()), r.describe()
    assert set(os.listdir(small)) <= {"lost+found"}, r.describe()


def test_upload_failing_after_a_spill(folders, mounts):
    """The checkpoint on a 8 MiB tmpfs, the spill in a folder on disk: the upload fails (ENOSPC in
    its writes), through the future, as stock's does; nothing is left in the spill folder, and the
    tables hold what they held."""
    d = folders("uvmc-spill-enospc-")
    tmp = os.path.join(d, "tmpdir")
    os.makedirs(tmp)
    errors = {}
    for with_lib in (False, True):
        ck = mounts("tmpfs", f"{d}/ck{int(with_lib)}", 8)
        r, res = spill(with_lib, ck, tmp, "--no-overwrite", lib_env={"UVMCHUNK_ASYNC_SPILL_DIR": tmp})
        assert res["error"] is not None, r.describe()
        errors[with_lib] = res["error"].split(":")[0]  # DCP's CheckpointException, wrapping the write's error
        assert all(res["tables_now"].values()), r.describe()
        assert res["names_during"] == [] and res["names_after"] == [], r.describe()
        # the failed future's traceback still references the staged copy (stock's too): its spill
        # pages are dropped at the failure, the mapping goes with the future
        assert res["maps_after"][2] == 0 and res["maps_dropped"] == [0, 0, 0], r.describe()
        if with_lib:
            assert res["spilled_bytes"] == 64 * MIB and res["maps_during"][1] >= 64 * MIB, r.describe()
    assert errors[True] == errors[False], errors


def test_kill_during_the_upload_leaves_nothing(folders):
    d = folders("uvmc-spill-kill-")
    env = sim_env(True, dict(LIB))
    p = subprocess.Popen([sys.executable, BODY, "spill", "--dir", d, "--watch", d, "--size", str(64 * MIB), "--hold"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        deadline = time.monotonic() + 300
        while not line.startswith("HOLDING") and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line and p.poll() is not None:
                break
        assert line.startswith("HOLDING"), p.stderr.read()[-4000:]
        count, nbytes = map(int, line.split()[1:3])
        assert count >= 1 and nbytes >= 64 * MIB, line  # the spill is mapped while the upload waits
        assert os.listdir(d) == []
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert os.listdir(d) == []  # no name was ever made: nothing to clean up after kill -9


MANY = """
import os, resource, sys
sys.path.insert(0, {here!r})
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))  # before the package reads it
import torch
import torch.distributed.checkpoint as dcp
from torch_body import cuda_from, pattern, result
tables = {{f"t{{i}}": cuda_from(pattern(1 << 20, i), managed=True) for i in range({n})}}
base = len(os.listdir("/proc/self/fd"))
r = dcp.async_save(tables, checkpoint_id={ckpt!r})
getattr(r, "upload_completion", r).result()
back = {{k: torch.zeros(1 << 20, dtype=torch.uint8) for k in tables}}
dcp.load(back, checkpoint_id={ckpt!r})
from uvmchunk import _accounting
result(fds_before=base, spilled=_accounting.totals().get("dcp.async_save", {{}}).get("spilled_bytes", 0),
       equal=all(torch.equal(back[k], tables[k].cpu()) for k in tables))
"""


def test_many_tables_spill_within_the_descriptor_limit(folders, tmp_path):
    """150 managed tables of 1 MiB, a 16 MiB budget, RLIMIT_NOFILE 128: 134 spill files, more than
    the descriptors left. The spill keeps at most a quarter of the limit open (to punch them after
    the upload) and closes the rest at once, so every table past the budget is spilled and none
    fails to make its file (EMFILE)."""
    d = folders("uvmc-spill-many-")
    script = tmp_path / "many.py"
    script.write_text(MANY.format(here=HERE, n=150, ckpt=os.path.join(d, "ckpt")))
    r = run_body(None, True, script=str(script), lib_env=dict(LIB, UVMCHUNK_ASYNC_SPILL_DIR=d), timeout=600)
    res = r.result
    print(f"descriptors open before the save {res['fds_before']}, spilled {res['spilled'] / MIB:.0f} MiB")
    assert res["equal"] and "Too many open files" not in r.err, r.describe()
    assert res["spilled"] == (150 - 16) * MIB, r.describe()


@pytest.mark.parametrize("mode", ["default", "writer"])
def test_sharded_tensor_and_dtensor_spill(folders, mode):
    """TorchRec's leaves: a ShardedTensor of two managed 32 MiB shards and a DTensor whose local
    tensor is a managed 32 MiB table, through the default stager and the FileSystemWriter as stager
    (PyTorch's _create_cpu_state_dict: on 2.8 the path of every async_save, whose own creation copies
    each such leaf to the CPU whole, then makes another): all 96 MiB spilled, peak extra RssAnon
    within the budget + 16 MiB (stock: at least the tables), reloaded bitwise."""
    d = folders(f"uvmc-spill-sharded-{mode}-")
    size = 32 * MIB
    runs = {}
    for label, with_lib in (("stock", False), ("lib", True)):
        ckpt = os.path.join(d, label)
        os.makedirs(ckpt)
        r = run_body("sharded", with_lib, "--dir", ckpt, "--watch", ckpt, "--size", str(size), "--mode", mode,
                     script=BODY, lib_env=LIB, timeout=600)
        runs[label] = (r, r.result)
        if r.result["error"] is None:
            print(f"{label:6s} {mode:8s} peak extra RssAnon {r.result['peak_anon_extra'] / MIB:.0f} MiB, "
                  f"spilled {r.result['spilled_bytes'] / MIB:.0f} MiB of {r.result['managed_bytes'] / MIB:.0f} MiB")
    (rs, stock), (r, res) = runs["stock"], runs["lib"]
    if stock["error"] is not None:  # 2.11+: DefaultStager's deep copy asks a ShardedTensor for data_ptr
        assert res["error"] == stock["error"], r.describe()  # the library fails it as stock does
        pytest.skip(f"stock DCP's async_save fails here too: {stock['error']}")
    assert all(stock["loaded"].values()) and stock["peak_anon_extra"] >= 3 * size, rs.describe()
    assert all(res["loaded"].values()), r.describe()
    assert res["spilled_bytes"] == 3 * size, r.describe()
    assert res["peak_anon_extra"] <= BUDGET + 16 * MIB, r.describe()


def test_user_subclasses_with_strict_signatures(folders):
    """Subclasses whose overrides take exactly the arguments PyTorch's bases declare (a DefaultStager
    whose _stage takes only the state dict, save and load planners, a FileSystemWriter and a
    FileSystemReader): every dcp.save, dcp.load and dcp.async_save ends as stock's ends and loads
    the same values; the library adds no keyword of its own to a method a user overrides, and its
    spill still reaches a stager's staging on the stager's own thread (32 MiB table spilled per
    async_save)."""
    d = folders("uvmc-spill-strict-")
    runs = {}
    for label, with_lib in (("stock", False), ("lib", True)):
        os.makedirs(f"{d}/{label}")
        r = run_body("strict", with_lib, "--dir", f"{d}/{label}", "--watch", d, "--size", str(32 * MIB),
                     script=BODY, lib_env=LIB, timeout=600)
        runs[label] = (r, r.result)
        print(label, r.result)
    (_, stock), (r, res) = runs["stock"], runs["lib"]
    assert all(v == "ok" for v in stock["outcomes"].values()) and all(stock["loaded"].values()), stock
    assert res["outcomes"] == stock["outcomes"] and res["loaded"] == stock["loaded"], r.describe()
    async_saves = sum(k.startswith("async_save") for k in res["outcomes"])
    assert r.err.count("): 32 MiB spilled to ") == async_saves, r.describe()  # each call's line


def test_no_room_for_the_checkpoint_and_the_spill(folders, mounts):
    """The checkpoint on a small local disk (ext4 on a loop device) with room for it but not for it
    and the spill: an 8 MiB and a 64 MiB managed table, a 4 MiB CUDA tensor and a CPU tensor
    filling the disk but for 30 MiB. Stock's async_save completes; so does the library's: the spill
    does not go there (the check counts the whole checkpoint, not only its staged part), but to the
    next candidate with room (the temporary folder on another disk), or, where none has room (the
    temporary folder on tmpfs, refused), the tables are staged in memory as PyTorch stages them;
    the per-call line says why. Budget 16 MiB and 0."""
    d = folders("uvmc-spill-full-")
    disk = mounts("ext4", f"{d}/disk", 320)
    vfs = os.statvfs(disk)
    free = vfs.f_bavail * vfs.f_frsize
    cpu = free - (8 + 64 + 4 + 30) * MIB  # the checkpoint leaves 30 MiB free; with a 64 MiB spill it would not fit
    tmp_disk = folders("uvmc-spill-full-tmp-")
    tmp_mem = mounts("tmpfs", f"{d}/shm", 8)
    runs = [("stock", False, d, {}, tmp_disk), ("next folder", True, tmp_disk, {}, tmp_disk),
            ("in memory, budget 0", True, disk, {"UVMCHUNK_ASYNC_MEMORY_BUDGET": "0"}, tmp_mem)]
    for label, with_lib, watch, env, tmpdir in runs:
        ckpt = os.path.join(disk, label.split(",")[0].replace(" ", "-"))
        r, res = spill(with_lib, ckpt, watch, "--cpu", str(cpu), "--no-overwrite", lib_env=env,
                       extra_env={"TMPDIR": tmpdir})
        print(f"{label:20s} free {free / MIB:.0f} MiB, CPU tensor {cpu / MIB:.0f} MiB: error {res['error']}, "
              f"spilled {res['spilled_bytes'] / MIB:.0f} MiB")
        assert res["error"] is None and all(res["loaded"].values()), r.describe()
        assert os.path.exists(os.path.join(ckpt, ".metadata")), r.describe()
        shutil.rmtree(ckpt)  # room for the next run
        if label == "next folder":
            assert res["spilled_bytes"] == 64 * MIB and res["maps_during"][1] >= 64 * MIB, r.describe()
            assert f"spill folder {ckpt} has " in r.err and f"trying {tmp_disk}" in r.err, r.describe()
        elif with_lib:
            assert res["spilled_bytes"] == 0, r.describe()
            assert f"spill folder {ckpt} has " in r.err and "staged in memory" in r.err, r.describe()
            assert "none spilled, 72 MiB in memory (spill folder" in r.err, r.describe()  # the per-call line says why
            assert "not spilled: spill folder" in r.err, r.describe()  # ... and the report
