"""The reported stack on the simulator: TorchRec's EmbeddingBagCollection over FBGEMM's
fused_uvm_caching and fused_uvm tables (managed memory FBGEMM allocates, preferred location CPU,
accessed by the device), four tables of different sizes and dimensions sharded table_wise and
row_wise, fused EXACT_ROWWISE_ADAGRAD, under torchrun --nproc_per_node=2 (gloo), as users run it: each
rank on its own simulated device (cuda:LOCAL_RANK, torch.cuda.set_device(LOCAL_RANK)), every local
table and optimizer state of rank r on device r. Each mode saves model
and optimizer state with dcp.save and loads it into zeroed shards, bitwise equal, with ShardedTensor
output and with output_dtensor=True:

- stock: nothing of ours; each rank page-locks a staging copy at least as large as its largest local
  table (the report's mechanism, reproduced);
- preload: the library preloaded; the large copies are split, nothing large is page-locked;
- planner: uvmchunk.dcp's ZeroCopySavePlanner / ZeroCopyLoadPlanner; DCP writes from the pages;
- auto: the library preloaded with the uvmchunk package installed (conftest.pydev_path) and no
  planner argument: the package's automatic views, loaded at `import torch`, take every UVM table
  shard with no code change.

No device code runs (UVMSIM_KERNELS=noop narrowed by KERNELS_ALLOW to the initialisation and cache
flush kernels this job goes without). Prints peak extra host memory and save/load seconds per rank
and mode."""
import importlib.metadata
import os
import re
import sys

import pytest

from conftest import run_body

MIB = 1 << 20
BODY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchrec_body.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
THRESHOLD = 16 * MIB
LIB = {"UVMCHUNK_THRESHOLD": "16MiB", "UVMCHUNK_PINNED_THRESHOLD": "16MiB"}
# The device work TorchRec + FBGEMM launch from DistributedModelParallel's initialisation to
# dcp.load, which this job goes without (substrings of the kernels' demangled names); any other
# launch fails the job. Fill kernels write their value, so the cache state's -1 and zeros stay true.
KERNELS_ALLOW = [
    "FillFunctor",                    # torch.full / zeros / fill_: cache state, optimizer state
    "distribution_elementwise",       # the tables' uniform_ initialisation (torch.nn.init)
    "lxu_cache_flush_kernel",         # state_dict() flushes the (empty) cache into the tables
]
SIM = {"UVMSIM_KERNELS": "noop", "UVMSIM_KERNELS_ALLOW": ",".join(KERNELS_ALLOW), "UVMSIM_REPORT": "1"}


def _torchrec_or_skip():
    """By the installed distributions: importing fbgemm_gpu here (off the simulator) would need a
    real libnvidia-ml.so.1."""
    try:
        importlib.metadata.version("torchrec")
        importlib.metadata.version("fbgemm-gpu")
    except importlib.metadata.PackageNotFoundError as e:
        reason = os.environ.get("UVMC_NO_TORCHREC_REASON") or f"{e} is not installed"
        pytest.skip(f"TorchRec/FBGEMM are not installed in this venv: {reason}")


def pins_whole_tables(r, results):
    """The report's mechanism: DCP's loader copies each whole local table into page-locked memory."""
    for x in results:
        assert x["locked_peak"] >= x["largest_local_table"], r.describe()
    assert not r.stats, r.describe()


def splits_and_locks_nothing(r, results):
    """The library split each rank's large copies (its stats line at exit) and nothing at or above
    the threshold was page-locked."""
    for x in results:
        assert x["locked_peak"] < THRESHOLD, r.describe()
    assert len(r.stats) == 2 and all(s[0] >= 1 for s in r.stats), r.describe()


def from_the_pages(r, results):
    """Every table saved and loaded through its pages: no table-sized host memory, nothing locked;
    the load reads the tables' bytes from the files straight into them (python/uvmchunk/_reads.py),
    so it adds less than a table too."""
    for x in results:
        assert x["save_views"] >= len(x["tables"]) and x["load_views"] >= len(x["tables"]), r.describe()
        assert x["locked_peak"] < THRESHOLD and x["peak_extra_bytes"] < x["largest_local_table"], r.describe()
        assert x["load_peak_extra_bytes"] < x["largest_local_table"], r.describe()


def from_the_pages_and_said(r, results):
    """from_the_pages, and each rank's exit stats line counts the views (interpose/stats.c), so a run
    where the views did the work never reads as zero there."""
    from_the_pages(r, results)
    saved = {int(rank): int(n) for rank, n in
             re.findall(r"uvmchunk: stats: pid \d+, rank (\d+)[^:]*:.*zero-copy views: (\d+) tensors? saved", r.err)}
    assert sorted(saved) == [0, 1], r.describe()
    for x in results:
        assert saved[x["rank"]] >= len(x["tables"]), (saved, r.describe())


# One row per mode: the library preloaded or not (with which settings beyond LIB), and what the mode
# must show beyond bitwise equality. conftest.LIB_ENV turns the automatic views off: preload is the
# library alone.
MODES = {
    "stock": dict(lib=False, check=pins_whole_tables, async_save=True),
    "preload": dict(lib=True, check=splits_and_locks_nothing),
    "planner": dict(lib=False, check=from_the_pages),
    "auto": dict(lib=True, env={"UVMCHUNK_DCP_VIEWS": "on", "UVMCHUNK_ASYNC_MEMORY_BUDGET": "16MiB"},
                 check=from_the_pages_and_said, async_save=True),
}


@pytest.fixture(autouse=True)
def torchrec_installed():
    _torchrec_or_skip()


@pytest.mark.parametrize("mode", list(MODES))
def test_save_load(mode, tmp_path):
    row = MODES[mode]
    r = run_body(None, row["lib"], "--mode", mode, "--dir", str(tmp_path / mode),
                 *(["--async-save"] if row.get("async_save") else []), launcher=TORCHRUN,
                 script=BODY, timeout=900, lib_env=dict(LIB, **row.get("env", {})), extra_env=SIM)
    results = sorted(r.results, key=lambda x: (x["output"], x["rank"]))
    assert sorted((x["output"], x["rank"]) for x in results) == [("dtensor", 0), ("dtensor", 1),
                                                                 ("sharded", 0), ("sharded", 1)], r.describe()
    for x in results:
        print(f"{mode:8s} {x['output']:8s} rank {x['rank']}: largest local table {x['largest_local_table'] / MIB:.0f} MiB, "
              f"peak extra host memory {x['peak_extra_bytes'] / MIB:.0f} MiB, page-locked peak "
              f"{x['locked_peak'] / MIB:.0f} MiB, save {x['save_s']:.2f} s, load {x['load_s']:.2f} s, load peak extra "
              f"{x['load_peak_extra_bytes'] / MIB:.0f} MiB "
              f"(torch {x['torch']})")
        assert x["zeroed"] and x["mismatched"] == [], r.describe()
        assert x["kind"] == {"sharded": "ShardedTensor", "dtensor": "DTensor/LocalShardsWrapper"}[x["output"]], r.describe()
        # one device per rank: the rank's current device holds all its pieces
        assert x["current_device"] == x["rank"] and x["devices"] == [x["rank"]], r.describe()
        # FBGEMM's advice on every table: managed, preferred location CPU, accessed by the rank's device
        assert all(a == [3, -1, [x["rank"]]] for a in x["advice"].values()), (x["advice"], r.describe())
        assert x["largest_local_table"] > THRESHOLD, r.describe()
        assert x["kernels_skipped"] > 0, r.describe()
    row["check"](r, results)
    if row.get("async_save"):
        async_staged(mode, r, results)


def async_staged(mode, r, results):
    """dcp.async_save of the same state (FileSystemWriter as stager) loads back bitwise. Stock
    stages every local table in anonymous memory (about the largest at least; 2.11's DTensor output
    207 MiB for 60 MiB of tables); under the library, with a 16 MiB budget, the managed tables past
    it spill to a file (python/uvmchunk/_spill.py), so the anonymous peak stays below half the
    largest local table."""
    for x in results:
        print(f"{mode:8s} {x['output']:8s} rank {x['rank']}: async_save peak extra anonymous "
              f"{x['async_anon_peak_extra'] / MIB:.0f} MiB, spilled "
              f"{(x['async_spilled'] or 0) / MIB:.0f} MiB, returned {x['async_stall_s']:.2f} s, "
              f"upload done {x['async_upload_s']:.2f} s")
        assert x["async_mismatched"] == [], r.describe()
        if mode == "stock":  # the comparison means something (a sampled peak: a wide margin)
            assert x["async_anon_peak_extra"] >= 3 * x["largest_local_table"] // 4, r.describe()
        else:
            assert x["async_spilled"] >= x["largest_local_table"], r.describe()
            assert x["async_anon_peak_extra"] < x["largest_local_table"] // 2, r.describe()
