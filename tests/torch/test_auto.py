"""Zero-copy views with no code change (python/uvmchunk/_autoload.py): the unchanged job under the
preload library, with this tree's package installed (conftest.pydev_path), takes the planners'
views through PyTorch's backend autoload, and holds nothing after a save. Printed beside the
explicit planner and the preload library alone (dcp_views = off); peak and after-save resident
memory of `auto` within the planner's. Also: a planner of the user's own that derives from
DefaultSavePlanner gets the views, one that overrides resolve_data is left untouched (said once), a
small view of a table listed before the table leaves the table on the view path,
TORCH_DEVICE_BACKEND_AUTOLOAD=0 and dcp_views = off fall back cleanly, async_save locks nothing,
and page-locked memory in use survives the release after a save."""
import sys

from conftest import run_body

MIB = 1 << 20
TABLE = 64 * MIB  # tables of 64, 96 and 128 MiB per process
VIEWS = 4         # the three tables and the view with a storage offset (as test_planner.py)
LOAD_VIEWS = 5    # on load also no_cpu_pref: its fresh managed target prefers the CPU
AUTO = {"UVMCHUNK_DCP_VIEWS": "on", "UVMCHUNK_PINNED_THRESHOLD": "32MiB"}
OFF = {"UVMCHUNK_DCP_VIEWS": "off", "UVMCHUNK_PINNED_THRESHOLD": "32MiB"}
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def planner_run(tmp_path, name, mode, with_lib, lib_env=None, extra_env=None, size=TABLE, launcher=None):
    r = run_body("planner", with_lib, "--size", str(size), "--dir", str(tmp_path / name), "--mode", mode,
                 lib_env=lib_env, extra_env=extra_env, launcher=launcher, timeout=600)
    for res in r.results:
        assert all(res["stock_equal"].values()) and all(res["planner_equal"].values()), r.describe()
    return r


def show(label, res):
    print(f"{label:34s} rank {res['rank']}: tables {res['tables_bytes'] / MIB:.0f} MiB, peak extra "
          f"{res['peak_extra_bytes'] / MIB:.0f} MiB, after save {res['kept_after_save_bytes'] / MIB:+.0f} MiB, "
          f"page-locked peak {res['locked_peak'] / MIB:.0f} MiB / after save {res['locked_after_save'] / MIB:.0f} MiB, "
          f"views {res['save_views']} saved {res['load_views']} loaded")


def test_auto_matches_the_planner_and_holds_nothing(tmp_path):
    runs = {
        "stock DCP": planner_run(tmp_path, "a", "stock", False),
        "preload library (dcp_views = off)": planner_run(tmp_path, "b", "stock", True, OFF),
        "ZeroCopySavePlanner": planner_run(tmp_path, "c", "planner", False),
        "auto (uvmchunk-run, no code change)": planner_run(tmp_path, "d", "auto", True, AUTO),
    }
    for label, r in runs.items():
        show(label, r.result)
    auto, planner, off = (runs[k].result for k in ("auto (uvmchunk-run, no code change)", "ZeroCopySavePlanner",
                                                    "preload library (dcp_views = off)"))
    r = runs["auto (uvmchunk-run, no code change)"]
    assert auto["save_views"] == VIEWS and auto["load_views"] == LOAD_VIEWS, r.describe()
    assert auto["peak_extra_bytes"] <= max(planner["peak_extra_bytes"] * 1.05, 64 * MIB), r.describe()
    assert auto["kept_after_save_bytes"] <= 64 * MIB and auto["locked_after_save"] == 0, r.describe()
    # without views the save copies, but nothing is held once it returned either
    assert off["save_views"] == 0 and off["peak_extra_bytes"] > 64 * MIB, runs["preload library (dcp_views = off)"].describe()
    assert off["kept_after_save_bytes"] <= 64 * MIB, runs["preload library (dcp_views = off)"].describe()


def test_no_views_when_switched_off(tmp_path):
    """TORCH_DEVICE_BACKEND_AUTOLOAD=0 and dcp_views = off: the save takes the preload library's copy
    path (split copies), reloads equal, and says nothing; enabled = off: no views either."""
    for name, lib_env, extra in (("autoload0", AUTO, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}), ("off", OFF, None)):
        r = planner_run(tmp_path, name, "auto", True, lib_env, extra)
        res = r.result
        assert res["save_views"] == 0 and res["load_views"] == 0, r.describe()
        assert r.stats and r.stats[-1][0] >= 1, r.describe()  # the copies were split instead
        assert "Traceback" not in r.err, r.describe()
    # enabled = off passes everything through, the package's views included
    r = planner_run(tmp_path, "disabled", "auto", True, dict(AUTO, UVMCHUNK_ENABLED="off"))
    assert r.result["save_views"] == 0 and r.result["load_views"] == 0, r.describe()


def test_auto_async_save_locks_nothing(tmp_path):
    """dcp.async_save stages a full copy (a view would be torn while training goes on): no view, the
    staging copy served lazily, nothing locked, nothing held after the staging completed."""
    r = planner_run(tmp_path, "async", "auto_async", True, AUTO)
    res = r.result
    show("auto, dcp.async_save", res)
    assert res["save_views"] == 0, r.describe()
    assert res["locked_peak"] < 64 * MIB and res["locked_after_save"] == 0, r.describe()


def test_auto_edges(tmp_path):
    r = run_body("auto_edges", True, "--dir", str(tmp_path), lib_env=dict(AUTO, UVMCHUNK_LOG_LEVEL="info"))
    res = r.result
    assert res["own_subclass_views"] == 1, r.describe()          # DefaultSavePlanner subclass: viewed
    assert res["overriding_views"] == 0, r.describe()            # overrides resolve_data: untouched
    assert r.err.count("Overriding overrides resolve_data") == 1, r.describe()  # said once
    assert res["small_first"] == {"table": True, "a_small_view": False}, r.describe()
    assert res["reload_equal"] is True, r.describe()
    assert res["pinned_in_use_survives"] is True, r.describe()
    assert res["keywords_views"] == 0 and res["committing_views"] == 0, r.describe()
    assert res["commit_equal"] is True, r.describe()
    assert r.err.count("Committing overrides commit_tensor") == 1, r.describe()
    assert r.err.count("OtherStorage is not PyTorch's FileSystemWriter") == 1, r.describe()


def test_torchrun_two_ranks_auto(tmp_path):
    """Unchanged job under torchrun: every rank's tables saved from their pages."""
    r = planner_run(tmp_path, "tr", "auto", True, dict(AUTO, UVMCHUNK_THRESHOLD="16MiB", UVMCHUNK_PINNED_THRESHOLD="16MiB"),
                    size=TABLE // 2, launcher=TORCHRUN)
    assert sorted(x["rank"] for x in r.results) == [0, 1], r.describe()
    for res in r.results:
        show("auto under torchrun", res)
        assert res["save_views"] == VIEWS and res["peak_extra_bytes"] <= 64 * MIB, r.describe()
        assert res["kept_after_save_bytes"] <= 64 * MIB, r.describe()


def test_a_python_without_the_hook_says_so_once(tmp_path):
    """The library preloaded into a Python with PyTorch but without the package's hook (here: a
    uvmchunk distribution with no entry points first on the path): one warning per process, at the
    first split copy, and the save takes the copy path. With the hook, with dcp_views = off, and
    with TORCH_DEVICE_BACKEND_AUTOLOAD=0 (said at info level only): no warning."""
    from conftest import pydev_path
    line = "has PyTorch but not the uvmchunk package's hook"
    no_hook = {"PYTHONPATH": pydev_path(hook=False)}
    r = planner_run(tmp_path, "nohook", "auto", True, AUTO, no_hook)
    assert r.err.count(line) == 1 and r.result["save_views"] == 0, r.describe()
    for name, lib_env, extra in (("hook", AUTO, None), ("off", OFF, no_hook),
                                 ("autoload0", AUTO, dict(no_hook, TORCH_DEVICE_BACKEND_AUTOLOAD="0"))):
        r = planner_run(tmp_path, name, "auto", True, lib_env, extra)
        assert line not in r.err, r.describe()
