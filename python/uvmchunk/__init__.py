"""uvmchunk: ships libuvmchunk.so, the LD_PRELOAD library that keeps checkpoint saving of CUDA
managed-memory tensors from exhausting host memory, the way PyTorch users install things.

>>> import uvmchunk, subprocess
>>> subprocess.run(["torchrun", "train.py"], env=uvmchunk.preload_env())   # doctest: +SKIP
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping, Optional

__version__ = "0.1.0"
__all__ = ["__version__", "library_path", "preload_env"]

_LIB = "libuvmchunk.so"


def library_path() -> str:
    """Absolute path of libuvmchunk.so: $UVMCHUNK_LIB when set, else the copy inside this package
    (the wheel puts it there). Raises FileNotFoundError when there is none."""
    env = os.environ.get("UVMCHUNK_LIB")
    path = Path(env) if env else Path(__file__).resolve().parent / _LIB
    if not path.is_file():
        raise FileNotFoundError(f"uvmchunk: {_LIB} not found at {path} (set UVMCHUNK_LIB)")
    with open(path, "rb") as f:  # the dynamic loader would skip anything else with a warning per process
        if f.read(4) != b"\x7fELF":
            raise FileNotFoundError(f"uvmchunk: {path} is not a shared library (set UVMCHUNK_LIB)")
    return str(path.resolve())


def _preload_entries(value: str) -> list[str]:
    """LD_PRELOAD as the dynamic loader reads it: entries separated by colons or blanks."""
    return [e for e in re.split(r"[:\s]+", value) if e]


def preload_env(env: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """A copy of `env` (default: os.environ) with libuvmchunk.so first in LD_PRELOAD, the entries
    separated by colons. Entries already there (libstdbuf.so, another interposer) are kept in order
    after it; a copy of this library already in the list is not added twice."""
    out = dict(os.environ if env is None else env)
    lib = library_path()
    rest = [e for e in _preload_entries(out.get("LD_PRELOAD", ""))
            if os.path.basename(e) != _LIB and e != lib]
    # colons: ld.so(8) reads colons or blanks, but a preload library's own Python side may split on
    # colons only (torch-memory-saver's hooks/mode_preload.py finds its .so that way)
    out["LD_PRELOAD"] = ":".join([lib, *rest])
    return out
