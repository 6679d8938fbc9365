#!/usr/bin/env bash
# integration/torchrec.sh: the TorchRec job (integration/torchrec_job.py: an EmbeddingBagCollection over
# FBGEMM's fused_uvm_caching and fused_uvm tables, sharded table_wise and row_wise, fused
# EXACT_ROWWISE_ADAGRAD; dcp.save of model and optimizer state, dcp.load into zeroed shards, bitwise
# check; ShardedTensor and DTensor output) under `torchrun --standalone --nproc_per_node=2` (gloo, each
# rank on its own GPU, cuda:LOCAL_RANK; with one GPU both on GPU 0), once per mode, then one table of the figures per rank:
#   stock    stock DCP, nothing of ours
#   preload  the same job under uvmchunk-run with UVMCHUNK_DCP_VIEWS=off (the library alone)
#   planner  uvmchunk.dcp's ZeroCopySavePlanner / ZeroCopyLoadPlanner
#   auto     under uvmchunk-run with the uvmchunk package installed and no planner (only when the
#            installed package has its torch.backends entry point)
#
# Backend: the real GPU when `nvidia-smi -L` lists one (tables x16: each rank's largest local table
# 768 and 640 MiB; 3 training steps before each of two saves, so the cache is dirty and flushed as in
# training; library defaults); otherwise the simulated runtime (tables x1, no training: the contents
# are written through the CPU; UVMSIM_KERNELS=noop narrowed to the kernels the job goes without;
# thresholds scaled down; the output says SIMULATED). Without TorchRec and FBGEMM for UVMC_PYTHON (the
# lent GPU machine has no network: the wheels are too large to carry over) it prints `SKIP: ...` and
# exits 0.
#
# Environment:
#   UVMC_BUILD                 build folder (default: build/ at the top of the tree)
#   UVMC_PYTHON                Python with PyTorch, TorchRec and FBGEMM (default: .venv/bin/python, else python3)
#   UVMC_INTEGRATION_BACKEND   auto (default), gpu or sim
#   UVMC_TORCHREC_MODES        modes to run (default "stock preload planner", plus auto when available)
#   UVMC_TORCHREC_SCALE        rows multiplier (default GPU 16, simulator 1)
#   UVMC_TORCHREC_DEADLINE     seconds for the whole run (default 240)
#   UVMC_TORCHREC_OUT          folder for logs and the table (default: a new temporary folder)
# Exit status: 0 when every mode that ran passed its checks (or on skip), 1 otherwise, 2 on usage errors.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/.." && pwd)
build=${UVMC_BUILD:-$top/build}
backend=${UVMC_INTEGRATION_BACKEND:-auto}
deadline=${UVMC_TORCHREC_DEADLINE:-240}
started=$SECONDS

skip() { echo "SKIP: $*"; exit 0; }
die() { echo "torchrec.sh: $*" >&2; exit 2; }
case $backend in auto|gpu|sim) ;; *) die "UVMC_INTEGRATION_BACKEND=$backend: want auto, gpu or sim" ;; esac

py=${UVMC_PYTHON:-}
if [ -z "$py" ]; then
    if [ -x "$top/.venv/bin/python" ]; then py=$top/.venv/bin/python; else py=$(command -v python3 || true); fi
fi
[ -n "$py" ] || skip "no Python interpreter found (set UVMC_PYTHON)"
# by the installed distributions: importing fbgemm_gpu needs a driver (or the simulator) first
if ! versions=$("$py" -c 'import importlib.metadata as m, torch; print(torch.__version__, m.version("fbgemm-gpu"), m.version("torchrec"))' 2>/dev/null); then
    skip "TorchRec and FBGEMM are not installed for $py (bash tools/setup.sh torch 2.11.0 makes a venv with them)"
fi
read -r torch_v fbgemm_v torchrec_v <<<"$versions"

has_gpu=false
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then has_gpu=true; fi
if [ "$backend" = auto ]; then if $has_gpu; then backend=gpu; else backend=sim; fi; fi
[ "$backend" = sim ] || $has_gpu || die "UVMC_INTEGRATION_BACKEND=gpu but nvidia-smi -L lists no GPU"
for f in libuvmchunk.so uvmchunk-run; do
    [ -e "$build/$f" ] || die "$build/$f is missing: build first (cmake -S $top -B $build && cmake --build $build), or set UVMC_BUILD"
done

out=${UVMC_TORCHREC_OUT:-}
[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/uvmc-torchrec.XXXXXX")
mkdir -p "$out"

job_env=(OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 UVMCHUNK_CONFIG= UVMCHUNK_STATS=on)
if [ "$backend" = gpu ]; then
    echo "BACKEND: real GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0)"
    scale=${UVMC_TORCHREC_SCALE:-16}
else
    major=$("$py" -c 'import torch; print(torch.version.cuda.split(".")[0])')
    rt=$build/sim/libcudart.so.13 ldp=$build/sim
    if [ "$major" = 12 ]; then rt=$build/sim12/libcudart.so.12 ldp=$build/sim12:$build/sim; fi
    [ -f "$rt" ] || skip "no GPU, and the simulated runtime is not built ($rt missing; build with UVMC_BUILD_TESTS=ON)"
    echo "SIMULATED: figures are not GPU figures (simulated CUDA runtime $rt; no training steps; thresholds scaled down)"
    # the device work the job goes without (tests/torch/test_torchrec.py names the same)
    allow="FillFunctor,distribution_elementwise,lxu_cache_flush_kernel"
    job_env+=(LD_PRELOAD="$rt $build/sim/libcuda.so.1" LD_LIBRARY_PATH="$ldp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
              UVMSIM_KERNELS=noop UVMSIM_KERNELS_ALLOW="$allow"
              UVMCHUNK_THRESHOLD=16MiB UVMCHUNK_PINNED_THRESHOLD=16MiB)
    scale=${UVMC_TORCHREC_SCALE:-1}
fi
echo "python: $py (torch $torch_v, fbgemm-gpu $fbgemm_v, torchrec $torchrec_v); build: $build; logs: $out"

default_modes="stock preload planner"
if "$py" -c 'import importlib.metadata as m, sys
sys.exit(not any(e.value.split(".")[0].split(":")[0] == "uvmchunk" for e in m.entry_points(group="torch.backends")))' 2>/dev/null; then
    default_modes="$default_modes auto"
fi
read -ra modes <<<"${UVMC_TORCHREC_MODES:-$default_modes}"

failed=0
for mode in "${modes[@]}"; do
    case $mode in stock | preload | planner | auto) ;; *) die "unknown mode $mode (want stock, preload, planner, auto)" ;; esac
    left=$((deadline - (SECONDS - started)))
    if [ "$left" -lt 30 ]; then echo "not run: $mode (time limit)"; failed=1; continue; fi
    cmd=("$py" -m torch.distributed.run --standalone --nproc_per_node=2 "$here/torchrec_job.py"
         --mode "$mode" --dir "$out/$mode.ckpt" --scale "$scale")
    views=()  # preload is the library alone: the package's automatic views (auto) off
    case $mode in preload) cmd=("$build/uvmchunk-run" -- "${cmd[@]}"); views=(UVMCHUNK_DCP_VIEWS=off) ;;
                  auto) cmd=("$build/uvmchunk-run" -- "${cmd[@]}") ;; esac
    echo "running: $mode (limit ${left}s)"
    rc=0
    env "${job_env[@]}" "${views[@]}" timeout -k 10 "$left" "${cmd[@]}" >"$out/$mode.log" 2>&1 || rc=$?
    rm -rf "$out/$mode.ckpt"
    if [ "$rc" -ne 0 ]; then echo "FAILED: $mode (exit $rc; log $out/$mode.log)"; tail -n 20 "$out/$mode.log"; failed=1; fi
done

echo
"$py" - "$out" "${modes[@]}" <<'EOF' | tee "$out/table.txt" || failed=1
import json, re, sys
out, modes = sys.argv[1], sys.argv[2:]
MIB = 1 << 20
print("| mode | output | rank | largest local table MiB | save s | load s | peak extra host MiB "
      "| page-locked peak MiB | copies split (each rank) | bitwise equal |")
print("|---|---|---|---|---|---|---|---|---|---|")
ok = True
for mode in modes:
    try:
        text = open(f"{out}/{mode}.log", errors="replace").read()
    except OSError:
        continue
    res = [json.loads(l[7:]) for l in text.splitlines() if l.startswith("RESULT ")]
    split = re.findall(r"uvmchunk: stats: split (\d+) copies", text)
    for r in sorted(res, key=lambda r: (r["output"], r["rank"])):
        equal = r["zeroed"] and not r["mismatched"] and all(a[:2] == [3, -1] for a in r["advice"].values())
        ok &= equal
        locked = "-" if r["locked_peak"] is None else f"{r['locked_peak'] / MIB:.0f}"
        print(f"| {mode} | {r['output']} | {r['rank']} | {r['largest_local_table'] / MIB:.0f} | {r['save_s']:.2f} "
              f"| {r['load_s']:.2f} | {r['peak_extra_bytes'] / MIB:.0f} | {locked} | {'/'.join(split) or '-'} "
              f"| {'yes' if equal else 'NO: ' + ', '.join(r['mismatched'])} |")
    if not res:
        ok = False
        print(f"| {mode} | - | - | - | - | - | - | - | - | no result |")
sys.exit(0 if ok else 1)
EOF
exit "$failed"
