"""Shared harness: run a torch_body.py body on the simulated CUDA runtime in a subprocess, with or
without libuvmchunk preloaded, and parse the library's stats line from its stderr."""
import os
import re
import subprocess
import sys

import pytest

# Small enough to keep CI fast, large enough for several blocks.
SIZE = 200 << 20
LIB_ENV = {
    "UVMCHUNK_CONFIG": "",  # ignore /etc/uvmchunk.conf
    "UVMCHUNK_THRESHOLD": "64MiB",
    "UVMCHUNK_CHUNK_SIZE": "16MiB",
    "UVMCHUNK_DEPTH": "2",
    "UVMCHUNK_STATS": "on",
    # The preload library alone: the package's automatic DCP views (python/uvmchunk/_autoload.py)
    # are what test_auto.py turns on.
    "UVMCHUNK_DCP_VIEWS": "off",
}
TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The library's stats line (interpose/stats.c), singular or plural, sizes as a person reads them:
# "uvmchunk: stats: pid 42, rank 0, local rank 0: split 1 copy (200 MiB in 13 blocks, ...); passed
# through 0 at or above threshold, 3 below; 1 pinned request served lazily (256 MiB, 0 pinned at
# first use)". The parenthesised parts are absent when their count is 0.
SIZE_TEXT = r"(\d+(?:\.\d+)? (?:bytes?|[KMGTPE]iB))"
STATS_RE = re.compile(r"uvmchunk: stats: pid \d+[^:]*: split (\d+) cop(?:y|ies)(?: \(" + SIZE_TEXT + r" in (\d+) blocks?)?")
PASSED_RE = re.compile(r"passed through (\d+) at or above threshold, (\d+) below")
PINNED_RE = re.compile(r"(\d+) pinned requests? served lazily(?: \(" + SIZE_TEXT + r", (\d+) pinned at first use\))?")
_UNITS = {"byte": 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50,
          "EiB": 1 << 60}


def size_bytes(text):
    """'200 MiB' -> 209715200 (config/units.c prints exact sizes as integers, others to three
    significant digits); None or '' -> 0."""
    if not text:
        return 0
    number, unit = text.split()
    return round(float(number) * _UNITS[unit])


def _ints(m, size_group):
    """A match's groups as ints, the size group read as a size, absent groups as 0."""
    return tuple(size_bytes(g) if i == size_group else int(g or 0) for i, g in enumerate(m.groups()))


def _need(var):
    v = os.environ.get(var)
    if not v:
        pytest.skip(f"{var} is not set (run through CTest: tests/torch/CMakeLists.txt)")
    return v


_pydev = {}


def pydev_path(hook=True):
    """A directory that makes this tree's Python package an installed distribution for the bodies:
    the package (a link to python/uvmchunk) and a .dist-info with the entry points pyproject.toml
    declares, so PyTorch's backend autoload finds uvmchunk's as it would after `pip install`.
    First on PYTHONPATH, it wins over a copy installed in the venv (importlib.metadata takes the
    first distribution of a name). hook=False: the same without entry points, i.e. a Python that
    lacks the package's hook. Made once per test process."""
    if hook not in _pydev:
        import tempfile
        import tomllib
        with open(os.path.join(TOP, "pyproject.toml"), "rb") as f:
            project = tomllib.load(f)["project"]
        d = tempfile.mkdtemp(prefix="uvmchunk-pydev-")
        os.symlink(os.path.join(TOP, "python", "uvmchunk"), os.path.join(d, "uvmchunk"))
        info = os.path.join(d, f"uvmchunk-{project['version']}.dist-info")
        os.mkdir(info)
        with open(os.path.join(info, "METADATA"), "w") as f:
            f.write(f"Metadata-Version: 2.1\nName: uvmchunk\nVersion: {project['version']}\n")
        with open(os.path.join(info, "entry_points.txt"), "w") as f:
            for group, entries in (project.get("entry-points", {}) if hook else {}).items():
                f.write(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))
        _pydev[hook] = d
    return _pydev[hook]


def cuda_major():
    """The CUDA major version of this PyTorch's wheel (13, or 12 for torch 2.8's CUDA 12.8 wheels)."""
    import torch
    return int(torch.version.cuda.split(".")[0])


def sim_runtime():
    """(directory, file name) of the simulated libcudart that matches this PyTorch:
    <build>/sim/libcudart.so.13, or <build>/sim12/libcudart.so.12 for a CUDA 12 wheel."""
    sim = _need("UVMC_SIM_DIR")
    if cuda_major() == 12:
        return os.path.join(os.path.dirname(os.path.normpath(sim)), "sim12"), "libcudart.so.12"
    return sim, "libcudart.so.13"


def sim_env(with_lib, extra=None):
    """Environment that binds PyTorch to the simulator: its libcudart of the wheel's CUDA major and
    libcuda.so.1 are preloaded, so the wheel's own libcudart (found through libtorch's RPATH) is
    never loaded: a DT_NEEDED is satisfied by an object already loaded under the same SONAME.
    <build>/sim also holds the NVML stand-in (libnvidia-ml.so.1). libuvmchunk comes first so that
    its definitions win. UVMC_SIM_RT_DIR tells the bodies where the runtime is."""
    sim = _need("UVMC_SIM_DIR")
    rt_dir, rt = sim_runtime()
    preload = [f"{rt_dir}/{rt}", f"{sim}/libcuda.so.1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("UVMCHUNK_")}
    if with_lib:
        preload.insert(0, _need("UVMC_LIB"))
        env.update(LIB_ENV)
        env.update(extra or {})
    env["LD_PRELOAD"] = " ".join(preload)
    env["PYTHONPATH"] = pydev_path() + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    dirs = [rt_dir] + ([sim] if rt_dir != sim else [])
    env["LD_LIBRARY_PATH"] = ":".join(dirs + ([env["LD_LIBRARY_PATH"]] if env.get("LD_LIBRARY_PATH") else []))
    env["UVMC_SIM_RT_DIR"] = rt_dir
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


class Run:
    def __init__(self, proc):
        self.rc, self.out, self.err = proc.returncode, proc.stdout, proc.stderr
        import json
        self.results = [json.loads(l[7:]) for l in self.out.splitlines() if l.startswith("RESULT ")]
        self.stats = [_ints(m, 1) for m in STATS_RE.finditer(self.err)]  # (copies, bytes, blocks)
        self.passed = [_ints(m, None) for m in PASSED_RE.finditer(self.err)]  # (at or above, below)
        self.pinned = [_ints(m, 1) for m in PINNED_RE.finditer(self.err)]  # (requests, bytes, pinned later)

    @property
    def result(self):
        assert len(self.results) == 1, self.describe()
        return self.results[0]

    def describe(self):
        return f"exit {self.rc}\n--- stdout\n{self.out[-4000:]}\n--- stderr\n{self.err[-6000:]}"


def run_body(body, with_lib, *args, launcher=None, timeout=240, lib_env=None, extra_env=None, script=None):
    """lib_env: UVMCHUNK_* settings for the run with the library; extra_env: for both runs; script:
    another body file than torch_body.py (body None: no body name argument)."""
    cmd = [*(launcher or [sys.executable]), script or _need("UVMC_TORCH_BODY"), *([body] if body else []), *args]
    _need("UVMC_MANAGED_ALLOC")
    env = sim_env(with_lib, lib_env)
    env.update(extra_env or {})
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    r = Run(proc)
    assert r.rc == 0, r.describe()
    return r
