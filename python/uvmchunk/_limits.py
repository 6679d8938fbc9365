"""The host memory this process may still take: the room left under the tightest cgroup memory
limit on the path from its cgroup to the root of each hierarchy, else MemAvailable of
/proc/meminfo. In a container /proc/meminfo is the host's, and a job that takes more than its
cgroup's limit is killed by the kernel's OOM killer however much memory the host has free.

Read once per checkpoint call (async_save's default ``async_memory_budget``: uvmchunk._spill), never
on a hot path; every file is read as it is at that moment. Nothing here raises: a file that is
missing or unreadable leaves its level out.

- cgroup v2 (Documentation/admin-guide/cgroup-v2.rst, "Memory Interface Files"): ``memory.max``
  (the hard limit: above it, the OOM killer) and ``memory.high`` (the throttle limit: above it the
  cgroup's processes are put into heavy reclaim), each against ``memory.current``; ``max`` is no
  limit; the root cgroup has none of these files.
- cgroup v1 (Documentation/admin-guide/cgroup-v1/memory.rst): ``memory.limit_in_bytes`` against
  ``memory.usage_in_bytes``; no limit reads as the page counter's maximum (PAGE_COUNTER_MAX pages,
  about 2^63 bytes).

A limit of a parent cgroup bounds its children too (cgroup-v2.rst, "Top-down Constraint"), so every
directory from the process's cgroup up to the hierarchy's mount is asked, and the least room wins.
The hierarchies are found in /proc/self/mountinfo (proc(5): ``cgroup2``, and ``cgroup`` with the
``memory`` option), the process's cgroup in /proc/self/cgroup (``0::PATH`` for v2,
``N:...memory...:PATH`` for v1).

``UVMC_TEST_CGROUP_ROOT`` (tests only; not a ``UVMCHUNK_`` key): a folder that stands in for ``/``
for every file read here (``proc/self/mountinfo``, ``proc/self/cgroup``, ``proc/meminfo``, and the
cgroup folders that mountinfo names), so the tests fake limits without root."""
from __future__ import annotations

import dataclasses
import os
from typing import Iterator, Optional

TEST_ROOT_ENV = "UVMC_TEST_CGROUP_ROOT"
# cgroup v1 reads "no limit" as PAGE_COUNTER_MAX * PAGE_SIZE (LONG_MAX rounded down to a page on
# 64-bit: 9223372036854771712); anything this large is no limit a machine can reach
_V1_UNLIMITED = 1 << 62
# (limit file, usage file) per hierarchy kind, tightest first where both bind
_V2_FILES = (("memory.max", "memory.current"), ("memory.high", "memory.current"))
_V1_FILES = (("memory.limit_in_bytes", "memory.usage_in_bytes"),)


@dataclasses.dataclass(frozen=True)
class Room:
    """Host memory this process may still take, in bytes (`room`); `limit`: the limit it is left
    under, in bytes (None: no cgroup limit, `room` is MemAvailable); `source`: the file that set
    the limit (``/proc/meminfo`` for MemAvailable)."""

    room: int
    limit: Optional[int]
    source: str


def _root() -> str:
    return os.environ.get(TEST_ROOT_ENV, "").rstrip("/")


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _number(path: str) -> Optional[int]:
    """The single number a cgroup file holds; None for ``max``, a missing or unreadable file, or
    anything else."""
    text = _read(path)
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.isdigit() else None


def _unescape(field: str) -> str:
    """A mountinfo path field: blanks, tabs, newlines and backslashes are written as octal escapes
    (proc(5), /proc/pid/mountinfo)."""
    for esc, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(esc, ch)
    return field


def _mounts(root: str) -> Iterator[tuple[str, str, bool]]:
    """(root of the hierarchy mounted, mount point, v2) of each cgroup2 mount and each cgroup v1
    mount with the memory controller."""
    text = _read(root + "/proc/self/mountinfo") or ""
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        if sep < 5 or len(fields) < sep + 4:
            continue
        fstype, options = fields[sep + 1], fields[sep + 3].split(",")
        if fstype == "cgroup2" or (fstype == "cgroup" and "memory" in options):
            yield _unescape(fields[3]), _unescape(fields[4]), fstype == "cgroup2"


def _cgroups(root: str) -> tuple[Optional[str], Optional[str]]:
    """The process's cgroup path in the v2 hierarchy and in v1's memory hierarchy (None: not in one)."""
    v2 = v1 = None
    for line in (_read(root + "/proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2]
        elif "memory" in parts[1].split(","):
            v1 = parts[2]
    return v2, v1


def _levels(mount_root: str, mount_point: str, cgroup: str) -> list[str]:
    """The folders of `cgroup` and of each ancestor up to the mount point, innermost first. A
    cgroup outside the mounted root (another cgroup namespace) is taken as the mount point itself."""
    inside = mount_root == "/" or cgroup == mount_root or cgroup.startswith(mount_root.rstrip("/") + "/")
    rel = os.path.relpath(cgroup, mount_root) if inside else "."
    parts = [] if rel == "." else rel.split("/")
    return [os.path.join(mount_point, *parts[:i]) for i in range(len(parts), -1, -1)]


def cgroup_room() -> Optional[Room]:
    """The least room under any cgroup memory limit of this process, or None when none is set (or
    none can be read)."""
    root = _root()
    v2, v1 = _cgroups(root)
    best: Optional[Room] = None
    for mount_root, mount_point, is_v2 in _mounts(root):
        cgroup = v2 if is_v2 else v1
        if cgroup is None:
            continue
        for folder in _levels(mount_root, mount_point, cgroup):
            for limit_name, usage_name in (_V2_FILES if is_v2 else _V1_FILES):
                limit = _number(root + os.path.join(folder, limit_name))
                if limit is None or limit >= _V1_UNLIMITED:
                    continue
                usage = _number(root + os.path.join(folder, usage_name))
                if usage is None:
                    continue
                room = max(0, limit - usage)
                if best is None or room < best.room:
                    best = Room(room, limit, os.path.join(folder, limit_name))
    return best


def mem_available() -> int:
    """MemAvailable of /proc/meminfo in bytes (0 when unreadable)."""
    for line in (_read(_root() + "/proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            try:
                return int(line.split()[1]) * 1024
            except (ValueError, IndexError):
                return 0
    return 0


def memory_room() -> Room:
    """The room under the tightest cgroup memory limit, else (no limit set) MemAvailable."""
    return cgroup_room() or Room(mem_available(), None, "/proc/meminfo")
