"""PyTorch's CUDA wheel binds to the simulated runtime, not to its own libcudart.so.13, and sees an
eight-GPU machine (UVMSIM_DEVICES' default); a kernel launch fails with a clear error and leaves
nothing sticky. Off the simulator, on this machine without a GPU, the TorchRec example says so in one
line before importing TorchRec."""
import os
import subprocess
import sys

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


EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torchrec_checkpoint.py")
# Runs the example as __main__, then says whether TorchRec or FBGEMM got imported before it exited.
RUN_EXAMPLE = ("import runpy, sys\nsys.argv = [sys.argv[1], '--dir', sys.argv[2]]\n"
               "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
               "finally:\n    print('imported', 'torchrec' in sys.modules or 'fbgemm_gpu' in sys.modules)\n")


def test_example_without_a_cuda_device_says_so_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH") and not k.startswith(("UVMSIM_", "UVMCHUNK_"))}
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           env=env, capture_output=True, text=True, timeout=120)
    if probe.stdout.strip() != "False":
        pytest.skip(f"a CUDA device is here without the simulator: {probe.stdout.strip()} {probe.stderr[-200:]}")
    r = subprocess.run([sys.executable, "-c", RUN_EXAMPLE, EXAMPLE, str(tmp_path / "ckpt")], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("uvmchunk: ") and "no CUDA device here" in lines[0], r.stderr
    assert r.stdout.strip() == "imported False", r.stdout
