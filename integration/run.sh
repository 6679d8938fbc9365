#!/usr/bin/env bash
# integration/run.sh: the integration harness's one entry point (README "Integration harness
# (torchrun)"). Runs integration/checkpoint_job.py under `torchrun --standalone --nproc_per_node=2`
# in four modes (see UVMC_INTEGRATION_MODES) for a short list of sizes per rank, then the
# engine comparison on one managed buffer (uvmchunk-demo: unchunked, copy engine, host engine), and
# prints the tables (integration/report.py).
#
# Backend: the real GPU when `nvidia-smi -L` lists one; else the simulated CUDA runtime (build/sim)
# when PyTorch is importable; else it says why it skipped and exits 0.
#
# Environment:
#   UVMC_BUILD                 build folder (default: build/ at the top of the tree)
#   UVMC_PYTHON                Python with PyTorch (default: .venv/bin/python, else python3)
#   UVMC_INTEGRATION_BACKEND   auto (default), gpu or sim
#   UVMC_INTEGRATION_SIZES     sizes per rank (default GPU "1G 4G", simulator "64M 128M")
#   UVMC_INTEGRATION_MODES     job modes (default "plain serial uvmchunk planner": stock DCP, stock
#                              with per_thread_copy_ahead=0, the preload library, the DCP planners)
#   UVMC_INTEGRATION_ENGINE_SIZE  engine comparison buffer (default GPU 8G, simulator 512M)
#   UVMC_INTEGRATION_DEADLINE  seconds for the whole run (default 420 on GPU, 200 simulated)
#   UVMC_INTEGRATION_OUT       folder for logs and the tables (default: a new temporary folder)
#   UVMC_NO_TORCH=1            behave as if PyTorch were not installed (the skip path)
# Exit status: 0 when every row that ran succeeded (or on skip), 1 otherwise, 2 on usage errors.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/.." && pwd)
build=${UVMC_BUILD:-$top/build}
backend=${UVMC_INTEGRATION_BACKEND:-auto}
started=$SECONDS

skip() { echo "SKIP: $*"; exit 0; }
die() { echo "run.sh: $*" >&2; exit 2; }

case $backend in auto|gpu|sim) ;; *) die "UVMC_INTEGRATION_BACKEND=$backend: want auto, gpu or sim" ;; esac

# ---- Python with a CUDA build of PyTorch
py=${UVMC_PYTHON:-}
if [ -z "$py" ]; then
    if [ -x "$top/.venv/bin/python" ]; then py=$top/.venv/bin/python; else py=$(command -v python3 || true); fi
fi
torch_why=""
if [ "${UVMC_NO_TORCH:-}" = 1 ]; then
    torch_why="UVMC_NO_TORCH=1 (treated as: PyTorch not installed)"
elif [ -z "$py" ]; then
    torch_why="no Python interpreter found (set UVMC_PYTHON)"
elif ! torch_ver=$("$py" -c 'import torch, sys; print(torch.__version__); sys.exit(0 if torch.version.cuda else 3)' 2>/dev/null); then
    torch_why="PyTorch with CUDA is not importable by $py"
fi

# ---- backend
has_gpu=false
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then has_gpu=true; fi
sim_ok=false
[ -f "$build/sim/libcudart.so.13" ] && [ -f "$build/sim/libcuda.so.1" ] && sim_ok=true
if [ "$backend" = auto ]; then
    if $has_gpu; then backend=gpu; else backend=sim; fi
fi
if [ "$backend" = gpu ]; then
    $has_gpu || die "UVMC_INTEGRATION_BACKEND=gpu but nvidia-smi -L lists no GPU"
    [ -z "$torch_why" ] || skip "GPU present, but $torch_why"
else
    [ -z "$torch_why" ] || skip "no GPU (nvidia-smi -L lists none) and $torch_why"
    $sim_ok || skip "no GPU, and the simulated runtime is not built ($build/sim/libcudart.so.13 missing; build with UVMC_BUILD_TESTS=ON)"
fi

for f in libuvmchunk.so uvmchunk-run uvmchunk-demo integration/managed_alloc.so; do
    [ -e "$build/$f" ] || die "$build/$f is missing: build first (cmake -S $top -B $build && cmake --build $build), or set UVMC_BUILD"
done

out=${UVMC_INTEGRATION_OUT:-}
if [ -z "$out" ]; then out=$(mktemp -d "${TMPDIR:-/tmp}/uvmc-integration.XXXXXX"); fi
mkdir -p "$out"
manifest=$out/manifest.tsv
: >"$manifest"

# ---- per-backend settings
job_env=(UVMC_MANAGED_ALLOC="$build/integration/managed_alloc.so" OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1)
lib_env=(UVMCHUNK_CONFIG= UVMCHUNK_STATS=on)
if [ "$backend" = gpu ]; then
    echo "BACKEND: real GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0)"
    sizes=${UVMC_INTEGRATION_SIZES:-1G 4G}
    engine_size=${UVMC_INTEGRATION_ENGINE_SIZE:-8G}
    deadline=${UVMC_INTEGRATION_DEADLINE:-420}
    run_limit=150
else
    echo "SIMULATED: figures are not GPU figures (simulated CUDA runtime in $build/sim; library thresholds scaled down with the sizes)"
    job_env+=(LD_PRELOAD="$build/sim/libcudart.so.13 $build/sim/libcuda.so.1"
              LD_LIBRARY_PATH="$build/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    # the library's defaults divided like the sizes: 32 MiB threshold and pinned threshold, 8 MiB blocks
    lib_env+=(UVMCHUNK_THRESHOLD=32MiB UVMCHUNK_CHUNK_SIZE=8MiB UVMCHUNK_DEPTH=2 UVMCHUNK_PINNED_THRESHOLD=32MiB)
    sizes=${UVMC_INTEGRATION_SIZES:-64M 128M}
    engine_size=${UVMC_INTEGRATION_ENGINE_SIZE:-512M}
    deadline=${UVMC_INTEGRATION_DEADLINE:-200}
    run_limit=100
fi
echo "python: $py (torch $torch_ver); build: $build; logs: $out"

bytes() { # 64M -> bytes
    local n=${1%[KkMmGg]} u=${1: -1}
    case $u in K|k) echo $((n << 10)) ;; M|m) echo $((n << 20)) ;; G|g) echo $((n << 30)) ;; *) echo "$1" ;; esac
}
mem_available() { awk '/^MemAvailable:/ {printf "%.0f\n", $2 * 1024}' /proc/meminfo; }
disk_free() { df -Pk "$1" | awk 'NR == 2 {printf "%.0f\n", $4 * 1024}'; }
# free bytes on GPU 0 as the CUDA runtime reports them, once before anything runs (each rank of the
# job checks again before it allocates)
if [ "$backend" = gpu ]; then
    gpu_free_bytes=$("$py" -c 'import torch; print(torch.cuda.mem_get_info(0)[0])' 2>/dev/null || echo 0)
    echo "GPU 0 free: $gpu_free_bytes bytes"
else
    gpu_free_bytes=$((1 << 62))
fi
gpu_free() { echo "$gpu_free_bytes"; }
left() { echo $((deadline - (SECONDS - started))); }
record() { printf '%s\n' "$(IFS=$'\t'; echo "$*")" >>"$manifest"; }

modes=${UVMC_INTEGRATION_MODES:-plain serial uvmchunk planner}

# ---- the checkpoint job: sizes x modes: plain (stock DCP), serial (stock with
# per_thread_copy_ahead=0), uvmchunk (the preload library), planner (uvmchunk.dcp's planners)
for size in $sizes; do
    n=$(bytes "$size")
    for mode in $modes; do
        tag=job-$size-$mode
        # never more managed memory than the card has free: both ranks on GPU 0, each with its table
        # and the fresh one it loads into, 1 GiB margin; host: those two + the power-of-two pinned
        # copy + slack, per rank
        need_gpu=$((4 * n + (1 << 30)))
        need_host=$((2 * 4 * n + (2 << 30)))
        need_disk=$((2 * n + (1 << 30)))
        free_gpu=$(gpu_free)
        if [ "$free_gpu" -lt "$need_gpu" ]; then record job "$size" "$mode" - - - "not run: GPU has $free_gpu bytes free, needs $need_gpu"; continue; fi
        if [ "$(mem_available)" -lt "$need_host" ]; then record job "$size" "$mode" - - - "not run: host MemAvailable below $need_host bytes"; continue; fi
        if [ "$(disk_free "$out")" -lt "$need_disk" ]; then record job "$size" "$mode" - - - "not run: less than $need_disk bytes free in $out"; continue; fi
        limit=$(left)
        [ "$limit" -gt "$run_limit" ] && limit=$run_limit
        if [ "$limit" -lt 20 ]; then record job "$size" "$mode" - - - "not run: time limit"; continue; fi
        logs=$out/$tag.ranks
        rm -rf "$logs" "$out/$tag.ckpt"
        cmd=("$py" -m torch.distributed.run --standalone --nproc_per_node=2 --log-dir "$logs" --redirects 3
             "$here/checkpoint_job.py" --size "$n" --dir "$out/$tag.ckpt")
        case $mode in serial | planner) cmd+=(--mode "$mode") ;; esac
        if [ "$mode" = uvmchunk ]; then cmd=("$build/uvmchunk-run" -- "${cmd[@]}"); fi
        echo "running: $tag (limit ${limit}s)"
        rc=0
        env "${job_env[@]}" "${lib_env[@]}" timeout -k 10 "$limit" "${cmd[@]}" >"$out/$tag.log" 2>&1 || rc=$?
        rm -rf "$out/$tag.ckpt"
        record job "$size" "$mode" "$rc" "$out/$tag.log" "$logs" ""
    done
done

# ---- engine comparison: one managed buffer (FBGEMM's advice) into a pinned destination
n=$(bytes "$engine_size")
note=""
while [ "$n" -gt $((64 << 20)) ] &&
      { [ "$(gpu_free)" -lt $((n + (1 << 30))) ] || [ "$(mem_available)" -lt $((2 * n + (2 << 30))) ]; }; do
    n=$((n / 2)); note="scaled down to $((n >> 20)) MiB to fit free GPU/host memory"
done
[ "$backend" = sim ] && note="simulated: $((n >> 20)) MiB instead of the GPU's 8 GiB${note:+; $note}"
esize=$((n >> 20))M
for path in unchunked copy host; do
    tag=engine-$esize-$path
    limit=$(left)
    [ "$limit" -gt 120 ] && limit=120
    if [ "$limit" -lt 10 ]; then record engine "$esize" "$path" - - - "not run: time limit"; continue; fi
    cmd=("$build/uvmchunk-demo" --size "$esize")
    # pinned_threshold=0 keeps the destination page-locked on all three paths: only the engine differs
    eenv=(UVMCHUNK_CONFIG= UVMCHUNK_STATS=on UVMCHUNK_PINNED_THRESHOLD=0 UVMCHUNK_ENGINE="$path")
    if [ "$path" != unchunked ]; then cmd=("$build/uvmchunk-run" -- "${cmd[@]}"); fi
    if [ "$backend" = sim ]; then eenv+=(LD_LIBRARY_PATH="$build/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"); fi
    echo "running: $tag (limit ${limit}s)"
    rc=0
    env "${eenv[@]}" timeout -k 10 "$limit" "${cmd[@]}" >"$out/$tag.log" 2>&1 || rc=$?
    record engine "$esize" "$path" "$rc" "$out/$tag.log" - "$note"
done

echo
"$py" "$here/report.py" --backend "$backend" "$manifest" | tee "$out/tables.txt"
