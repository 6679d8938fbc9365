#!/usr/bin/env bash
# integration/gpu_check.sh: issue 6's "GPU run" as one prepared command, for a machine with one
# NVIDIA GPU, PyTorch (CUDA build) and the CUDA toolkit, no internet. Runs, each step under its own
# time limit, the whole within GPU_CHECK_SECONDS (default 450; give the caller a limit of about 500):
#   1. facts: date, GPU, driver, nvcc, PyTorch; libtorch_cuda.so's dynamic link to libcudart
#   2. build (cmake) into $GPU_CHECK_BUILD (default build-gpu/)
#   3. uvmchunk-demo on the real runtime, 1 GiB, under uvmchunk-run; then uvmchunk-probe (the
#      driver facts of tests/sim/README.md's strict switches: range attributes, queue capacity, host-function threads, managed
#      access attributes, early pageable returns, prefetch cost, residency, throughput), without and
#      with the library
#   4. integration/run.sh (the tables for RESULTS.md), then the confirmations from its logs:
#      counters show split copies during dcp.save, LD_PRELOAD reached both workers
#   4c. integration/torchrec.sh (the TorchRec job, 150 s of the budget) where TorchRec and FBGEMM are
#      installed; otherwise it says so and skips
#   5. the PyTorch bodies of tests/torch that make sense on a real GPU, under the library (a failing
#      one is rerun without the library to tell whose failure it is)
#   6. the CTest suites (simulated runtime; a check of the build on that machine)
# Everything goes to $GPU_CHECK_LOG (default <build>/gpu_check.log) and to stdout; when $OUT is
# set, the log and the run's tables and logs are copied under it as well. Exit 0 when every step
# passed; without a GPU (and without GPU_CHECK_SIM=1) it prints "SKIP: ..." and exits 0. Needs no
# network; installs nothing.
# GPU_CHECK_S3=1: step 4 runs the S3 modes of integration/modes.txt too (UVMC_INTEGRATION_S3=1:
# s3fs and s3torchconnector against a moto server on 127.0.0.1, 256 MiB per rank, one torchrun job
# each): off by default, as the 450 s budget has no room for four more jobs (not yet timed on a GPU;
# give GPU_CHECK_SECONDS=600 and a limit of about 650); moto and the clients come from the venv
# (tools/setup.sh), and a mode whose package is missing says so in its row.
# GPU_CHECK_SIM=1 (for checking this script without a GPU): every step on the simulated runtime,
# which proves nothing about a GPU.
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${GPU_CHECK_BUILD:-$top/build-gpu}
budget=${GPU_CHECK_SECONDS:-450}
s3_check=${GPU_CHECK_S3:-0}
case $s3_check in 0|1) ;; *) echo "uvmchunk: GPU_CHECK_S3=$s3_check: want 1 (the S3 modes too) or 0" >&2; exit 2 ;; esac
mkdir -p "$build"
log=${GPU_CHECK_LOG:-$build/gpu_check.log}
exec > >(tee "$log") 2>&1
started=$SECONDS
failed=()

left() { echo $((budget - (SECONDS - started))); }
step() { echo; echo "==== $* ($((SECONDS - started)) s elapsed, $(left) s left)"; }
fail() { echo "FAILED: $*"; failed+=("$*"); }
# limit SECONDS CMD...: at most SECONDS, and never past the overall budget
limit() {
    local s=$1 l
    shift
    l=$(left)
    [ "$l" -lt "$s" ] && s=$l
    if [ "$s" -lt 5 ]; then echo "not run (time budget spent): $*"; return 124; fi
    timeout -k 10 "$s" "$@"
}
finish() {
    step "summary"
    if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
        cp -r "$build/integration-run" "$OUT/" 2>/dev/null
        cp "$build/torchrec-run/table.txt" "$OUT/torchrec-table.txt" 2>/dev/null
        cp "$log" "$OUT/gpu_check.log" 2>/dev/null
    fi
    if ((${#failed[@]})); then
        printf 'FAILED step: %s\n' "${failed[@]}"
        echo "gpu_check: FAILED (log: $log)"
        exit 1
    fi
    echo "gpu_check: all steps passed (log: $log)"
    exit 0
}

command -v nvcc >/dev/null 2>&1 || export PATH="$PATH:/usr/local/cuda/bin"

# ---- 1. facts
step "1. machine"
date -u '+date: %Y-%m-%d %H:%M:%S UTC'
sim=""
[ "${GPU_CHECK_SIM:-}" = 1 ] && sim=1
if [ "$sim" = 1 ]; then
    echo "GPU_CHECK_SIM=1: DRY RUN ON THE SIMULATED RUNTIME: nothing here is a GPU figure"
elif ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "SKIP: nvidia-smi lists no GPU: this script is for a GPU machine (integration/run.sh and"
    echo "tools/test.sh cover the rest; GPU_CHECK_SIM=1 dry-runs it on the simulated runtime)"
    exit 0
else
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.free --format=csv
fi
nvcc --version 2>/dev/null | tail -n 2 || echo "nvcc: not found"
py=${UVMC_PYTHON:-}
if [ -z "$py" ]; then
    for cand in "$top/.venv/bin/python" "$(command -v python3 || true)" "$(command -v python || true)"; do
        if [ -n "$cand" ] && [ -x "$cand" ] && "$cand" -c 'import torch, sys; sys.exit(not torch.version.cuda)' 2>/dev/null; then
            py=$cand
            break
        fi
    done
fi
[ -n "$py" ] || { fail "no Python with a CUDA build of PyTorch (set UVMC_PYTHON)"; finish; }
export UVMC_PYTHON=$py
tlib=$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))')
echo "libtorch_cuda.so: $tlib"
readelf -d "$tlib" | grep -E 'NEEDED.*(cuda|cublas)|RUNPATH|RPATH'
if readelf -d "$tlib" | grep -q 'NEEDED.*\[libcudart\.so\.'; then
    echo "CONFIRMED: libtorch_cuda.so links libcudart dynamically ($(readelf -d "$tlib" | grep -o 'libcudart\.so\.[0-9]*'))"
else
    fail "libtorch_cuda.so has no DT_NEEDED on libcudart (statically linked runtime?)"
fi
echo "cudaMemcpyAsync defined in libtorch_cuda.so itself: $(nm -D --defined-only "$tlib" 2>/dev/null | grep -c ' cudaMemcpyAsync') (0 expected)"

# ---- 2. build
step "2. build into $build"
if limit 60 cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUVMC_PYTHON="$py" >"$build/cmake.log" 2>&1; then
    echo "configured with the test suites"
else
    tail -n 15 "$build/cmake.log"
    echo "configure with the test suites failed (libcheck or pkg-config missing?): retrying with UVMC_BUILD_TESTS=OFF"
    rm -f "$build/CMakeCache.txt"
    limit 60 cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUVMC_BUILD_TESTS=OFF \
        -DUVMC_PYTHON="$py" >"$build/cmake.log" 2>&1 || { tail -n 30 "$build/cmake.log"; fail "cmake configure"; finish; }
fi
if ! limit 180 cmake --build "$build" -j "$(nproc)" >"$build/build.log" 2>&1; then
    tail -n 30 "$build/build.log"
    fail "build"
    finish
fi
for f in libuvmchunk.so uvmchunk-run uvmchunk-demo uvmchunk-probe integration/managed_alloc.so; do
    if [ -e "$build/$f" ]; then echo "built: $build/$f"; else fail "build: $f missing"; fi
done
readelf -d "$build/integration/managed_alloc.so" | grep -E 'NEEDED|RUNPATH|RPATH'
# the dry run binds PyTorch and the demo to the simulator, as tests/torch does
simenv=()
if [ "$sim" = 1 ]; then
    simenv=(LD_PRELOAD="$build/sim/libcudart.so.13 $build/sim/libcuda.so.1" LD_LIBRARY_PATH="$build/sim"
            UVMC_SIM_DIR="$build/sim")
fi
limit 60 env "${simenv[@]}" "$py" -c '
import torch
print("python:", __import__("sys").executable)
print("torch:", torch.__version__, "cuda:", torch.version.cuda, "available:", torch.cuda.is_available())
print("device 0:", torch.cuda.get_device_name(0), "free/total bytes:", torch.cuda.mem_get_info(0))
' || fail "PyTorch cannot use the GPU"

# ---- 3. demo
step "3. uvmchunk-demo, 1 GiB, ${sim:+SIMULATED (dry run) }runtime, under uvmchunk-run"
if ! limit 90 env "${simenv[@]}" UVMCHUNK_CONFIG= UVMCHUNK_STATS=on "$build/uvmchunk-run" -- "$build/uvmchunk-demo" --size 1G; then
    fail "demo"
fi

# ---- 3b. the driver probe (the facts behind tests/sim/README.md's switches), without and with the library
step "3b. uvmchunk-probe: the driver facts the simulator's strict values stand in for"
for mode in plain uvmchunk; do
    pre=()
    [ "$mode" = uvmchunk ] && pre=(LD_PRELOAD="$build/libuvmchunk.so${sim:+ $build/sim/libcudart.so.13 $build/sim/libcuda.so.1}")
    echo "-- $mode"
    if ! limit 120 env "${simenv[@]}" "${pre[@]}" UVMCHUNK_CONFIG= "$build/uvmchunk-probe" all | tee "$build/probe-$mode.md"; then
        fail "probe ($mode)"
    fi
done
[ -n "${OUT:-}" ] && [ -d "${OUT:-}" ] && cp "$build"/probe-*.md "$OUT/" 2>/dev/null

# ---- 4. the runner (leaving 150 s for step 4c when TorchRec and FBGEMM are installed here)
step "4. integration/run.sh${sim:+ (dry run: simulated)}"
run_out=$build/integration-run
rm -rf "$run_out"
trec_budget=0
"$py" -c 'import importlib.metadata as m; m.version("torchrec"); m.version("fbgemm-gpu")' 2>/dev/null && trec_budget=150
run_budget=$(( $(left) - 60 - trec_budget ))
run_cap=300; [ "$s3_check" = 1 ] && run_cap=450  # the S3 modes: four more torchrun jobs
[ "$run_budget" -gt "$run_cap" ] && run_budget=$run_cap
if ! limit "$run_budget" env UVMC_BUILD="$build" UVMC_INTEGRATION_OUT="$run_out" \
        UVMC_INTEGRATION_DEADLINE=$((run_budget - 15)) UVMC_INTEGRATION_BACKEND="${sim:+sim}" \
        UVMC_INTEGRATION_S3="$s3_check" bash "$top/integration/run.sh"; then
    fail "integration/run.sh"
fi
echo
echo "-- confirmations from the run's per-rank logs ($run_out)"
found_split=0 found_preload=0 ranks=0
for d in "$run_out"/job-*-uvmchunk.ranks; do
    [ -d "$d" ] || continue
    for r in "$d"/*/attempt_*/*/; do
        ranks=$((ranks + 1))
        echo "$(basename "$d") rank $(basename "$r"):"
        grep -h 'uvmchunk: stats:' "$r/stderr.log" | sed 's/^/  /'
        grep -h '^RESULT ' "$r/stdout.log" | grep -o '"preloaded": [a-z]*' | sed 's/^/  /'
        grep -Eq 'uvmchunk: stats: pid [^:]*: split [1-9]' "$r/stderr.log" && found_split=$((found_split + 1))
        grep -q '"preloaded": true' "$r/stdout.log" && found_preload=$((found_preload + 1))
    done
done
if [ "$ranks" -gt 0 ] && [ "$found_split" -eq "$ranks" ]; then
    echo "CONFIRMED: the library's counters show split copies during dcp.save in all $ranks rank runs"
    echo "  (the job's only device-to-host copies at or above the threshold are dcp.save's; its"
    echo "  verification copies are 8 MiB blocks, below it)"
else
    fail "counters: $found_split of $ranks rank runs show split copies"
fi
if [ "$ranks" -gt 0 ] && [ "$found_preload" -eq "$ranks" ]; then
    echo "CONFIRMED: LD_PRELOAD reached both workers (libuvmchunk.so mapped in $found_preload of $ranks rank runs)"
else
    fail "LD_PRELOAD: libuvmchunk.so mapped in $found_preload of $ranks rank runs"
fi

# ---- 4c. the TorchRec job (integration/torchrec.sh): FBGEMM's own managed tables, training steps
# between two saves, each mode; only where TorchRec and FBGEMM are installed (no network here)
step "4c. integration/torchrec.sh${sim:+ (dry run: simulated)}"
rm -rf "$build/torchrec-run"
if [ "$trec_budget" -gt 0 ]; then
    if ! limit "$trec_budget" env UVMC_BUILD="$build" UVMC_PYTHON="$py" UVMC_TORCHREC_OUT="$build/torchrec-run" \
            UVMC_TORCHREC_DEADLINE=$((trec_budget - 10)) UVMC_INTEGRATION_BACKEND="${sim:+sim}" \
            bash "$top/integration/torchrec.sh"; then
        fail "integration/torchrec.sh"
    fi
else
    echo "SKIP: TorchRec and FBGEMM are not installed for $py (this machine has no network and their wheels"
    echo "      are too large to carry over): the TorchRec job (integration/torchrec.sh) was not run"
fi

# ---- 5. PyTorch bodies of tests/torch on the real runtime
step "5. tests/torch bodies on the ${sim:+SIMULATED (dry run) }runtime under the library (200 MiB; threshold 64 MiB, 16 MiB blocks)"
body=$top/tests/torch/torch_body.py
ck=$(mktemp -d "${TMPDIR:-/tmp}/uvmc-gpu-check.XXXXXX")
# name | body args | Python expression over r (its RESULT), s (copies split) and p (pinned requests
# served lazily), both from the library's stats line
checks=(
    "managed|managed --size 209715200|r['equal'] and r['memory_type'] == 3 and s == 1"
    "plain|plain --size 209715200|r['equal'] and r['memory_type'] == 2 and s == 0"
    "capture|capture --size 209715200|r['begin'] == 0 and r['end'] == 0 and r['captured_untouched'] and r['equal_after'] and s == 1"
    "dcp|dcp --size 209715200 --dir $ck/dcp|r['equal'] and s == 1"
    "dcp_pinned_substitution|dcp --size 209715200 --dir $ck/dcp2|r['equal'] and s == 1 and p >= 1"
)
for c in "${checks[@]}"; do
    IFS='|' read -r name args expr <<<"$c"
    extra=()
    [ "$name" = dcp_pinned_substitution ] && extra=(UVMCHUNK_PINNED_THRESHOLD=64MiB)
    # shellcheck disable=SC2086  # args is a word list
    if limit 90 env "${simenv[@]}" LD_PRELOAD="$build/libuvmchunk.so${sim:+ $build/sim/libcudart.so.13 $build/sim/libcuda.so.1}" UVMCHUNK_CONFIG= UVMCHUNK_STATS=on UVMCHUNK_THRESHOLD=64MiB \
           UVMCHUNK_CHUNK_SIZE=16MiB UVMCHUNK_DEPTH=2 "${extra[@]}" UVMC_MANAGED_ALLOC="$build/integration/managed_alloc.so" \
           PYTHONDONTWRITEBYTECODE=1 "$py" "$body" $args >"$ck/$name.out" 2>"$ck/$name.err" &&
       "$py" - "$ck/$name.out" "$ck/$name.err" "$expr" <<'EOF'
import json, re, sys
out, err, expr = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
r = [json.loads(l[7:]) for l in out.splitlines() if l.startswith("RESULT ")][-1]
m = re.findall(r"uvmchunk: stats: pid [^:\n]*: split (\d+) cop(?:y|ies)", err)
s = int(m[-1]) if m else -1
m = re.findall(r"(\d+) pinned requests? served lazily", err)
p = int(m[-1]) if m else -1
line = [l for l in err.splitlines() if "uvmchunk: stats:" in l]
print("  RESULT", json.dumps(r, sort_keys=True))
print("  " + (line[-1] if line else "no stats line"))
sys.exit(0 if eval(expr, {}, {"r": r, "s": s, "p": p}) else 1)
EOF
    then
        echo "PASS: torch body $name"
    else
        tail -n 20 "$ck/$name.err"
        # the same body without the library tells a library failure from one of the body itself
        if limit 90 env "${simenv[@]}" UVMC_MANAGED_ALLOC="$build/integration/managed_alloc.so" \
               PYTHONDONTWRITEBYTECODE=1 "$py" "$body" $args >"$ck/$name.base.out" 2>"$ck/$name.base.err"; then
            echo "  without the library: exit 0: $(grep '^RESULT' "$ck/$name.base.out")"
            fail "torch body $name (passes its body without the library)"
        else
            echo "  without the library it fails too:"; tail -n 5 "$ck/$name.base.err"
            fail "torch body $name (fails without the library too: the body does not suit this runtime)"
        fi
    fi
done
rm -rf "$ck"

# ---- 6. the CTest suites
step "6. CTest suites (simulated runtime; PyTorch suites on the simulator too)"
if [ -f "$build/CTestTestfile.cmake" ] && [ -d "$build/sim" ]; then
    (cd "$build" && limit 150 ctest -j "$(nproc)" --timeout 120 --output-on-failure) | tail -n 40 || fail "ctest"
else
    echo "not run: the test suites were not built (UVMC_BUILD_TESTS=OFF)"
fi

step "for integration/RESULTS.md"
echo "date: $(date -u +%Y-%m-%d); GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i 0 2>/dev/null || echo none)"
echo "PyTorch: $("$py" -c 'import torch; print(torch.__version__)'); tables: $run_out/tables.txt"
cat "$run_out/tables.txt" 2>/dev/null
if [ -f "$build/torchrec-run/table.txt" ]; then
    echo "TorchRec job ($("$py" -c 'import importlib.metadata as m; print("fbgemm-gpu", m.version("fbgemm-gpu"), "torchrec", m.version("torchrec"))')):"
    cat "$build/torchrec-run/table.txt"
fi
for mode in plain uvmchunk; do
    echo "probe ($mode):"
    cat "$build/probe-$mode.md" 2>/dev/null
done
finish
