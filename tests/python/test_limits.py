"""uvmchunk._limits: the room under the tightest cgroup memory limit, on fake /proc and cgroup files
under UVMC_TEST_CGROUP_ROOT (no root needed, no torch): cgroup v1 and v2, a parent's limit tighter
than its child's and the other way, memory.high, ``max`` and v1's "unlimited" (no limit:
MemAvailable), a hybrid layout, a mount of a cgroup's own folder (no cgroup namespace), and files
that are missing, unreadable or garbage (that level left out, nothing raised)."""
import os
import sys
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "python"))
from uvmchunk import _limits  # noqa: E402

GIB, MIB = 1 << 30, 1 << 20
V1_UNLIMITED = 9223372036854771712  # what v1's memory.limit_in_bytes reads without a limit
MEMINFO = "MemTotal:       65536000 kB\nMemAvailable:   8388608 kB\n"  # 8 GiB available


def fake(root, mounts, cgroup, files, meminfo=MEMINFO):
    """Writes proc/self/mountinfo (`mounts`: (root, mount point, fstype, super options)),
    proc/self/cgroup, proc/meminfo and `files` (absolute path -> content) under `root`, and points
    UVMC_TEST_CGROUP_ROOT there."""
    (root / "proc/self").mkdir(parents=True, exist_ok=True)
    (root / "proc/self/mountinfo").write_text("".join(
        f"{30 + i} 23 0:{28 + i} {r} {mp} rw,relatime - {fs} {fs} {opts}\n" for i, (r, mp, fs, opts) in enumerate(mounts)))
    (root / "proc/self/cgroup").write_text(cgroup)
    (root / "proc/meminfo").write_text(meminfo)
    for path, content in files.items():
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            p.mkdir()  # a folder where a file is expected: open() fails, as on an unreadable file
        else:
            p.write_text(content)
    os.environ[_limits.TEST_ROOT_ENV] = str(root)


@pytest.fixture(autouse=True)
def restore_env():
    yield
    os.environ.pop(_limits.TEST_ROOT_ENV, None)


V2 = [("/", "/sys/fs/cgroup", "cgroup2", "rw")]
V1 = [("/", "/sys/fs/cgroup/cpu", "cgroup", "rw,cpu"), ("/", "/sys/fs/cgroup/memory", "cgroup", "rw,memory")]
V1_CGROUP = "5:cpu:/\n4:memory:/kube/pod\n0::/\n"


def test_v2(tmp_path):
    d = "/sys/fs/cgroup/kube/pod"
    fake(tmp_path, V2, "0::/kube/pod\n", {f"{d}/memory.max": f"{2 * GIB}\n", f"{d}/memory.high": "max\n",
                                          f"{d}/memory.current": f"{3 * GIB // 2}\n"})
    assert _limits.memory_room() == _limits.Room(GIB // 2, 2 * GIB, f"{d}/memory.max")


def test_v2_memory_high_tighter(tmp_path):
    d = "/sys/fs/cgroup/job"
    fake(tmp_path, V2, "0::/job\n", {f"{d}/memory.max": f"{2 * GIB}\n", f"{d}/memory.high": f"{GIB + 256 * MIB}\n",
                                     f"{d}/memory.current": f"{GIB}\n"})
    assert _limits.memory_room() == _limits.Room(256 * MIB, GIB + 256 * MIB, f"{d}/memory.high")


def test_v1(tmp_path):
    d = "/sys/fs/cgroup/memory/kube/pod"
    fake(tmp_path, V1, V1_CGROUP, {f"{d}/memory.limit_in_bytes": f"{2 * GIB}\n",
                                   f"{d}/memory.usage_in_bytes": f"{3 * GIB // 2}\n",
                                   "/sys/fs/cgroup/memory/memory.limit_in_bytes": f"{V1_UNLIMITED}\n",
                                   "/sys/fs/cgroup/memory/memory.usage_in_bytes": f"{40 * GIB}\n"})
    assert _limits.memory_room() == _limits.Room(GIB // 2, 2 * GIB, f"{d}/memory.limit_in_bytes")


@pytest.mark.parametrize("tighter", ["parent", "child"])
def test_nested_the_tighter_wins(tmp_path, tighter):
    """kube (the parent) and kube/pod (the child): each level asked, the least room wins, whichever
    level sets it; the limit file named is that level's."""
    parent, child = "/sys/fs/cgroup/kube", "/sys/fs/cgroup/kube/pod"
    limits = {"parent": (3 * GIB, 4 * GIB), "child": (8 * GIB, 2 * GIB)}[tighter]
    fake(tmp_path, V2, "0::/kube/pod\n", {
        f"{parent}/memory.max": f"{limits[0]}\n", f"{parent}/memory.current": f"{2 * GIB + 512 * MIB}\n",
        f"{child}/memory.max": f"{limits[1]}\n", f"{child}/memory.current": f"{GIB + 768 * MIB}\n"})
    room = _limits.memory_room()
    if tighter == "parent":  # 512 MiB left under 3 GiB, 2.25 GiB under the child's 4 GiB
        assert room == _limits.Room(512 * MIB, 3 * GIB, f"{parent}/memory.max")
    else:  # 256 MiB left under the child's 2 GiB, 5.5 GiB under the parent's 8 GiB
        assert room == _limits.Room(256 * MIB, 2 * GIB, f"{child}/memory.max")


def test_max_is_no_limit(tmp_path):
    """`max` on every level (v2) and v1's "unlimited": MemAvailable, named as /proc/meminfo."""
    fake(tmp_path, V2 + V1[1:], "4:memory:/kube/pod\n0::/kube/pod\n", {
        "/sys/fs/cgroup/kube/pod/memory.max": "max\n", "/sys/fs/cgroup/kube/pod/memory.high": "max\n",
        "/sys/fs/cgroup/kube/pod/memory.current": f"{GIB}\n", "/sys/fs/cgroup/kube/memory.max": "max\n",
        "/sys/fs/cgroup/kube/memory.current": f"{GIB}\n",
        "/sys/fs/cgroup/memory/kube/pod/memory.limit_in_bytes": f"{V1_UNLIMITED}\n",
        "/sys/fs/cgroup/memory/kube/pod/memory.usage_in_bytes": f"{GIB}\n"})
    assert _limits.cgroup_room() is None
    assert _limits.memory_room() == _limits.Room(8 * GIB, None, "/proc/meminfo")


def test_hybrid_and_own_folder_mounted(tmp_path):
    """systemd's hybrid layout: v1's memory hierarchy beside a cgroup2 one with no memory files;
    the v1 one mounted at the cgroup's own folder (a container without a cgroup namespace:
    mountinfo's root is /docker/abc, /proc/self/cgroup names the same path)."""
    fake(tmp_path, [("/docker/abc", "/sys/fs/cgroup/memory", "cgroup", "rw,memory"),
                    ("/", "/sys/fs/cgroup/unified", "cgroup2", "rw")],
         "4:memory:/docker/abc\n0::/docker/abc\n",
         {"/sys/fs/cgroup/memory/memory.limit_in_bytes": f"{2 * GIB}\n",
          "/sys/fs/cgroup/memory/memory.usage_in_bytes": f"{GIB}\n",
          "/sys/fs/cgroup/unified/docker/abc/cgroup.procs": "1\n"})
    assert _limits.memory_room() == _limits.Room(GIB, 2 * GIB, "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def test_unreadable_levels_are_left_out(tmp_path):
    """The child's memory.max unreadable (a folder), the grandparent's usage garbage, the parent's
    missing: only the levels that read whole count; with none of them, MemAvailable; with no
    mountinfo or meminfo at all, nothing raises."""
    base = "/sys/fs/cgroup"
    fake(tmp_path, V2, "0::/a/b/c\n", {
        f"{base}/a/b/c/memory.max": None, f"{base}/a/b/c/memory.current": f"{GIB}\n",
        f"{base}/a/memory.max": f"{2 * GIB}\n", f"{base}/a/memory.current": "lots\n",
        f"{base}/memory.max": f"{4 * GIB}\n", f"{base}/memory.current": f"{GIB}\n"})
    assert _limits.memory_room() == _limits.Room(3 * GIB, 4 * GIB, f"{base}/memory.max")
    (tmp_path / "sys/fs/cgroup/memory.current").write_text("")
    assert _limits.memory_room() == _limits.Room(8 * GIB, None, "/proc/meminfo")
    (tmp_path / "proc/self/mountinfo").unlink()
    (tmp_path / "proc/meminfo").write_text("MemAvailable: many kB\n")
    assert _limits.memory_room() == _limits.Room(0, None, "/proc/meminfo")


def test_this_machine():
    """On this machine's own files: a Room, whatever its cgroups are."""
    room = _limits.memory_room()
    assert room.room >= 0 and (room.limit is None) == (room.source == "/proc/meminfo"), room
