#!/usr/bin/env bash
# demo.sh [--no-torch] [--compare] [--size BYTES[K|M|G]]: installs what is missing, builds, then
# shows what the library does, on the GPU when one is present, otherwise on the simulated CUDA
# runtime, and says which:
# - torch.distributed.checkpoint saving and loading one 512 MiB managed table, stock (the same job
#   without libuvmchunk) and under uvmchunk-run (integration/checkpoint_job.py, one process under
#   torchrun; its own figures, put side by side by integration/demo_table.py). The PyTorch set it
#   needs (PyTorch, FBGEMM, TorchRec and this package, in .venv) is installed first when .venv has
#   none (tools/setup.sh; it says how much disk and how long before it starts);
# - with --no-torch (or UVMC_NO_TORCH=1), or when that install fails (exit 1 then), the library alone (uvmchunk-demo --compare: DCP's
#   copy of one managed table without and with libuvmchunk.so).
# With other arguments: uvmchunk-demo under uvmchunk-run with them. UVMC_DEMO_SIZE: the PyTorch
# table's size (default 512M).
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
no_torch=false
[ "${UVMC_NO_TORCH:-}" = 1 ] && no_torch=true  # tools/setup.sh's switch: no PyTorch installed
if [ "${1:-}" = --no-torch ]; then
    no_torch=true
    shift
fi
if (($#)); then
    $sim && export LD_LIBRARY_PATH="$UVMC_BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    exec "$UVMC_BUILD/uvmchunk-run" -- "$UVMC_BUILD/uvmchunk-demo" "$@"
fi

# The library alone: uvmchunk-demo --compare, and what the PyTorch path adds ($1: why; then exit
# with $2: 1 after a failed install, so a script that wanted the PyTorch path notices).
library_alone() {
    echo "uvmchunk: $1: the library alone, $where"
    $sim && export LD_LIBRARY_PATH="$UVMC_BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    UVMCHUNK_STATS=${UVMCHUNK_STATS:-on} "$UVMC_BUILD/uvmchunk-run" -- "$UVMC_BUILD/uvmchunk-demo" --compare || exit
    echo "That is the library alone; with PyTorch, its Python package makes DCP write managed tables straight"
    echo "from their own pages, about zero extra host memory: \`bash tools/demo.sh\` (without --no-torch)"
    echo "installs the PyTorch set and shows it."
    exit "$2"
}
$no_torch && library_alone "--no-torch" 0

# The PyTorch set of the project's: a CUDA build of torch (its FBGEMM / TorchRec pair) and this
# package in $UVMC_VENV; installed here when there is none (figures: a fresh Debian 12 machine,
# 2026-12-05, tools/setup.sh's own lines).
py=$UVMC_VENV/bin/python
has_torch() { [ -x "$py" ] && "$py" -c 'import torch; torch.version.cuda.split' 2>/dev/null; }
if ! has_torch; then
    echo "uvmchunk: no PyTorch set in $UVMC_VENV: installing PyTorch $UVMC_TORCH_VERSION with FBGEMM and TorchRec" \
         "first: about 3.2 GB of wheels downloaded into $UVMC_WHEEL_CACHE (kept for the next install) and" \
         "7.5 GB in $UVMC_VENV, about 1.5 minutes (35 s to download, 50 s to install on a fresh machine)." \
         "\`bash tools/demo.sh --no-torch\` skips it and shows the library alone"
    if ! { uvmc_install_python_try "$UVMC_VENV" "$UVMC_TORCH_VERSION" && has_torch; }; then
        library_alone "installing PyTorch $UVMC_TORCH_VERSION into $UVMC_VENV failed (above)" 1
    fi
fi
if ! "$py" -c 'import uvmchunk' 2>/dev/null; then
    { uvmc_build_package "$py" && uvmc_install_package "$py"; } ||
        library_alone "installing this tree's uvmchunk package into $UVMC_VENV failed (above)" 1
fi
read -r torch_version cuda_major < <("$py" -c 'import torch; print(torch.__version__, torch.version.cuda.split(".")[0])')
size=${UVMC_DEMO_SIZE:-512M}
out=$(mktemp -d "${TMPDIR:-/tmp}/uvmchunk-demo.XXXXXX")
trap 'rm -rf "$out"' EXIT
env=(UVMC_MANAGED_ALLOC="$UVMC_BUILD/integration/managed_alloc.so" OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1)
if $sim; then
    # both runs on the simulated runtime and driver; what LD_PRELOAD held is kept after them
    rt=$UVMC_BUILD/sim/libcudart.so.13 ldp=$UVMC_BUILD/sim
    if [ "$cuda_major" = 12 ]; then
        rt=$UVMC_BUILD/sim12/libcudart.so.12 ldp=$UVMC_BUILD/sim12:$UVMC_BUILD/sim
    fi
    env+=(LD_PRELOAD="$rt $UVMC_BUILD/sim/libcuda.so.1${LD_PRELOAD:+ $LD_PRELOAD}"
          LD_LIBRARY_PATH="$ldp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi
read -r bytes text < <("$py" -c "import sys
s = sys.argv[1]; u = {'K': 10, 'M': 20, 'G': 30}.get(s[-1:].upper()); n = int(s[:-1]) << u if u else int(s)
print(n, f'{n / 2**20:g}MiB')" "$size")
echo "uvmchunk: PyTorch $torch_version in $UVMC_VENV: dcp.save and dcp.load of one ${text/MiB/ MiB}" \
     "managed table $where, stock and under uvmchunk-run (under a minute)"
job=("$UVMC_VENV/bin/torchrun" --standalone --nproc_per_node=1 "$UVMC_TOP/integration/checkpoint_job.py" --size "$bytes")
for run in stock uvmchunk; do
    launch=()  # stock: the same job without libuvmchunk
    [ $run = stock ] || launch=("$UVMC_BUILD/uvmchunk-run" --)
    if ! env "${env[@]}" UVMCHUNK_STATS=on "${launch[@]}" "${job[@]}" >"$out/$run.out" 2>"$out/$run.err"; then
        tail -n 20 "$out/$run.err" >&2
        echo "uvmchunk: the $run run failed (above: the end of its output)" >&2
        exit 1
    fi
done
backend=gpu
$sim && backend=sim
rc=0
"$py" "$UVMC_TOP/integration/demo_table.py" --backend $backend "$out" || rc=$?
echo "Stock DCP copies the whole table into a page-locked block rounded up to a power of two, and its"
echo "load reads each item into host memory (torch.load) before copying it in. Under uvmchunk-run, the"
echo "uvmchunk package hands DCP the table's own pages (a zero-copy view), so DCP writes from them and"
echo "reads into them; the job's code is unchanged. What the library and the package said:"
grep -h '^uvmchunk: ' "$out/uvmchunk.err" || true
exit $rc
