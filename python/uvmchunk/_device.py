"""What CUDA this machine really offers, for ``python -m uvmchunk``: a GPU, the simulated driver of
tests/sim (a test double, no GPU behind it), or no device at all (then libuvmchunk.so has nothing to
do). The driver is asked in a child process (this file run as a script, standard library only), so
the asking process never loads libcuda.so.1 nor initialises CUDA (the driver API has no call that
undoes cuInit: cuda.h).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

# The driver's soname, the one the CUDA runtime opens (and the simulator's: tests/sim/CMakeLists.txt).
DRIVER = "libcuda.so.1"
# A symbol only the simulated driver exports (tests/sim/README.md: its uvmsim_* test interface).
SIM_SYMBOL = "uvmsim_calls"
PROBE_TIMEOUT_S = 60.0  # seconds: cuInit of a large machine takes a few


def _probe() -> dict:
    """In the child: loads the driver, asks it for its devices; one JSON object, never raises."""
    import ctypes

    try:
        cuda = ctypes.CDLL(DRIVER)
    except OSError as e:
        return {"kind": "none", "why": f"{DRIVER} cannot be loaded ({e})"}  # no NVIDIA driver installed
    path = DRIVER
    with open("/proc/self/maps") as f:  # the file the loader found, for the reader
        for line in f:
            if os.path.basename(line.split()[-1]).startswith("libcuda.so"):
                path = line.split()[-1]
                break
    sim = hasattr(cuda, SIM_SYMBOL)
    count, name = ctypes.c_int(0), ctypes.create_string_buffer(256)
    rc = cuda.cuInit(0)
    if rc == 0:
        rc = cuda.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0 or count.value == 0:
        why = f"cuInit or cuDeviceGetCount returned CUDA error {rc}" if rc else "the driver lists 0 devices"
        return {"kind": "none", "why": f"{why} ({path})"}
    dev = ctypes.c_int(0)
    if cuda.cuDeviceGet(ctypes.byref(dev), 0) != 0 or cuda.cuDeviceGetName(name, len(name), dev) != 0:
        name.value = b"name unknown"
    return {"kind": "sim" if sim else "gpu", "count": count.value, "name": name.value.decode(errors="replace"),
            "path": path}


def cuda_device() -> tuple[str, str]:
    """("gpu" | "sim" | "none" | "unknown", one line saying what was found). Runs the probe in a
    child without libuvmchunk.so in its LD_PRELOAD (the question is the driver's, not the library's)."""
    from . import _LIB, _preload_entries

    env = dict(os.environ)
    rest = [e for e in _preload_entries(env.get("LD_PRELOAD", "")) if os.path.basename(e) != _LIB]
    env["LD_PRELOAD"] = ":".join(rest)
    try:
        r = subprocess.run([sys.executable, "-I", os.path.abspath(__file__)], env=env, capture_output=True,
                           text=True, timeout=PROBE_TIMEOUT_S)
        found = json.loads(r.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
        return "unknown", f"the driver could not be asked ({type(e).__name__})"
    kind = found.get("kind")
    if kind == "none":
        return "none", f"no device: {found['why']}"
    devices = f"{found['count']} device{'s' if found['count'] != 1 else ''} ({found['name']})"
    if kind == "sim":
        return "sim", f"the simulated driver of tests/sim, not a GPU: {devices} through {found['path']}"
    return "gpu", f"{devices} through {found['path']}"


if __name__ == "__main__":
    print(json.dumps(_probe()))
