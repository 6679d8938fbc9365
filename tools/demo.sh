#!/usr/bin/env bash
# demo.sh [--compare] [--size BYTES[K|M|G]]: installs what is missing, builds, then shows what the
# library does, on the GPU when one is present, otherwise on the simulated CUDA runtime:
# - with a PyTorch set that tools/setup.sh made (.venv: PyTorch and this package), the whole path:
#   torch.distributed.checkpoint saving one 600 MiB managed table, stock and under uvmchunk-run
#   (integration/checkpoint_job.py, one process under torchrun; about a minute);
# - otherwise the library alone (uvmchunk-demo --compare: DCP's copy of one managed table without
#   and with libuvmchunk.so), and the one command that adds PyTorch.
# With arguments: uvmchunk-demo under uvmchunk-run with them. UVMC_DEMO_SIZE: the PyTorch table's
# size (default 600M, as the README's table).
source "$(dirname "$0")/setup.sh"
# the build is quiet (its output goes to the log) and takes about 30 s the first time
echo "uvmchunk: building into $UVMC_BUILD (about 30 s the first time; log: $UVMC_BUILD.log)"
uvmc_build
sim=true
if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    sim=false
    where="on the GPU"
else
    where="on the simulated CUDA runtime ($UVMC_BUILD/sim; no GPU found)"
fi
if (($#)); then
    $sim && export LD_LIBRARY_PATH="$UVMC_BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    exec "$UVMC_BUILD/uvmchunk-run" -- "$UVMC_BUILD/uvmchunk-demo" "$@"
fi

# A PyTorch set of the project's: a CUDA build of torch and this package in $UVMC_VENV.
py=$UVMC_VENV/bin/python
if [ -x "$py" ] && info=$("$py" -c 'import importlib.metadata as m, sys, torch
m.version("uvmchunk"); print(torch.__version__, torch.version.cuda.split(".")[0])' 2>/dev/null); then
    read -r torch_version cuda_major <<<"$info"
    size=${UVMC_DEMO_SIZE:-600M}
    out=$(mktemp -d "${TMPDIR:-/tmp}/uvmchunk-demo.XXXXXX")
    trap 'rm -rf "$out"' EXIT
    env=(UVMC_MANAGED_ALLOC="$UVMC_BUILD/integration/managed_alloc.so" OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1)
    if $sim; then
        rt=$UVMC_BUILD/sim/libcudart.so.13 ldp=$UVMC_BUILD/sim
        if [ "$cuda_major" = 12 ]; then
            rt=$UVMC_BUILD/sim12/libcudart.so.12 ldp=$UVMC_BUILD/sim12:$UVMC_BUILD/sim
        fi
        env+=(LD_PRELOAD="$rt $UVMC_BUILD/sim/libcuda.so.1" LD_LIBRARY_PATH="$ldp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    fi
    read -r bytes text < <("$py" -c "import sys
s = sys.argv[1]; u = {'K': 10, 'M': 20, 'G': 30}.get(s[-1:].upper()); n = int(s[:-1]) << u if u else int(s)
print(n, f'{n / 2**20:g}MiB')" "$size")
    echo "uvmchunk: PyTorch $torch_version in $UVMC_VENV: dcp.save and dcp.load of one ${text/MiB/ MiB}" \
         "managed table $where, stock and under uvmchunk-run (about a minute)"
    job=("$UVMC_VENV/bin/torchrun" --standalone --nproc_per_node=1 "$UVMC_TOP/integration/checkpoint_job.py" --size "$bytes")
    for run in stock uvmchunk; do
        launch=()
        [ $run = stock ] || launch=("$UVMC_BUILD/uvmchunk-run" --)
        if ! env "${env[@]}" UVMCHUNK_STATS=on "${launch[@]}" "${job[@]}" >"$out/$run.out" 2>"$out/$run.err"; then
            tail -n 20 "$out/$run.err" >&2
            echo "uvmchunk: the $run run failed (above: the end of its output)" >&2
            exit 1
        fi
    done
    rc=0
    "$py" - "$out" <<'EOF' || rc=$?
import json, sys
out = sys.argv[1]
def result(run):
    with open(f"{out}/{run}.out") as f:
        return [json.loads(l[7:]) for l in f if l.startswith("RESULT ")][0]
def size(n):
    if n is None:
        return "n/a (GPU)"
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.3g} {unit}"
        n /= 1024
r = {run: result(run) for run in ("stock", "uvmchunk")}
rows = [("extra host memory of the save", lambda x: size(x["save_extra"])),
        ("page-locked at peak", lambda x: size(x["pinned_locked_peak"])),
        ("left resident after the save", lambda x: size(x["held_after_save"])),
        ("seconds of the save", lambda x: f"{x['save_s']:.2f}"),
        ("reloaded, every byte equal", lambda x: "yes" if x["ok"] else "NO")]
print(f"| {'':30} | {'stock DCP':14} | {'uvmchunk-run':14} |")
print(f"|{'-' * 32}|{'-' * 16}|{'-' * 16}|")
for name, cell in rows:
    print(f"| {name:30} | {cell(r['stock']):14} | {cell(r['uvmchunk']):14} |")
print("Stock DCP copies the whole table into a page-locked block rounded up to a power of two. Under")
print("uvmchunk-run, the uvmchunk package hands DCP the table's own pages (a zero-copy view), so DCP")
print("writes from them; the job's code is unchanged. What the library and the package said:")
sys.exit(0 if all(x["ok"] for x in r.values()) else 1)
EOF
    grep -h '^uvmchunk: ' "$out/uvmchunk.err" || true
    exit $rc
fi

if [ -x "$py" ] && "$py" -c 'import torch' 2>/dev/null; then
    echo "uvmchunk: $UVMC_VENV has PyTorch but not the uvmchunk package: the library alone, $where"
else
    echo "uvmchunk: no PyTorch set of this project ($UVMC_VENV): the library alone, $where"
fi
$sim && export LD_LIBRARY_PATH="$UVMC_BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
UVMCHUNK_STATS=${UVMCHUNK_STATS:-on} "$UVMC_BUILD/uvmchunk-run" -- "$UVMC_BUILD/uvmchunk-demo" --compare || exit
echo "That is the library alone; with PyTorch, its Python package makes DCP write managed tables straight"
echo "from their own pages, about zero extra host memory: to see it, run \`bash tools/setup.sh torch\`"
echo "(about 2 minutes and 7 GB), then \`bash tools/demo.sh\` again."
