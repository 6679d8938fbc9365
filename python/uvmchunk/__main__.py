"""python -m uvmchunk: the version, the library's path and the configuration in effect (the
library's own parser reads it: the uvmchunk-config helper next to the library). Exit status 2 when
the configuration has a mistake (one 'uvmchunk:' line each on stderr), as uvmchunk-run exits when it
refuses one; 1 when the library or its helper cannot be found. Says what CUDA it found: a GPU, the
simulated driver of tests/sim, or no device (then the library has nothing to do)."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from . import __version__, library_path
from ._autoload import status
from ._device import cuda_device
from ._store_clients import describe as store_clients


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m uvmchunk",
                                description="Prints the version, the library's path and the configuration in "
                                            "effect (UVMCHUNK_CONFIG or /etc/uvmchunk.conf, then UVMCHUNK_* "
                                            "variables), and whether dcp.save / dcp.load take zero-copy views "
                                            "here with no code change. Exit status 2 when the configuration "
                                            "has a mistake (as uvmchunk-run).")
    p.add_argument("--version", action="version", version=f"uvmchunk {__version__}")
    p.parse_args(argv)
    print(f"uvmchunk {__version__}")
    try:
        lib = library_path()
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 1
    print(f"library: {lib}", flush=True)  # before the helper's own output
    helper = os.path.join(os.path.dirname(lib), "uvmchunk-config")
    if not os.access(helper, os.X_OK):
        print(f"uvmchunk: {helper} not found (the configuration cannot be shown)", file=sys.stderr)
        return 1
    rc = subprocess.run([helper]).returncode  # 1: a mistake (config/describe.c)
    print(f"object-storage clients: {store_clients()}")
    kind, found = cuda_device()
    print(f"CUDA: {found}")
    active, why = status()
    if active and kind == "none":  # loaded and configured, but no managed memory to save here
        active, why = False, "libuvmchunk.so is loaded, but there is no CUDA device: it has nothing to do"
    elif active and kind == "sim":
        why += "; on the simulated CUDA driver, not a GPU"
    print(f"zero-copy DCP views with no code change: {'active' if active else 'not active'} in this Python ({why})")
    return 2 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
