"""Host memory a checkpoint call adds, measured (not estimated) from the call's entry to its end:
the process's resident set size (VmRSS) and its anonymous part (RssAnon) read from
/proc/self/status at both ends (proc(5)), and the peak between them. The peak is the kernel's own
high-water mark (VmHWM, read, never reset) when the call set a new one, which is then exact;
otherwise (the job peaked higher before) it is the highest resident size a sampler read from
/proc/self/statm every ``INTERVAL`` seconds, which can miss a peak shorter than that. Resetting
VmHWM (``echo 5 > /proc/self/clear_refs``) would make the figure exact always, but would take from
a job its own reading of VmHWM, so it is left to the job (the harness,
integration/checkpoint_job.py, does it). Process-wide: memory other threads of the job take
during the call counts too. Imports nothing of torch."""
from __future__ import annotations

import dataclasses
import os
import threading
from typing import Optional

INTERVAL = 0.002  # seconds between two samples (one pread of /proc/self/statm each)
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclasses.dataclass(frozen=True)
class Reading:
    """/proc/self/status at one moment, in bytes; -1 for a field this kernel does not show."""

    rss: int   # VmRSS: resident set size
    anon: int  # RssAnon: its anonymous part (Linux 4.5+)
    hwm: int   # VmHWM: peak resident set size so far


def reading() -> Reading:
    """VmRSS, RssAnon and VmHWM of /proc/self/status now (one read of the file)."""
    found = {b"VmRSS:": -1, b"RssAnon:": -1, b"VmHWM:": -1}
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                key = line.split(None, 1)[0] if line.strip() else b""
                if key in found:
                    found[key] = int(line.split()[1]) * 1024  # "kB" in the file: KiB
    except (OSError, ValueError, IndexError):
        pass
    return Reading(found[b"VmRSS:"], found[b"RssAnon:"], found[b"VmHWM:"])


def resident() -> int:
    """Resident set size of this process in bytes (/proc/self/statm, second field), 0 if unreadable."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class Sampler:
    """Host memory from `entry` (a reading taken at the call's entry, before anything of the
    package ran) to stop(): `base` / `anon_base` at entry, `last` / `anon_last` at stop, `peak`
    between, in bytes.

    The sampler is one daemon thread for the call: the only way to read the resident size while
    the call's own thread is inside DCP. A signal timer (setitimer) would take the job's own
    SIGALRM, and Python runs signal handlers only on the main thread between bytecodes, so never
    while a write blocks in C; the kernel's VmHWM alone misses any peak below an earlier one."""

    def __init__(self, entry: Optional[Reading] = None, interval: float = INTERVAL) -> None:
        self.interval = interval
        self.entry = entry or reading()
        self.base, self.anon_base = self.entry.rss, self.entry.anon
        self.peak = self.last = self.base
        self.anon_last = self.anon_base
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "Sampler":
        self._thread = threading.Thread(target=self._run, name="uvmchunk-rss-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            fd = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            return
        try:
            while not self._stop.wait(self.interval):
                try:
                    rss = int(os.pread(fd, 128, 0).split()[1]) * _PAGE
                except (OSError, ValueError, IndexError):
                    return
                if rss > self.peak:
                    self.peak = rss
        finally:
            os.close(fd)

    def stop(self) -> "Sampler":
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        end = reading()
        self.last, self.anon_last = end.rss, end.anon
        if end.hwm > self.entry.hwm >= 0:
            self.peak = end.hwm  # a new high-water mark was set during the call: the kernel's exact peak
        self.peak = max(self.peak, self.last)
        return self

    @property
    def added_at_peak(self) -> int:
        """Bytes above the resident size at entry, at the call's peak (never negative)."""
        return max(self.peak - self.base, 0)

    @property
    def added_after(self) -> int:
        """Bytes the call left resident above its entry (negative when it released more than it took)."""
        return self.last - self.base

    @property
    def anon_added_after(self) -> int:
        """Anonymous bytes the call left resident above its entry (negative: released)."""
        return self.anon_last - self.anon_base
