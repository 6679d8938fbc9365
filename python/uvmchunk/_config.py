"""The library in this process, as the package sees it: whether libuvmchunk.so is loaded, the
configuration its own parser reads, and the package's ``uvmchunk:`` log lines (shown or not by
``log_level``). Imports nothing of torch; every other module of the package logs through here."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Optional

LIB = "libuvmchunk.so"


def loaded_library() -> Optional[str]:
    """Path of the libuvmchunk.so mapped into this process (LD_PRELOAD, /etc/ld.so.preload), or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1]
                if os.path.basename(path) == LIB:
                    return path
    except OSError:
        pass
    return None


_config: Optional[dict[str, str]] = None


def configuration() -> dict[str, str]:
    """The library's configuration in this environment, key -> value as the library spells it, read
    once by the library's own parser (the ``uvmchunk-config`` helper next to the loaded library, else
    next to the package's). Empty when the helper cannot be run."""
    global _config
    if _config is None:
        _config = {}
        dirs = [os.path.dirname(p) for p in (loaded_library(),) if p]
        try:
            from . import library_path
            dirs.append(os.path.dirname(library_path()))
        except FileNotFoundError:
            pass
        for d in dirs:
            helper = os.path.join(d, "uvmchunk-config")
            if not os.access(helper, os.X_OK):
                continue
            try:
                # a path value (report, async_spill_dir) may hold any byte but a blank: decoded as
                # os.fsdecode does, so a non-UTF-8 one neither raises here nor loses the other keys
                out = subprocess.run([helper], capture_output=True, timeout=30).stdout.decode(
                    "utf-8", "surrogateescape")
            except (OSError, subprocess.SubprocessError):
                continue
            for line in out.splitlines():
                if line.startswith("configuration: "):
                    _config = dict(kv.split("=", 1) for kv in line[len("configuration: "):].split() if "=" in kv)
                    return _config
    return _config


_SHIFTS = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}


def size_bytes(text: str) -> Optional[int]:
    """A size as the library's configuration spells it (config/uvmchunk.conf: bytes, or a number
    with K/M/G/T, KiB, MiB, ...), in bytes; None for anything else."""
    m = re.fullmatch(r"(\d+)\s*([KMGT]?)(?:i?B)?", text.strip(), re.IGNORECASE)
    return int(m.group(1)) << _SHIFTS[m.group(2).upper()] if m else None


def stock() -> bool:
    """``stock = on`` (uvmchunk-run --stock): the library passes everything through and the package
    only measures, for the per-checkpoint report (uvmchunk._report)."""
    return configuration().get("stock", "off") == "on"


def log(level: str, message: str) -> None:
    """One ``uvmchunk:`` line on stderr when the configuration's log_level shows `level`."""
    order = ("error", "warn", "notice", "info", "debug")
    shown = configuration().get("log_level", "notice")
    if order.index(level) <= (order.index(shown) if shown in order else 2):
        # one line: a message may carry an exception's text, and a CUDA error's is several lines
        # (c10/cuda/CUDAException.cpp)
        one = " ".join(part.strip() for part in message.splitlines() if part.strip())
        # one write of the whole line: print() writes the text and its newline separately, and two
        # ranks sharing a stderr pipe then interleave ("... afteruvmchunk: rank 1 ...")
        sys.stderr.write(f"uvmchunk: {one}\n")
        sys.stderr.flush()


_said: set[str] = set()


def say_once(key: str, level: str, message: str) -> None:
    """log(level, message) the first time `key` is said in this process."""
    if key not in _said:
        _said.add(key)
        log(level, message)
