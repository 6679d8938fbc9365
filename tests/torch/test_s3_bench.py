"""The S3 benchmark: moto behind throttle.py (each connection limited as S3 limits it, 8 MiB/s and
2 ms by default), a managed table saved and loaded with dcp.save / dcp.load stock and under the
library through each client, beside the client's own fastest transfer of the same bytes (s3fs's
pipe_file and cat_ranges, the connector's put_object and get_object; s3_body.raw_transfers), and
dcp.async_save's upload of the table and 64 MiB of dense CUDA memory (test_s3_async.py's body, spill
budget 64 MiB) stock and under the library. Figures printed, with their ratios; never asserted as
times. UVMC_S3_BENCH=1: the full run (256 and 768 MiB, async_save included); otherwise a smoke of
a few seconds (4 MiB, no async_save) that asserts only bitwise equality and a memory bound with a
wide margin. UVMC_S3_BENCH_RATE / UVMC_S3_BENCH_DELAY set the throttle,
UVMC_S3_BENCH_CONCURRENCY the library's s3_concurrency (its default otherwise),
UVMC_S3_BENCH_READER_PART_MIB the part size of the connector's reading client (stock's, the
library's and its own get_object alike; its 8 MiB otherwise), UVMC_S3_BENCH_REPEAT how many times
the library's load and the client's own download run, one after the other (the median printed, each
run's seconds beside it; stock's load runs once: the client's own download varied by a third from
run to run here)."""
import os

import pytest

import test_s3_async
import throttle
from s3_server import need, server  # noqa: F401  (server: a fixture)
from test_s3 import CLIENTS, MIB, s3_run

FULL = os.environ.get("UVMC_S3_BENCH") == "1"
# UVMC_S3_BENCH_MIB=256: the full run at those sizes only (MiB, comma-separated)
SIZES = (tuple(int(m) * MIB for m in os.environ.get("UVMC_S3_BENCH_MIB", "256,768").split(","))
         if FULL else (4 * MIB,))


@pytest.fixture(scope="module")
def throttled(server):
    rate = float(os.environ.get("UVMC_S3_BENCH_RATE", throttle.DEFAULT_RATE))
    delay = float(os.environ.get("UVMC_S3_BENCH_DELAY", throttle.DEFAULT_DELAY))
    proc, url = throttle.start(server, rate, delay)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait()


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_bench(throttled, client, tmp_path):
    """Stock, the library and the client's own transfer of the same bytes, save and load."""
    if not FULL and os.environ.get("UVMC_TORCH_PYTHON"):
        pytest.skip("the smoke runs with the first PyTorch set only (CI time); UVMC_S3_BENCH=1 runs it anywhere")
    need(CLIENTS[client])
    for size in SIZES:
        _, stock = s3_run(throttled, client, "stock", size, f"bench-stock-{size // MIB}")
        conc = os.environ.get("UVMC_S3_BENCH_CONCURRENCY")
        lib_env = {"UVMCHUNK_S3_CONCURRENCY": conc} if conc else None
        _, lib = s3_run(throttled, client, "auto", size, f"bench-lib-{size // MIB}", raw_upload=True,
                        lib_env=lib_env, repeat=int(os.environ.get("UVMC_S3_BENCH_REPEAT", "1")))
        own = ("pipe_file", "cat_ranges") if client == "s3fs" else ("put_object", "get_object")
        line = [f"bench {client} {size // MIB} MiB:"]
        for side, raw, name in (("save", "raw_up_s", own[0]), ("load", "raw_s", own[1])):
            ours, theirs, st = lib[f"{side}_s"], lib[raw], stock[f"{side}_s"]
            line.append(f"{side} stock {st:.2f} s, library {ours:.2f} s (+{lib[f'{side}_peak_extra'] / MIB:.0f} MiB), "
                        f"{name} {theirs:.2f} s: {ours / theirs:.2f}x own, {ours / st:.2f}x stock;")
        if len(lib["load_all"]) > 1:
            line.append(f"load runs: library {', '.join(f'{x:.2f}' for x in lib['load_all'])} s, "
                        f"{own[1]} {', '.join(f'{x:.2f}' for x in lib['raw_all'])} s;")
        print(" ".join(line))
        assert lib["equal"] and stock["equal"], (stock, lib)
        # wide: a bound on what the library's save and load hold, not a figure to reach
        assert lib["save_peak_extra"] <= 256 * MIB and lib["load_peak_extra"] <= 256 * MIB, lib
        if FULL:  # a smoke has no time for it: torch_s3_async runs the same body against moto
            _, st = test_s3_async.run(throttled, False, tmp_path, f"bench-async-stock-{size // MIB}", size, client)
            _, ours = test_s3_async.run(throttled, True, tmp_path, f"bench-async-lib-{size // MIB}", size, client,
                                        lib_env)
            print(f"bench {client} {size // MIB} MiB + 64 MiB dense: async_save upload stock {st['upload_s']:.2f} s "
                  f"(+{st['peak_anon_extra'] / MIB:.0f} MiB anonymous), library {ours['upload_s']:.2f} s "
                  f"(+{ours['peak_anon_extra'] / MIB:.0f} MiB): {ours['upload_s'] / st['upload_s']:.2f}x stock")
