"""PyTorch's CUDA wheel binds to the simulated runtime, not to its own libcudart.so.13, and sees a
single-GPU machine; a kernel launch fails with a clear error and leaves nothing sticky."""
import os

import pytest

from conftest import run_body, sim_runtime


@pytest.mark.parametrize("with_lib", [False, True], ids=["plain", "uvmchunk"])
def test_torch_runs_on_the_simulator(with_lib):
    r = run_body("bind", with_lib)
    res = r.result
    sim = os.path.realpath(os.environ["UVMC_SIM_DIR"])
    rt_dir, rt = sim_runtime()
    assert res["available"] is True and res["count"] == 8, r.describe()  # UVMSIM_DEVICES' default
    # 12.8 (torch 2.8), 13.0 (2.11) or 13.2 (2.15): bound to our libcudart of the same major
    assert res["torch_cuda"].split(".")[0] == rt.rsplit(".", 1)[1] and res["major"] == 9, r.describe()
    # the simulator's runtime is loaded (first, by its SONAME) and answers torch's calls: its
    # counters move when torch allocates device memory
    assert f"{os.path.realpath(rt_dir)}/{rt}" in res["cudart"], r.describe()
    assert res["cudamalloc_after"] == res["cudamalloc_before"] + 1, r.describe()
    # torch's own preloading (torch/__init__.py _preload_cuda_deps) may map the wheel's runtime
    # as a private RTLD_LOCAL copy; nothing binds to it. The only driver is the simulated one.
    assert res["cuda"] == [f"{sim}/libcuda.so.1"], r.describe()
    # a kernel launch fails, clearly, and the process goes on
    assert res["launch_error"] and "operation not supported" in res["launch_error"], r.describe()
    assert "uvmsim: kernel launch" in r.err and "is not simulated" in r.err, r.describe()
    assert res["ok_after_launch"] is True, r.describe()
    if with_lib:
        assert r.stats and r.stats[-1][0] == 0, r.describe()
    else:
        assert not r.stats, r.describe()


def test_random_kernel_fails_clearly_not_with_a_signal():
    """torch.empty(100, device="cuda").uniform_(): PyTorch sizes the random kernel's grid from the
    device properties (multiprocessors x threads per multiprocessor) before launching it; with H200-like
    properties the launch is reached and fails with the simulator's clear error."""
    r = run_body("random", False)
    res = r.result
    assert res["multi_processor_count"] == 132 and res["max_threads_per_multi_processor"] == 2048, r.describe()
    assert res["error"] and "operation not supported" in res["error"], r.describe()
    assert "uvmsim: kernel launch" in r.err and "is not simulated" in r.err, r.describe()
