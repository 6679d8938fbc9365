"""uvmchunk.dcp's ZeroCopy planners with real PyTorch on the simulator: a save of three managed
tables (FBGEMM's advice) plus other tensors writes straight from the managed pages (peak host
memory about zero, printed beside stock DCP and the preload library), sees a table rewritten on a
side stream just before the save and a view with a storage offset, leaves ordinary CUDA tensors,
managed memory without CPU preference, strided, conjugate and negative views and a second name for
a table (tied weights) to DCP's normal path, reloads bitwise equal with the stock reader and with
the load planner, does nothing without concurrent managed access or without a runtime (one
warning), is harmless under dcp.async_save, works as a mixin over a planner of the older
signature, and works the same under torchrun --nproc_per_node=2 (gloo), DTensor and ShardedTensor
local shards included."""
import sys

from conftest import run_body

MIB = 1 << 20
TABLE = 64 * MIB  # tables of 64, 96 and 128 MiB
VIEWS = 4         # the three tables and the view with a storage offset
LOAD_VIEWS = 5    # on load also no_cpu_pref: its fresh managed target prefers the CPU


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def check(r, res):
    assert all(res["stock_equal"].values()), r.describe()
    assert all(res["planner_equal"].values()), r.describe()
    assert res["strided_taken"] is False, r.describe()


def planner_run(tmp_path, mode, with_lib=False, extra_env=None, name="ckpt"):
    r = run_body("planner", with_lib, "--size", str(TABLE), "--dir", str(tmp_path / name), "--mode", mode,
                 lib_env={"UVMCHUNK_PINNED_THRESHOLD": "32MiB"}, extra_env=extra_env, timeout=600)
    res = r.result
    check(r, res)
    return r, res


def test_planner_against_stock_and_preload(tmp_path):
    _, stock = planner_run(tmp_path, "stock", name="a")
    _, preload = planner_run(tmp_path, "stock", with_lib=True, name="b")
    r, planner = planner_run(tmp_path, "planner", name="c")
    for label, res in (("stock DCP", stock), ("preload library", preload), ("ZeroCopySavePlanner", planner)):
        print(f"{label:22s} tables {res['tables_bytes'] / MIB:.0f} MiB: peak extra host memory "
              f"{res['peak_extra_bytes'] / MIB:.0f} MiB, page-locked peak {res['locked_peak'] / MIB:.0f} MiB")
    assert planner["save_views"] == VIEWS and planner["load_views"] == LOAD_VIEWS, r.describe()
    assert planner["peak_extra_bytes"] <= 64 * MIB, r.describe()
    assert stock["peak_extra_bytes"] > 64 * MIB  # the comparison means something


def test_no_view_without_concurrent_managed_access(tmp_path):
    r, res = planner_run(tmp_path, "planner", extra_env={"UVMSIM_CMA": "0"})
    assert res["save_views"] == 0 and res["load_views"] == 0, r.describe()


def test_says_why_without_concurrent_managed_access(tmp_path):
    """The planners' refusal on such a device is said once, not silent."""
    r = run_body("planner_edges", False, "--dir", str(tmp_path), extra_env={"UVMSIM_CMA": "0"})
    res = r.result
    assert res["views"] == {"tied": 0, "legacy_mixin": 0}, r.describe()
    said = [line for line in r.err.splitlines() if "no concurrent managed access" in line]
    assert len(said) == 1 and said[0].startswith("uvmchunk: ") and res["warnings"] == [], r.describe()


def test_harmless_under_async_save(tmp_path):
    r, res = planner_run(tmp_path, "async")
    assert res["save_views"] == 0, r.describe()  # the staged copies are CPU tensors already


def test_torchrun_two_ranks(tmp_path):
    """Three tables per rank under torchrun: the planner's peak beside stock DCP's and the preload
    library's for the same tables."""
    runs = {}
    for label, mode, with_lib in (("stock DCP", "stock", False), ("preload library", "stock", True),
                                  ("ZeroCopySavePlanner", "planner", False)):
        r = run_body("planner", with_lib, "--size", str(TABLE // 2), "--dir", str(tmp_path / mode / str(with_lib)),
                     "--mode", mode, launcher=TORCHRUN, timeout=600,
                     lib_env={"UVMCHUNK_PINNED_THRESHOLD": "16MiB", "UVMCHUNK_THRESHOLD": "16MiB"})
        assert sorted(x["rank"] for x in r.results) == [0, 1], r.describe()
        for res in r.results:
            check(r, res)
            print(f"{label:22s} rank {res['rank']}: tables {res['tables_bytes'] / MIB:.0f} MiB, peak extra host "
                  f"memory {res['peak_extra_bytes'] / MIB:.0f} MiB, page-locked peak {res['locked_peak'] / MIB:.0f} MiB")
        runs[label] = r
    r = runs["ZeroCopySavePlanner"]
    for res in r.results:
        assert res["save_views"] == VIEWS and res["peak_extra_bytes"] <= 64 * MIB, r.describe()


def test_torchrun_dtensor_and_sharded_tensor_local_shards(tmp_path):
    """A DTensor and a ShardedTensor whose local shards are managed tables (rows of 512 bytes): both
    are saved from their pages, reload bitwise equal with the stock reader and through the load
    planner's views, and the save's peak stays within the bound."""
    r = run_body("planner", False, "--size", str(TABLE // 2), "--dir", str(tmp_path / "ckpt"), "--mode", "planner",
                 "--dtensor", launcher=TORCHRUN, timeout=600)
    assert sorted(x["rank"] for x in r.results) == [0, 1], r.describe()
    for res in r.results:
        check(r, res)
        assert "dtensor" in res["planner_equal"] and "sharded" in res["planner_equal"], r.describe()
        print(f"rank {res['rank']}: peak extra host memory {res['peak_extra_bytes'] / MIB:.0f} MiB, "
              f"views on save {res['save_views']}, on load {res['load_views']}")
        assert res["save_views"] == VIEWS + 2 and res["load_views"] == LOAD_VIEWS + 2, r.describe()
        assert res["peak_extra_bytes"] <= 64 * MIB, r.describe()


def test_views_the_planner_must_not_take(tmp_path):
    """Conjugate and negative views, and a second name for a table already handed out (tied
    weights), take DCP's normal path; the mixin works over a planner of the older signature. The
    process also maps the wheel's own libcudart, which PyTorch never calls: the planner must ask
    the one PyTorch is bound to (the simulated one, preloaded) without being told where it is."""
    r = run_body("planner_edges", False, "--dir", str(tmp_path), extra_env={"UVMC_SIM_DIR": "", "UVMC_SIM_RT_DIR": ""})
    res = r.result
    assert res["taken"] == {"plain": True, "conj": False, "neg": False}, r.describe()
    assert res["views"] == {"tied": 1, "legacy_mixin": 1}, r.describe()
    assert res["warnings"] == [] and "take no view" not in r.err, r.describe()


def test_no_runtime_found_warns_and_takes_no_view(tmp_path):
    """Without a CUDA runtime where PyTorch's calls are bound (here: the planner looks for a function
    no runtime defines) every tensor takes DCP's normal path after one warning, instead of the save
    failing."""
    r = run_body("planner_edges", False, "--dir", str(tmp_path), "--mode", "no-runtime")
    res = r.result
    assert res["taken"]["plain"] is False and res["views"] == {"tied": 0, "legacy_mixin": 0}, r.describe()
    said = [line for line in r.err.splitlines() if "no CUDA runtime" in line]
    assert len(said) == 1 and said[0].startswith("uvmchunk: ") and res["warnings"] == [], r.describe()
