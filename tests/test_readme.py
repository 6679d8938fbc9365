"""The README's shell recipes, run as written (CTest `readme_recipes`, so CI runs them): every ```sh
block of README.md, in order, with `bash -e` in the checkout's root, the venv the tests use first on
PATH (its `pip`, `python`, `torchrun`, `uvmchunk-run`; UVMC_VENV and UVMC_BUILD name it and the
build, so the demo uses them and installs nothing). There is no GPU here: a block written for one
(marked `<!-- gpu -->` on the line before it) runs on the simulated CUDA runtime, in the environment
the README's "Try it without a GPU" exports, so the simulator's libraries are already in LD_PRELOAD
as a user of the simulator has them: a recipe that replaced LD_PRELOAD instead of keeping it would
load the wheel's own CUDA runtime and fail (CUDA error 36). Before anything runs, every line that
sets LD_PRELOAD must keep what was there (name $LD_PRELOAD). `bash tools/test.sh` is not run again
(it is what runs this). A block marked `<!-- s3 -->` (README "Checkpoint to S3") runs on the
simulated runtime too, with the one variable that README says points the clients at a local S3
server, AWS_ENDPOINT_URL, set to a moto server this test starts on 127.0.0.1 (the bucket
my-bucket made, moto's test credentials); where moto or a client is missing, that block is skipped
and said (under CI=true on the first PyTorch set it fails instead, as tests/torch/s3_server.py does). Exit 77 (skipped) when the venv has no PyTorch.

Before any recipe (and alone with --shape, CTest `readme_shape`, which needs neither PyTorch nor a
build) it checks the README's shape: at most MAX_WORDS words (a README read in ten minutes; the
rest lives in docs/), and every relative link of README.md and docs/*.md, and every path of this
checkout quoted in them, resolves (a file that exists; an anchor that one of its headings makes).

usage: test_readme.py README BUILD
       test_readme.py --shape README"""
import os
import re
import subprocess
import sys

NOT_RUN = {"bash tools/test.sh": "the command that runs this test"}
MAX_WORDS = 2500  # words as `wc -w` counts them
# Top-level folders of this checkout: a `quoted/path` starting with one must exist.
CHECKOUT_DIRS = ("config", "docs", "examples", "integration", "interpose", "python", "tests", "tools")


def words(text: str) -> int:
    """Whitespace-separated words, as `wc -w` counts them."""
    return len(text.split())


def slug(heading: str) -> str:
    """The anchor GitHub makes for a heading: lower case, punctuation but `-` and `_` dropped,
    spaces to `-` (github/cmark-gfm's anchor filter, as rendered READMEs show it)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: str) -> set[str]:
    """The anchors of a Markdown file's headings (outside fenced blocks)."""
    text = re.sub(r"^```.*?^```", "", open(path).read(), flags=re.S | re.M)
    return {slug(h) for h in re.findall(r"^#+ (.*)$", text, flags=re.M)}


def broken_links(paths: list[str], top: str) -> list[str]:
    """'file: target (why)' for each relative Markdown link in `paths` whose file or anchor does
    not exist, and each `quoted/path` under one of CHECKOUT_DIRS that is not in the checkout `top`."""
    bad = []
    for path in paths:
        text = open(path).read()
        prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        name = os.path.relpath(path, top)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if not os.path.exists(resolved):
                bad.append(f"{name}: {target} (no such file)")
            elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                bad.append(f"{name}: {target} (no heading makes #{anchor})")
        for quoted in re.findall(r"`((?:%s)/[\w./-]*)`" % "|".join(CHECKOUT_DIRS), prose):
            if not os.path.exists(os.path.join(top, quoted)):
                bad.append(f"{name}: `{quoted}` (not in the checkout)")
    return bad


def shape(readme: str) -> list[str]:
    """What is wrong with the README's shape: its length, and links or paths of it and docs/*.md
    that do not resolve."""
    top = os.path.dirname(os.path.abspath(readme))
    text = open(readme).read()
    wrong = []
    if words(text) > MAX_WORDS:
        wrong.append(f"README.md has {words(text)} words, more than {MAX_WORDS}: move detail to docs/")
    # which Python the clients go into (issue 40.6): said in the S3 section, with the .venv form once
    s3 = text.split("## Checkpoint to S3", 1)[-1].split("\n## ", 1)[0]
    if "environment the job runs in" not in s3 or ".venv/bin/pip install s3fs 's3torchconnector[dcp]'" not in s3:
        wrong.append("README.md's S3 section does not say which Python the clients go into "
                     "(the job's environment, and the .venv/bin/pip form once)")
    docs = os.path.join(top, "docs")
    pages = sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md")) if os.path.isdir(docs) else []
    wrong += [f"a link or path that does not resolve: {b}" for b in broken_links([os.path.abspath(readme)] + pages, top)]
    return wrong


def blocks(text: str) -> list[tuple[str, str]]:
    """(its mark: "gpu", "s3" or "", the block's text) for every sh block."""
    return re.findall(r"^(?:<!-- (gpu|s3) -->\n)?```sh\n(.*?)^```", text, flags=re.S | re.M)


def s3_server(env: dict) -> tuple[object, dict]:
    """moto's S3 server on a free port of 127.0.0.1 with the bucket my-bucket: (its process, `env`
    with AWS_ENDPOINT_URL and test credentials); (None, why) where moto or a client is missing."""
    import importlib.util
    import socket
    import time
    import urllib.request
    absent = [m for m in ("moto", "flask", "s3fs", "s3torchconnector") if importlib.util.find_spec(m) is None]
    if absent:
        return None, {"why": f"{' '.join(absent)} not installed in {sys.executable}"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(urllib.request.Request(f"{url}/my-bucket", method="PUT"), timeout=2).close()
            break
        except OSError:
            time.sleep(0.2)
    return proc, dict(env, AWS_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                      AWS_DEFAULT_REGION="us-east-1")


def preload_kept(text: str) -> list[str]:
    """The sh blocks' lines that set LD_PRELOAD without keeping what it held (none is right)."""
    return [line for _, body in blocks(text) for line in body.splitlines()
            if re.search(r"\bLD_PRELOAD=", line) and not re.search(r"\$\{?LD_PRELOAD\b", line)]


def main() -> int:
    if sys.argv[1] == "--shape":
        wrong = shape(sys.argv[2])
        for w in wrong:
            print(f"FAILED: {w}")
        return 1 if wrong else 0
    readme, build = sys.argv[1], sys.argv[2]
    top = os.path.dirname(os.path.abspath(readme))
    wrong = shape(readme)
    for w in wrong:
        print(f"FAILED: {w}")
    if wrong:
        return 1
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
    for i, (mark, block) in enumerate(blocks(text), 1):
        server = None
        if mark == "s3":
            server, s3_env = s3_server(simulated)
            if server is None:
                if os.environ.get("CI") == "true" and not os.environ.get("UVMC_TORCH_PYTHON"):
                    print(f"FAILED: README block {i}: {s3_env['why']} (the first PyTorch set must have them in CI)")
                    return 1
                print(f"--- block {i}: skipped ({s3_env['why']})")
                continue
        lines = []
        for line in block.splitlines():
            skipped = next((why for cmd, why in NOT_RUN.items() if line.startswith(cmd)), None)
            print(f"--- block {i}: {'(not run: ' + skipped + ') ' if skipped else ''}{line}", flush=True)
            if not skipped:
                lines.append(line)
        try:
            r = subprocess.run(["bash", "-e", "-c", "\n".join(lines)], cwd=top, timeout=1200,
                               env=s3_env if server else simulated if mark == "gpu" else env)
        finally:
            if server is not None:
                server.terminate()
                server.wait()
        if r.returncode != 0:
            print(f"FAILED: README block {i} exited {r.returncode}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
