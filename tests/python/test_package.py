"""The Python package: the preload environment read as the list LD_PRELOAD is, the one launcher
(tools/uvmchunk-run runs it), and a wheel built with scikit-build-core that installs into a fresh
virtual environment with a working uvmchunk-run, python -m uvmchunk and uvmchunk.dcp."""
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "python"))
import uvmchunk  # noqa: E402

BUILD = Path(os.environ.get("UVMC_BUILD", TOP / "build"))
LIB = str(BUILD / "libuvmchunk.so")


@pytest.fixture(autouse=True)
def lib_env(monkeypatch):
    monkeypatch.setenv("UVMCHUNK_LIB", LIB)


def test_library_path_is_the_one_named():
    assert uvmchunk.library_path() == os.path.realpath(LIB)


@pytest.mark.parametrize("given, rest", [
    ("", []),
    ("/usr/lib/libstdbuf.so", ["/usr/lib/libstdbuf.so"]),
    ("/a/one.so:/b/two.so", ["/a/one.so", "/b/two.so"]),
    ("/a/one.so /b/two.so\t/c/three.so", ["/a/one.so", "/b/two.so", "/c/three.so"]),
    (f"/x/libstdbuf.so:{LIB}", ["/x/libstdbuf.so"]),            # ours not added twice
    ("/old/copy/libuvmchunk.so /x/y.so", ["/x/y.so"]),           # nor another copy of it
])
def test_preload_env_reads_ld_preload_as_a_list(given, rest):
    env = uvmchunk.preload_env({"LD_PRELOAD": given, "KEEP": "1"})
    assert env["LD_PRELOAD"].split(" ") == [os.path.realpath(LIB), *rest]
    assert env["KEEP"] == "1"


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


def test_source_build_launcher(tmp_path):
    conf = tmp_path / "u.conf"
    conf.write_text("threshold = 1GiB\n")
    r = run([str(BUILD / "uvmchunk-run"), "--config", str(conf), "--", "sh", "-c", 'echo "$LD_PRELOAD|$UVMCHUNK_CONFIG"'],
            env=dict(os.environ, LD_PRELOAD="/x/libstdbuf.so"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{os.path.realpath(LIB)} /x/libstdbuf.so|{conf}"
    launcher = str(BUILD / "uvmchunk-run")
    bad = run([launcher])
    assert bad.returncode == 2 and bad.stderr.startswith("uvmchunk: no command") and "usage: uvmchunk-run" in bad.stderr
    # every mistake: one line on stderr, prefixed uvmchunk:, exit 2 (127 when the command cannot run)
    for args, code, words in ((["--config", str(tmp_path / "nope"), "--", "true"], 2, "cannot read config"),
                              (["--config", str(tmp_path), "--", "true"], 2, "cannot read config"),  # a directory
                              (["--config"], 2, "--config needs a FILE"),
                              (["--verbose", "--", "true"], 2, "unknown option --verbose"),
                              (["--", str(tmp_path / "no-such-program")], 127, "cannot run"),
                              ([""], 2, "no command")):
        r = run([launcher, *args])
        assert r.returncode == code and r.stderr.startswith("uvmchunk: ") and words in r.stderr, (args, r.stderr)
        assert r.stderr.count("\n") == 1, r.stderr
    notelf = tmp_path / "libuvmchunk.so"
    notelf.write_text("not a library\n")
    r = run([launcher, "true"], env=dict(os.environ, UVMCHUNK_LIB=str(notelf)))
    assert r.returncode == 2 and r.stderr.startswith("uvmchunk: ") and "not a shared library" in r.stderr, r.stderr
    h = run([launcher, "--help"])
    assert h.returncode == 0 and h.stdout.startswith("usage: uvmchunk-run") and not h.stderr
    assert run([launcher, "true"]).returncode == 0  # no -- needed before a command


def test_wheel_installs_into_a_fresh_venv(tmp_path, monkeypatch):
    monkeypatch.delenv("UVMCHUNK_LIB")
    # tools/test.sh builds this tree's wheel once (UVMC_PACKAGE_WHEEL) for every venv; else build one
    built = os.environ.get("UVMC_PACKAGE_WHEEL")
    if built and os.path.isfile(built):
        wheel = Path(built)
    else:
        wheels = tmp_path / "wheels"
        r = run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", str(TOP), "-w",
                 str(wheels)], cwd=tmp_path)
        if r.returncode != 0 and "No matching distribution" in r.stderr:
            pytest.skip("scikit-build-core cannot be had from the package index here")
        assert r.returncode == 0, r.stderr[-3000:]
        wheel = next(wheels.glob("uvmchunk-*.whl"))
    env_dir = tmp_path / "venv"
    # system site packages: PyTorch, when this Python has it, for uvmchunk.dcp; nothing of ours
    venv.create(env_dir, with_pip=True, system_site_packages=True)
    py, run_bin = env_dir / "bin" / "python", env_dir / "bin" / "uvmchunk-run"
    r = run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index", str(wheel)])
    assert r.returncode == 0, r.stderr
    installed = run([str(py), "-c", "import uvmchunk; print(uvmchunk.library_path())"]).stdout.strip()
    assert installed.startswith(str(env_dir)) and installed.endswith("/uvmchunk/libuvmchunk.so")
    r = run([str(run_bin), "--", "sh", "-c", 'echo "$LD_PRELOAD"'], env=dict(os.environ, LD_PRELOAD="/x/a.so"))
    assert r.returncode == 0 and r.stdout.split() == [installed, "/x/a.so"], r.stderr
    r = run([str(py), "-m", "uvmchunk"], env=dict(os.environ, UVMCHUNK_ENGINE="copy"))
    assert r.returncode == 0, r.stderr
    assert f"uvmchunk {uvmchunk.__version__}" in r.stdout and installed in r.stdout
    assert "engine=copy" in r.stdout  # the environment override, read by the library's own parser
    has_torch = run([str(py), "-c", "import torch"]).returncode == 0
    if has_torch:  # the planners import from the installed package
        r = run([str(py), "-c", "import uvmchunk.dcp as d, torch.distributed.checkpoint.default_planner as p; "
                 "assert issubclass(d.ZeroCopySavePlanner, p.DefaultSavePlanner); print(d.__file__)"])
        assert r.returncode == 0 and r.stdout.strip().startswith(str(env_dir)), r.stderr
    needed = run(["readelf", "-d", installed]).stdout
    assert "libcuda" not in needed and "libcudart" not in needed  # never links CUDA (BRIEF §2)
