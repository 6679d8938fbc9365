"""The README's shell recipes, run as written (CTest `readme_recipes`, so CI runs them): every ```sh
block of README.md, in order, with `bash -e` in the checkout's root, the venv the tests use first on
PATH (its `pip`, `python`, `torchrun`, `uvmchunk-run`; UVMC_VENV and UVMC_BUILD name it and the
build, so the demo uses them and installs nothing). There is no GPU here: a block written for one
(marked `<!-- gpu -->` on the line before it) runs on the simulated CUDA runtime, in the environment
the README's "Try it without a GPU" exports, so the simulator's libraries are already in LD_PRELOAD
as a user of the simulator has them: a recipe that replaced LD_PRELOAD instead of keeping it would
load the wheel's own CUDA runtime and fail (CUDA error 36). Before anything runs, every line that
sets LD_PRELOAD must keep what was there (name $LD_PRELOAD). `bash tools/test.sh` is not run again
(it is what runs this). Exit 77 (skipped) when the venv has no PyTorch.

usage: test_readme.py README BUILD"""
import os
import re
import subprocess
import sys

NOT_RUN = {"bash tools/test.sh": "the command that runs this test"}


def blocks(text: str) -> list[tuple[bool, str]]:
    """(written for a GPU, the block's text) for every sh block."""
    return [(bool(gpu), body) for gpu, body in
            re.findall(r"^(<!-- gpu -->\n)?```sh\n(.*?)^```", text, flags=re.S | re.M)]


def preload_kept(text: str) -> list[str]:
    """The sh blocks' lines that set LD_PRELOAD without keeping what it held (none is right)."""
    return [line for _, body in blocks(text) for line in body.splitlines()
            if re.search(r"\bLD_PRELOAD=", line) and not re.search(r"\$\{?LD_PRELOAD\b", line)]


def main() -> int:
    readme, build = sys.argv[1], sys.argv[2]
    top = os.path.dirname(os.path.abspath(readme))
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"SKIP: PyTorch is not importable in {sys.executable} ({e}); run tools/test.sh")
        return 77
    text = open(readme).read()
    replaced = preload_kept(text)
    for line in replaced:
        print(f"FAILED: a README recipe replaces LD_PRELOAD instead of keeping what it held: {line}")
    if replaced:
        return 1
    sim = os.path.join(build, "sim")
    env = {k: v for k, v in os.environ.items() if not k.startswith("UVMCHUNK_")}
    env["PATH"] = os.path.dirname(sys.executable) + ":" + os.environ.get("PATH", "")
    env["UVMC_BUILD"] = os.path.abspath(build)
    if sys.prefix != sys.base_prefix:  # a venv: the demo's PyTorch set
        env["UVMC_VENV"] = sys.prefix
    simulated = dict(env, LD_LIBRARY_PATH=sim, LD_PRELOAD=f"{sim}/libcudart.so.13 {sim}/libcuda.so.1",
                     UVMSIM_KERNELS="noop")
    for i, (gpu, block) in enumerate(blocks(text), 1):
        lines = []
        for line in block.splitlines():
            skipped = next((why for cmd, why in NOT_RUN.items() if line.startswith(cmd)), None)
            print(f"--- block {i}: {'(not run: ' + skipped + ') ' if skipped else ''}{line}", flush=True)
            if not skipped:
                lines.append(line)
        r = subprocess.run(["bash", "-e", "-c", "\n".join(lines)], cwd=top, env=simulated if gpu else env,
                           timeout=1200)
        if r.returncode != 0:
            print(f"FAILED: README block {i} exited {r.returncode}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
