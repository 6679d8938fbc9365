"""The automatic path (python/uvmchunk/_auto.py, _views.py) against stock DCP, each body
(trust_body.py) run with and without the library: it never saves older bytes than stock (the wait
for queued work is the caller's, even when a writer thread resolves first), leaves no CUDA error
behind when its own device query fails, costs what stock costs where it does nothing (no collection
of a large heap), recognises the save that async_save runs on its own thread, and copies a table
prefetched to the device as stock does; and works stacked with torch-memory-saver's preload
library. Small tensors (8 to 16 MiB)."""
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from conftest import run_body

TRUST_BODY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trust_body.py")
AUTO = {"UVMCHUNK_DCP_VIEWS": "on"}


def trust(body, with_lib, tmp_path, name, lib_env=None, extra_env=None):
    d = tmp_path / name
    d.mkdir()
    return run_body(body, with_lib, "--dir", str(d), script=TRUST_BODY, lib_env=dict(AUTO, **(lib_env or {})),
                    extra_env=extra_env)


def test_writer_threads_never_save_older_bytes_than_stock(tmp_path):
    """FileSystemWriter(thread_count=2), a writer thread resolving first, the tables' writes queued
    on the caller's side stream: stock saves the table the caller's thread copies new; the library
    must save no table older than stock, here both new (it waited on the caller's stream)."""
    stock = trust("stale", False, tmp_path, "stock")
    lib = trust("stale", True, tmp_path, "lib")
    print(f"stock saved {stock.result['saved']}, library saved {lib.result['saved']} "
          f"({lib.result['views']} views)")
    for k, values in stock.result["saved"].items():
        assert values != [2] or lib.result["saved"][k] == [2], lib.describe()
    assert lib.result["saved"] == {"a": [2], "b": [2]} and lib.result["views"] == 2, lib.describe()


def test_a_failed_device_query_leaves_no_error_and_is_asked_again(tmp_path):
    """cudaDeviceGetAttribute fails once (101) inside the first save: no CUDA error is left for the
    job's next kernel, the failure is said as a failed query with its name, and the next save asks
    again (and takes its view)."""
    kernels = {"UVMSIM_KERNELS": "noop"}
    stock = trust("attr_fail", False, tmp_path, "stock", extra_env=kernels)
    assert stock.result["fill_error"] is None, stock.describe()
    lib = trust("attr_fail", True, tmp_path, "lib", extra_env=kernels)
    res = lib.result
    print(f"library: fill after the save {res['fill_error'] or 'fine'}, views {res['first_views']} then "
          f"{res['second_views']}")
    assert res["fill_error"] is None, lib.describe()
    assert res["first_views"] == 0 and res["second_views"] == 1 and res["equal"], lib.describe()
    assert lib.err.count("failed with cudaErrorInvalidDevice") == 1, lib.describe()
    assert "has no concurrent managed access" not in lib.err, lib.describe()


def test_an_error_the_job_has_not_read_is_still_there_after_a_checkpoint(tmp_path):
    """A failed cudaSetDevice (101) the job has not read yet when dcp.save / dcp.load of a managed
    table begin: after each, cudaGetLastError returns it, as with stock DCP; the library's own
    queries (which clear the errors of their own failures) ask nothing while it is pending."""
    stock = trust("pending_error", False, tmp_path, "stock")
    lib = trust("pending_error", True, tmp_path, "lib")
    print(f"cudaSetDevice rc, then cudaGetLastError after save and load: stock "
          f"{stock.result['set_device_and_after']}, library {lib.result['set_device_and_after']}")
    assert stock.result["set_device_and_after"] == [[101, 101], [101, 101]], stock.describe()  # means something
    assert lib.result["set_device_and_after"] == stock.result["set_device_and_after"], lib.describe()
    assert lib.err.count("an error the job has not read yet (cudaErrorInvalidDevice)") == 1, lib.describe()


def test_a_checkpoint_that_takes_no_view_costs_what_stock_costs(tmp_path):
    """A 4 KiB CPU tensor saved and loaded with 1.5 million live Python objects: the library adds no
    collection of the heap (printed; only a wide bound asserted)."""
    stock = trust("cost", False, tmp_path, "stock").result
    lib = trust("cost", True, tmp_path, "lib").result
    print(f"per save / load with {stock['objects']} live objects: stock {stock['save_s']:.4f} s / "
          f"{stock['load_s']:.4f} s, library {lib['save_s']:.4f} s / {lib['load_s']:.4f} s")
    assert stock["equal"] and lib["equal"]
    assert lib["save_s"] < stock["save_s"] + 0.1 and lib["load_s"] < stock["load_s"] + 0.1, (stock, lib)


def test_a_cpu_only_load_initialises_no_cuda(tmp_path):
    """dcp.load of CPU tensors in a process that never used CUDA: stock initialises no CUDA (a
    context, device memory), so neither may the library (the views' wait and the direct reads ask
    CUDA nothing without an eligible tensor)."""
    d = tmp_path / "ckpt"
    run_body("cpu_save", False, "--dir", str(d), script=TRUST_BODY)
    stock = run_body("cpu_load", False, "--dir", str(d), script=TRUST_BODY).result
    lib = run_body("cpu_load", True, "--dir", str(d), script=TRUST_BODY, lib_env=AUTO).result
    print(f"CUDA initialised by a CPU-only dcp.load: stock {stock['cuda_initialized']}, library "
          f"{lib['cuda_initialized']}")
    assert stock["equal"] and lib["equal"]
    assert lib["cuda_initialized"] == stock["cuda_initialized"], (stock, lib)


def test_a_checkpoint_that_pins_nothing_runs_no_collection(tmp_path):
    """CPU-only saves and loads with nothing page-locked, the collector off: release_host_cache
    must see the host allocator empty on every PyTorch (2.10+ names its counters allocated_bytes /
    active_bytes, older ones reserved_bytes / allocated_bytes) and collect nothing, as stock."""
    stock = trust("no_collect", False, tmp_path, "stock").result
    lib = trust("no_collect", True, tmp_path, "lib").result
    print(f"collections during 3 CPU-only saves and loads: stock {stock['collections']}, "
          f"library {lib['collections']}")
    assert lib["collections"] == stock["collections"] == [], (stock, lib)


def test_the_jobs_own_pinned_cache_is_kept(tmp_path):
    """A checkpoint that page-locks nothing leaves the job's cached pinned blocks to it, as stock:
    its next pinned batch reuses the cached block instead of page-locking a new one."""
    stock = trust("pinned_kept", False, tmp_path, "stock").result
    lib = trust("pinned_kept", True, tmp_path, "lib").result
    print(f"blocks page-locked by the job's two batches around a CPU-only save and load: stock "
          f"{stock['host_allocations']}, library {lib['host_allocations']}")
    assert lib["host_allocations"] == stock["host_allocations"] == 1, (stock, lib)


def test_the_staged_copies_are_freed_without_a_collection(tmp_path):
    """With the collector off: once a copying save returned (no views: dcp_views = off; and with
    views on), no staged CPU tensor is alive and nothing is page-locked."""
    for views in ("off", "on"):
        r = trust("no_cycle", True, tmp_path, f"views-{views}", lib_env={"UVMCHUNK_DCP_VIEWS": views})
        print(f"dcp_views = {views}: {r.result['staged_alive']} staged tensors alive, "
              f"{r.result['pinned_after_save']} bytes page-locked after the save")
        assert r.result["staged_alive"] == 0 and r.result["pinned_after_save"] == 0, r.describe()


def test_the_save_async_save_runs_is_recognised(tmp_path):
    """The inner dcp.save of dcp.async_save (PyTorch 2.8: on a plain ThreadPoolExecutor) sets up no
    views and releases nothing of its own; the releases after the async save use the caller's
    tensors' device; the marker does not outlive the async save (a later save takes its view)."""
    r = trust("async_marker", True, tmp_path, "lib")
    res = r.result
    print(f"async_save: inner save viewer {res['inner_viewer']}, releases {res['releases']}")
    assert res["inner_viewer"] is False and res["equal"], r.describe()
    assert res["releases"] and not any(x["in_inner_save"] for x in res["releases"]), r.describe()
    assert all(x["device"] == res["table_device"] for x in res["releases"]), r.describe()
    assert res["pending_after"] == 0 and res["later_views"] == 1, r.describe()


def test_a_table_on_the_device_is_copied_as_stock_does(tmp_path):
    """Two tables with FBGEMM's advice, one prefetched to the device: that one is copied (no view,
    no migration back to the host), the other viewed; both saved exactly."""
    stock = trust("residency", False, tmp_path, "stock").result
    r = trust("residency", True, tmp_path, "lib")
    res = r.result
    print(f"prefetched table: stock migrated {stock['migrations_to_host']} blocks to the host, library "
          f"{res['migrations_to_host']}; viewed {res['viewed']}")
    assert res["prefetch_rc"] == 0 and res["resident_before"] == 1, r.describe()  # 1: UVMSIM_LOC_DEVICE
    assert res["viewed"] == {"host": True}, r.describe()
    assert res["migrations_to_host"] == stock["migrations_to_host"] == 0, r.describe()
    assert all(res["equal"].values()) and all(stock["equal"].values()), r.describe()


TMS_CACHE = os.path.join(tempfile.gettempdir(), "uvmc-torch-memory-saver")  # a pip --target folder


def torch_memory_saver_dir():
    """A folder holding torch-memory-saver (PyPI), never installed into the PyTorch set itself:
    UVMC_TORCH_MEMORY_SAVER, else TMS_CACHE, filled once with `pip install --no-deps --target` (its
    wheel is abi3 with builds for CUDA 12 and 13). Skips when it cannot be fetched."""
    given = os.environ.get("UVMC_TORCH_MEMORY_SAVER")
    if given:
        return given
    if not os.path.isdir(os.path.join(TMS_CACHE, "torch_memory_saver")):
        staging = tempfile.mkdtemp(prefix="uvmc-tms-", dir=tempfile.gettempdir())
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                               "--target", staging, "torch-memory-saver"], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            pytest.skip("torch-memory-saver could not be fetched from PyPI (offline?): set UVMC_TORCH_MEMORY_SAVER "
                        f"to a `pip install --no-deps --target` folder holding it ({proc.stderr.strip()[-200:]})")
        try:
            os.rename(staging, TMS_CACHE)  # atomic: a concurrent run that won keeps its copy
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    return TMS_CACHE


@pytest.mark.parametrize("order", ["uvmchunk_run", "memory_saver_first"])
def test_stacked_with_torch_memory_saver(tmp_path, order):
    """torch-memory-saver's preload library (it interposes cudaMalloc / cudaFree) in LD_PRELOAD with
    libuvmchunk: the job under uvmchunk-run with it already in LD_PRELOAD (libuvmchunk goes first),
    and it first by hand: the same bytes saved and loaded (into CPU tensors and CUDA targets), the
    table still viewed, cudaMalloc bound to its hook and the copies to the library's (its Python
    side finds its .so in LD_PRELOAD split at colons only, so uvmchunk-run writes colons). Its
    pause / resume (a `region`) is not run: it maps memory with CUDA's virtual memory management
    (cuMemGetAllocationGranularity, cuMemCreate, cuMemMap), which the simulator does not implement,
    so only a real device can check them."""
    from conftest import Run, TOP, cuda_major, sim_env
    folder = torch_memory_saver_dir()
    so = os.path.join(folder, f"torch_memory_saver_hook_mode_preload_cu{cuda_major()}.abi3.so")
    if not os.path.exists(so):
        pytest.skip(f"torch-memory-saver in {folder} has no preload build for CUDA {cuda_major()}")
    env = sim_env(True, AUTO)
    lib, *sim = env["LD_PRELOAD"].split()  # libuvmchunk, then the simulated runtime and driver
    env["PYTHONPATH"] += ":" + folder
    body = [TRUST_BODY, "stacked", "--dir", str(tmp_path / order)]
    if order == "uvmchunk_run":  # what the user ran before: the other preload, the runtime
        env["LD_PRELOAD"] = ":".join([so, *sim])
        env["UVMCHUNK_LIB"] = lib
        cmd = [sys.executable, "-c", "from uvmchunk.launcher import main; main()", sys.executable, *body]
    else:
        env["LD_PRELOAD"] = ":".join([so, lib, *sim])
        cmd = [sys.executable, *body]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, cwd=TOP)
    r = Run(proc)
    assert r.rc == 0, r.describe()
    res = r.result
    print(f"{order}: views {res['views']}, cudaMalloc from {res['cuda_malloc']}, cudaMemcpyAsync from "
          f"{res['cuda_memcpy_async']}")
    assert all(res["saved_equal"].values()) and all(res["loaded_equal"].values()), r.describe()
    assert res["views"] == 1 and res["tms_in_region"] == 0, r.describe()
    assert res["cuda_malloc"] == os.path.basename(so) and res["cuda_memcpy_async"] == "libuvmchunk.so", r.describe()
    assert r.stats, r.describe()  # the library's stats line: it ran to the end
