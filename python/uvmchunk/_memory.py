"""Host memory a checkpoint call adds, measured (not estimated): the process's resident set size
read from /proc/self/statm by a sampler thread every ``INTERVAL`` seconds while the call runs, and
the kernel's own high-water mark (VmHWM of /proc/self/status) read, never reset, at both ends. A
call that sets a new high-water mark gets the kernel's exact peak; one that peaks below an earlier
one gets the sampler's (a peak shorter than the interval can be missed). Resetting VmHWM
(``echo 5 > /proc/self/clear_refs``) would make the figure exact always, but would take from a job
its own reading of VmHWM, so it is left to the job (the harness, integration/checkpoint_job.py,
does it). Process-wide: memory other threads of the job take during the call counts too.
Imports nothing of torch."""
from __future__ import annotations

import os
import threading
from typing import Optional

INTERVAL = 0.002  # seconds between two samples (one pread of /proc/self/statm each)
_PAGE = os.sysconf("SC_PAGE_SIZE")


def resident() -> int:
    """Resident set size of this process in bytes (/proc/self/statm, second field), 0 if unreadable."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def high_water() -> Optional[int]:
    """VmHWM of /proc/self/status in bytes (the kernel's peak resident size), None if unreadable."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class Sampler:
    """The resident set size of the process from start() to stop(): its value at start (`base`),
    its peak and its value at stop, in bytes."""

    def __init__(self, interval: float = INTERVAL) -> None:
        self.interval = interval
        self.base = self.peak = self.last = 0
        self._hwm: Optional[int] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "Sampler":
        self._hwm = high_water()
        self.base = self.peak = resident()
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
        self.last = resident()
        hwm = high_water()
        if hwm is not None and self._hwm is not None and hwm > self._hwm:
            self.peak = max(self.peak, hwm)  # a new high-water mark was set during the call: exact
        self.peak = max(self.peak, self.last)
        return self

    @property
    def added_at_peak(self) -> int:
        """Bytes above the resident size at start, at the call's peak (never negative)."""
        return max(self.peak - self.base, 0)

    @property
    def added_after(self) -> int:
        """Bytes the call left resident above its start (negative when it freed more than it took)."""
        return self.last - self.base
