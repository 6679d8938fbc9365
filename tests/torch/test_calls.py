"""Each checkpoint call is its own, and ends as stock's ends (calls_body.py, each body run stock:
no preload and TORCH_DEVICE_BACKEND_AUTOLOAD=0; with the package but without the library; and under
the library): a state dict that contains itself raises what stock raises at once, with bounded
memory; an ordinary dcp.save on one thread while another thread's async_save stages gets its own
views, its own report line and holds nothing; the deprecated dcp.save_state_dict /
dcp.load_state_dict get views and report lines as dcp.save / dcp.load do, with stock's bytes and
values."""
import json
import os
import re

import pytest
from conftest import run_body

BODY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls_body.py")
AUTO = {"UVMCHUNK_DCP_VIEWS": "on"}
STOCK = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
MIB = 1 << 20


def calls(body, how, tmp_path, name, *args, lib_env=None):
    """how: "stock", "no library" (the package's hook, no preload) or "library"."""
    d = tmp_path / name
    d.mkdir()
    return run_body(body, how == "library", "--dir", str(d), *args, script=BODY, timeout=300,
                    lib_env=dict(AUTO, **(lib_env or {})), extra_env=STOCK if how == "stock" else None)


@pytest.mark.parametrize("mode", ["save", "async_save", "load"])
def test_a_state_dict_that_contains_itself_fails_as_stock(tmp_path, mode):
    """{"w": managed table, "self": the dict}: stock raises at once (2.11: CheckpointException
    carrying RecursionError; 2.8's async_save: RecursionError); so must the library and the package
    without it, within seconds and a bounded growth (before: both looped, growing ~25 MiB/s, until
    the body's watchdog ended them). async_save with a spill budget of 0 takes the spill's walk."""
    stock = calls("cycle", "stock", tmp_path, "stock", "--mode", mode).result
    assert not stock["hung"] and stock["raised"], stock
    hows = ("no library", "library") if mode == "save" else ("library",)
    for how in hows:
        r = calls("cycle", how, tmp_path, how.replace(" ", "_"), "--mode", mode,
                  lib_env={"UVMCHUNK_ASYNC_MEMORY_BUDGET": "0"})
        res = r.result
        print(f"{mode}: stock raised {stock['raised']} {stock['inner']} in {stock['seconds']:.2f} s; {how}: "
              f"{'hung' if res['hung'] else 'raised ' + str(res['raised'])} {res.get('inner')} in "
              f"{res['seconds']:.2f} s, +{res['grown'] / MIB:.0f} MiB")
        assert not res["hung"], r.describe()
        assert (res["raised"], res["inner"]) == (stock["raised"], stock["inner"]), r.describe()
        assert res["grown"] <= stock["grown"] + 32 * MIB, r.describe()
        assert "cannot reserve" not in r.err, r.describe()  # the spill staged nothing for it


def test_threads_are_separate_calls(tmp_path):
    """Thread A's dcp.async_save (checkpoint_id only) is still staging while thread B's ordinary
    dcp.save of a 64 MiB managed table runs. B's save is its own call: its view, its own line and
    record, nothing page-locked after it; A's record reports no block of B's. Before: B's save was
    taken for A's inner save (no view, 64 MiB page-locked held, no line; A's line said "64 MiB of
    page-locked blocks"), and A's real inner save got a line of its own."""
    stock = calls("threads", "stock", tmp_path, "stock").result
    report = tmp_path / "report.jsonl"
    r = calls("threads", "library", tmp_path, "lib", lib_env={"UVMCHUNK_REPORT": str(report)})
    res = r.result
    with open(report) as f:
        recs = [json.loads(line) for line in f]
    saves = [x for x in recs if x["call"] == "dcp.save"]
    asyncs = [x for x in recs if x["call"] == "dcp.async_save"]
    print(f"stock: B's save left {stock['b_pinned_after'] / MIB:.0f} MiB page-locked; library: B's save "
          f"{res['b_views']} view, {res['b_pinned_after'] / MIB:.0f} MiB page-locked after, records "
          f"{[(x['call'], os.path.basename(x.get('store', ''))) for x in recs]}")
    assert res["staging_seen"] and res["b_staging_still"], r.describe()  # the two calls overlapped
    assert all(res["equal"].values()) and all(stock["equal"].values()), r.describe()
    assert res["b_views"] == 1 and res["b_pinned_after"] == 0 and res["pinned_after_both"] == 0, r.describe()
    assert len(saves) == 1 and saves[0]["store"].endswith("/b") and saves[0]["view_tensors"] == 1, recs
    assert len(re.findall(r"^uvmchunk: rank 0 dcp\.save .*/b$", r.err, re.M)) == 1, r.describe()
    assert len(asyncs) == 1 and asyncs[0]["store"].endswith("/a"), recs
    assert not asyncs[0].get("copied_pinned_bytes"), asyncs[0]  # B's save page-locked nothing


def test_the_deprecated_save_state_dict_and_load_state_dict(tmp_path):
    """dcp.save_state_dict / dcp.load_state_dict, storage passed positionally: under the library
    each gets its views (two tables each way) and its report line, with stock's file bytes and
    values. Before: no view, no line (they reach DCP without dcp.save / dcp.load)."""
    stock = calls("deprecated", "stock", tmp_path, "stock").result
    r = calls("deprecated", "library", tmp_path, "lib")
    res = r.result
    lines = re.findall(r"^uvmchunk: rank 0 dcp\.(?:save|load)_state_dict .*$", r.err, re.M)
    print(f"stock views {stock['save_views']}/{stock['load_views']}; library {res['save_views']}/"
          f"{res['load_views']}; lines {lines}")
    assert all(res["equal"].values()) and all(stock["equal"].values()), r.describe()
    assert res["files"] == stock["files"] and res["files"], r.describe()
    assert res["save_views"] == 2 and res["load_views"] == 2, r.describe()
    assert len(lines) == 2 and "2 managed tables' pages" in lines[0] and " from " in lines[1], r.describe()
