#!/usr/bin/env bash
# integration/run.sh: the integration harness's one entry point (integration/README.md, "Integration harness
# (torchrun)"). Runs integration/checkpoint_job.py under `torchrun --standalone --nproc_per_node=2`
# in each mode of integration/modes.txt for a short list of sizes per rank, then the engine
# comparison on one managed buffer (uvmchunk-demo: unchunked, copy engine, host engine), and
# prints the tables (integration/report.py).
#
# Backend: the real GPU when `nvidia-smi -L` lists one; else the simulated CUDA runtime (build/sim)
# when PyTorch is importable; else it says why it skipped and exits 0.
#
# Environment (every value is checked before anything runs; a mistake is one 'uvmchunk:' line, exit 2):
#   UVMC_BUILD                 build folder (default: build/ at the top of the tree)
#   UVMC_PYTHON                Python with PyTorch (default: .venv/bin/python, else python3)
#   UVMC_INTEGRATION_BACKEND   auto (default), gpu or sim
#   UVMC_INTEGRATION_QUICK=1   the quick setting: one size per rank (simulator 24M, GPU 1536M), the
#                              modes marked quick in modes.txt (plain, uvmchunk, auto, planner) and a 64M
#                              engine buffer: 48 s on the simulator (2 cores at a load average of 3)
#   UVMC_INTEGRATION_SIZES     sizes per rank, e.g. "48M 96M" (default GPU "1536M 3G", simulator
#                              "48M 96M": not powers of two, so PyTorch's rounding shows); at least
#                              1M each, multiples of 1K
#   UVMC_INTEGRATION_MODES     job modes, names from integration/modes.txt (default: all of them but
#                              the S3 modes; the quick setting: those marked quick)
#   UVMC_INTEGRATION_S3=1      the S3 modes too (s3fs, s3fs-stock, s3-connector, s3-connector-stock):
#                              once each, at UVMC_INTEGRATION_S3_SIZE per rank (default GPU 256M,
#                              simulator 24M), against moto's server on 127.0.0.1 that this script
#                              starts (moto and the client in $UVMC_PYTHON, else the row says "not
#                              run"); naming one in UVMC_INTEGRATION_MODES runs it too
#   UVMC_INTEGRATION_ENGINE_SIZE  engine comparison buffer (default GPU 8G, simulator 512M; at least
#                              4M, a multiple of 1M)
#   UVMC_INTEGRATION_DEADLINE  seconds for the whole run (default 420 on GPU, 200 simulated)
#   UVMC_INTEGRATION_OUT       folder for logs and the tables (default: a new temporary folder)
#   UVMC_NO_TORCH=1            behave as if PyTorch were not installed (the skip path)
# The library's size thresholds are scaled to each run's size (threshold half the table, at most
# 256MiB; chunk_size a quarter of that, at most 64MiB, rounded down to a valid one; pinned_threshold
# half the pinned block PyTorch asks for, at most 1GiB): the defaults for GPU-sized tables, and a
# split copy for small ones.
# Exit status: 0 when every row that ran succeeded (or on skip), 1 otherwise, 2 on usage errors.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/.." && pwd)
build=${UVMC_BUILD:-$top/build}
backend=${UVMC_INTEGRATION_BACKEND:-auto}
quick=${UVMC_INTEGRATION_QUICK:-0}
started=$SECONDS

skip() { echo "SKIP: $*"; exit 0; }
die() { echo "uvmchunk: $*" >&2; exit 2; }

# bytes SIZE: 96M, 1536M, 3G, 64MiB or plain bytes -> bytes; fails on anything else
bytes() {
    [[ $1 =~ ^([0-9]{1,15})(([KkMmGgTt])([Ii]?[Bb])?)?$ ]] || return 1
    local n=$((10#${BASH_REMATCH[1]}))
    case ${BASH_REMATCH[3]} in
        K|k) echo $((n << 10)) ;; M|m) echo $((n << 20)) ;; G|g) echo $((n << 30)) ;; T|t) echo $((n << 40)) ;;
        *) echo "$n" ;;
    esac
}
# cfg_size BYTES: as the library's configuration spells it (64MiB, 1536KiB, or bytes)
cfg_size() {
    if (($1 == 0)); then echo 0
    elif (($1 % (1 << 20) == 0)); then echo "$(($1 >> 20))MiB"
    elif (($1 % 1024 == 0)); then echo "$(($1 >> 10))KiB"
    else echo "$1"; fi
}

# ---- the input, checked before anything runs
case $backend in auto|gpu|sim) ;; *) die "UVMC_INTEGRATION_BACKEND=$backend: want auto, gpu or sim" ;; esac
case $quick in 0|1) ;; *) die "UVMC_INTEGRATION_QUICK=$quick: want 1 (the quick setting) or 0" ;; esac
s3=${UVMC_INTEGRATION_S3:-0}
case $s3 in 0|1) ;; *) die "UVMC_INTEGRATION_S3=$s3: want 1 (the S3 modes too) or 0" ;; esac
if [ -n "${UVMC_INTEGRATION_DEADLINE:-}" ] && ! [[ $UVMC_INTEGRATION_DEADLINE =~ ^[1-9][0-9]{0,5}$ ]]; then
    die "UVMC_INTEGRATION_DEADLINE=$UVMC_INTEGRATION_DEADLINE: want a number of seconds"
fi
# the modes: integration/modes.txt, one line each (name | launch | job | expect | quick | legend)
declare -A mode_launch=() mode_job=()
known_modes=() all_modes=() quick_modes=()
while IFS='|' read -r name launch job _ in_quick _; do
    name=${name//[[:space:]]/} launch=${launch//[[:space:]]/} job=${job//[[:space:]]/} in_quick=${in_quick//[[:space:]]/}
    if [ -z "$name" ] || [ "${name:0:1}" = "#" ]; then continue; fi
    known_modes+=("$name")
    mode_launch[$name]=$launch
    mode_job[$name]=$job
    case $job in s3fs|s3torchconnector) [ "$s3" = 1 ] || continue ;; esac  # S3 modes: on request
    all_modes+=("$name")
    [ "$in_quick" = yes ] && quick_modes+=("$name")
done <"$here/modes.txt"
if [ "$quick" = 1 ]; then default_modes=${quick_modes[*]}; else default_modes=${all_modes[*]}; fi
read -ra modes <<<"${UVMC_INTEGRATION_MODES-$default_modes}"
((${#modes[@]})) || die "UVMC_INTEGRATION_MODES is empty: want some of: ${known_modes[*]}"
for mode in "${modes[@]}"; do
    [ -n "${mode_job[$mode]+set}" ] || die "UVMC_INTEGRATION_MODES: unknown mode '$mode' (the modes: ${known_modes[*]}; integration/modes.txt)"
done
for var in UVMC_INTEGRATION_SIZES UVMC_INTEGRATION_ENGINE_SIZE UVMC_INTEGRATION_S3_SIZE; do
    [ -n "${!var+set}" ] || continue
    read -ra vals <<<"${!var}"
    ((${#vals[@]})) || die "$var is empty: want sizes such as 48M or 1536M"
    [ "$var" = UVMC_INTEGRATION_SIZES ] || ((${#vals[@]} == 1)) || die "$var: want one size"
    for size in "${vals[@]}"; do
        n=$(bytes "$size") || die "$var: '$size' is not a size (want e.g. 48M, 1536M, 3G)"
        if [ "$var" != UVMC_INTEGRATION_ENGINE_SIZE ] && { ((n < (1 << 20))) || ((n % 1024)); }; then
            die "$var: '$size' per rank: want at least 1M, a multiple of 1K"
        fi
        if [ "$var" = UVMC_INTEGRATION_ENGINE_SIZE ] && { ((n < (4 << 20))) || ((n % (1 << 20))); }; then
            die "$var: '$size': want at least 4M, a multiple of 1M"
        fi
    done
done

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
    [ -z "$torch_why" ] || skip "GPU present, but $torch_why; \`bash tools/setup.sh torch\` makes a venv with PyTorch (or set UVMC_PYTHON)"
else
    [ -z "$torch_why" ] || skip "no GPU (nvidia-smi -L lists none) and $torch_why; \`bash tools/setup.sh torch\` makes a venv with PyTorch (or set UVMC_PYTHON)"
    $sim_ok || skip "no GPU, and the simulated runtime is not built ($build/sim/libcudart.so.13 missing): bash tools/demo.sh builds it"
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
    default_sizes="1536M 3G" quick_sizes=1536M s3_size=${UVMC_INTEGRATION_S3_SIZE:-256M}
    engine_size=${UVMC_INTEGRATION_ENGINE_SIZE:-8G}
    deadline=${UVMC_INTEGRATION_DEADLINE:-420}
    run_limit=150
else
    # the simulated runtime of this PyTorch's CUDA major (torch 2.8's wheels use CUDA 12.8)
    rt=$build/sim/libcudart.so.13 ldp=$build/sim
    if [ "$("$py" -c 'import torch; print(torch.version.cuda.split(".")[0])')" = 12 ]; then
        rt=$build/sim12/libcudart.so.12 ldp=$build/sim12:$build/sim
    fi
    echo "SIMULATED: figures are not GPU figures (simulated CUDA runtime $rt; library thresholds scaled down with the sizes)"
    job_env+=(LD_PRELOAD="$rt $build/sim/libcuda.so.1" LD_LIBRARY_PATH="$ldp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    lib_env+=(UVMCHUNK_DEPTH=2)  # fewer blocks in flight: the simulator's copies are host memcpy
    default_sizes="48M 96M" quick_sizes=24M s3_size=${UVMC_INTEGRATION_S3_SIZE:-24M}
    engine_size=${UVMC_INTEGRATION_ENGINE_SIZE:-512M}
    deadline=${UVMC_INTEGRATION_DEADLINE:-200}
    run_limit=100
fi
if [ "$quick" = 1 ]; then
    read -ra sizes <<<"${UVMC_INTEGRATION_SIZES:-$quick_sizes}"
    engine_size=${UVMC_INTEGRATION_ENGINE_SIZE:-64M}
else
    read -ra sizes <<<"${UVMC_INTEGRATION_SIZES:-$default_sizes}"
fi
echo "python: $py (torch $torch_ver); build: $build; logs: $out"

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

# scaled_env BYTES [PINNED]: the library's size thresholds for a table of BYTES (the defaults when
# it is large): threshold half of it (at most 256MiB), chunk_size a quarter of that (at most 64MiB,
# rounded down to a valid chunk_size: config/uvmchunk.conf),
# pinned_threshold half of PyTorch's power-of-two pinned block for it (at most 1GiB) unless given
scaled_env() {
    local n=$1 thr chunk pinned p2=1
    thr=$((n / 2 / 1024 * 1024)); ((thr > 256 << 20)) && thr=$((256 << 20))
    chunk=$((thr / 4)); ((chunk > 64 << 20)) && chunk=$((64 << 20))
    # down to a chunk_size the library takes: a multiple of 2MiB, or a power of two of 4KiB..1MiB
    if ((chunk >= 2 << 20)); then chunk=$((chunk / (2 << 20) * (2 << 20)))
    else local c2=4096; while ((c2 * 2 <= chunk)); do c2=$((c2 * 2)); done; chunk=$c2; fi
    while ((p2 < n)); do p2=$((p2 * 2)); done
    pinned=${2:-$((p2 / 2))}; ((pinned > 1 << 30)) && pinned=$((1 << 30))
    echo "UVMCHUNK_THRESHOLD=$(cfg_size "$thr") UVMCHUNK_CHUNK_SIZE=$(cfg_size "$chunk") UVMCHUNK_PINNED_THRESHOLD=$(cfg_size "$pinned")"
}

# job_row SIZE MODE: one torchrun job of checkpoint_job.py (a row of the tables) with a table of
# SIZE per rank, in MODE (integration/modes.txt); an S3 mode's checkpoint goes to moto's bucket
job_row() {
    local size=$1 mode=$2 n scaled thr chunk tag where s3_mode="" need_gpu need_host need_disk free_gpu limit logs cmd views_env views why rc
    n=$(bytes "$size")
    read -ra scaled <<<"$(scaled_env "$n")"
    thr=$(bytes "${scaled[0]#*=}")
    chunk=$((thr / 2)); ((chunk > 8 << 20)) && chunk=$((8 << 20))  # fill/verify blocks stay below the threshold
    tag=job-$size-$mode
    where=$out/$tag.ckpt
    if is_s3 "$mode"; then
        s3_mode=1 where=s3://$s3_bucket/$tag
        if [ -n "$s3_why" ]; then record job "$n" "$mode" - - - "not run: $s3_why"; return; fi
        if ! "$py" -c "import ${mode_job[$mode]}" 2>/dev/null; then
            record job "$n" "$mode" - - - "not run: ${mode_job[$mode]} is not installed in $py (bash tools/setup.sh torch installs it)"; return
        fi
    fi
    # never more managed memory than the card has free: both ranks on GPU 0, each with its table
    # and the fresh one it loads into, 1 GiB margin; host: those two + the power-of-two pinned
    # copy + slack, per rank
    need_gpu=$((4 * n + (1 << 30)))
    need_host=$((2 * 4 * n + (2 << 30)))
    need_disk=$((2 * n + (1 << 30)))
    free_gpu=$(gpu_free)
    if [ "$free_gpu" -lt "$need_gpu" ]; then record job "$n" "$mode" - - - "not run: GPU has $free_gpu bytes free, needs $need_gpu"; return; fi
    if [ "$(mem_available)" -lt "$need_host" ]; then record job "$n" "$mode" - - - "not run: host MemAvailable below $need_host bytes"; return; fi
    if [ "$(disk_free "$out")" -lt "$need_disk" ]; then record job "$n" "$mode" - - - "not run: less than $need_disk bytes free in $out"; return; fi
    limit=$(left)
    [ "$limit" -gt "$run_limit" ] && limit=$run_limit
    if [ "$limit" -lt 20 ]; then record job "$n" "$mode" - - - "not run: time limit"; return; fi
    logs=$out/$tag.ranks
    rm -rf "$logs" "$logs.report.jsonl" "$out/$tag.ckpt"
    cmd=("$py" -m torch.distributed.run --standalone --nproc_per_node=2 --log-dir "$logs" --redirects 3
         "$here/checkpoint_job.py" --size "$n" --chunk "$chunk" --dir "$where" --mode "${mode_job[$mode]}")
    views_env=()
    case ${mode_launch[$mode]} in
    preload-copy) cmd=("$build/uvmchunk-run" -- "${cmd[@]}"); views_env=(UVMCHUNK_DCP_VIEWS=off) ;;
    preload)
        cmd=("$build/uvmchunk-run" -- "${cmd[@]}")
        # the views need the uvmchunk package in the job's Python: python -m uvmchunk says whether
        # (its exit status is 1 without the package: the line below says why, set -e must not end the run)
        views=$({ env "${job_env[@]}" "${lib_env[@]}" "$build/uvmchunk-run" -- "$py" -m uvmchunk 2>/dev/null || true; } |
                sed -n 's/^zero-copy DCP views with no code change: //p')
        if [ "${views#active}" = "$views" ]; then
            why=${views#not active in this Python }
            record job "$n" "$mode" - - - "not run: no automatic views ${why:-(the uvmchunk package is not installed in $py)}; bash tools/setup.sh torch installs it"
            return
        fi ;;
    esac
    # the async mode's budget (issue 24: 128 MiB, well below one rank's table)
    [ "${mode_job[$mode]}" = async ] && views_env+=(UVMCHUNK_ASYNC_MEMORY_BUDGET=128MiB)
    echo "running: $tag (limit ${limit}s; ${scaled[*]})"
    rc=0
    # under uvmchunk-run every rank appends the package's per-checkpoint record there: report.py
    # holds it against the job's own measurement
    env "${job_env[@]}" "${lib_env[@]}" "${scaled[@]}" "${views_env[@]}" ${s3_mode:+"${s3_env[@]}"} UVMCHUNK_REPORT="$logs.report.jsonl" \
        timeout -k 10 "$limit" "${cmd[@]}" >"$out/$tag.log" 2>&1 || rc=$?
    rm -rf "$out/$tag.ckpt"  # an S3 mode's objects stay in moto's memory until it stops
    record job "$n" "$mode" "$rc" "$out/$tag.log" "$logs" ""
}

# S3 modes (their job is an object-storage client): run only with UVMC_INTEGRATION_S3=1 or named in
# UVMC_INTEGRATION_MODES, once, at UVMC_INTEGRATION_S3_SIZE per rank, against a moto server (moto on
# PyPI, installed where the clients are by tools/setup.sh) on 127.0.0.1 that this script starts
is_s3() { case ${mode_job[$1]} in s3fs|s3torchconnector) return 0 ;; esac; return 1; }
local_modes=() s3_modes=()
for mode in "${modes[@]}"; do if is_s3 "$mode"; then s3_modes+=("$mode"); else local_modes+=("$mode"); fi; done
s3_why="" s3_env=() s3_bucket=uvmc-integration s3_pid=""
if ((${#s3_modes[@]})); then
    if ! "$py" -c 'import moto, flask' 2>/dev/null; then
        s3_why="moto's server is not installed in $py (pip install 'moto[server]'; bash tools/setup.sh torch installs it)"
    else
        s3_port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        "$py" -m moto.server -H 127.0.0.1 -p "$s3_port" >"$out/moto.log" 2>&1 &
        s3_pid=$!
        trap 'kill "$s3_pid" 2>/dev/null' EXIT
        s3_env=(AWS_ENDPOINT_URL="http://127.0.0.1:$s3_port" AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
                AWS_DEFAULT_REGION=us-east-1)
        # up when it makes the bucket (30 s at most)
        "$py" -c 'import sys, time, urllib.request
for _ in range(150):
    try:
        urllib.request.urlopen(urllib.request.Request(sys.argv[1], method="PUT"), timeout=2).close(); sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit(1)' "http://127.0.0.1:$s3_port/$s3_bucket" || s3_why="moto's server did not start (log: $out/moto.log)"
    fi
fi

# ---- the checkpoint job: sizes x modes (integration/modes.txt), then the S3 modes
for size in "${sizes[@]}"; do
    for mode in ${local_modes[@]+"${local_modes[@]}"}; do job_row "$size" "$mode"; done
done
for mode in ${s3_modes[@]+"${s3_modes[@]}"}; do job_row "$s3_size" "$mode"; done
[ -z "$s3_pid" ] || { kill "$s3_pid" 2>/dev/null; wait "$s3_pid" 2>/dev/null || true; }

# ---- engine comparison: one managed buffer (FBGEMM's advice) into a pinned destination
n=$(bytes "$engine_size")
note=""
while [ "$n" -gt $((64 << 20)) ] &&
      { [ "$(gpu_free)" -lt $((n + (1 << 30))) ] || [ "$(mem_available)" -lt $((2 * n + (2 << 30))) ]; }; do
    n=$((n / 2)); note="scaled down to $((n >> 20)) MiB to fit free GPU/host memory"
done
[ "$backend" = sim ] && note="simulated: $((n >> 20)) MiB instead of the GPU's 8 GiB${note:+; $note}"
esize=$((n >> 20))M
# pinned_threshold=0 keeps the destination page-locked on all three paths: only the engine differs
read -ra scaled <<<"$(scaled_env "$n" 0)"
for path in unchunked copy host; do
    tag=engine-$esize-$path
    limit=$(left)
    [ "$limit" -gt 120 ] && limit=120
    if [ "$limit" -lt 10 ]; then record engine "$n" "$path" - - - "not run: time limit"; continue; fi
    cmd=("$build/uvmchunk-demo" --size "$esize")
    eenv=(UVMCHUNK_CONFIG= UVMCHUNK_STATS=on "${scaled[@]}" UVMCHUNK_ENGINE="$path")
    if [ "$path" != unchunked ]; then cmd=("$build/uvmchunk-run" -- "${cmd[@]}"); fi
    if [ "$backend" = sim ]; then eenv+=(LD_LIBRARY_PATH="$build/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"); fi
    echo "running: $tag (limit ${limit}s; ${scaled[*]})"
    rc=0
    env "${eenv[@]}" timeout -k 10 "$limit" "${cmd[@]}" >"$out/$tag.log" 2>&1 || rc=$?
    record engine "$n" "$path" "$rc" "$out/$tag.log" - "$note"
done

echo
"$py" "$here/report.py" --backend "$backend" --modes "$here/modes.txt" "$manifest" | tee "$out/tables.txt"
