#!/usr/bin/env bash
# test.sh [--quick] [CTEST ARGS...]: installs what is missing, builds, and runs every test suite on
# the simulated CUDA runtime (no GPU needed). CI=true also makes warnings errors. The PyTorch suites
# (CTest label torch) run once per PyTorch version of the matrix in tools/setup.sh, each venv with
# this tree's uvmchunk package installed.
#
# Each set's suites are a job (one ctest, its own TMPDIR), its output printed whole when it ends with
# its time and its ten slowest tests; the last line gives the total. The venvs install one after
# another in the background while the lenient core pass runs; UVMC_TEST_JOBS (default 1) jobs run at
# once.
#
# --quick: the default PyTorch version only, the strict simulator, every suite but those labelled
# slow (tests/README.md, "Time"), for use while developing; no other venv is installed.
# --soak MINUTES: only the differential fuzzer (torch_fuzz, tests/torch/test_fuzz.py) with the default
# PyTorch version, searching for MINUTES instead of its CI budget (UVMC_FUZZ_SEED reruns a seed).
source "$(dirname "$0")/setup.sh"
quick=0
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
soak=""
if [ "${1:-}" = --soak ]; then
    soak=${2:?--soak MINUTES}
    shift 2
    quick=1
fi
werror=OFF
[ "${CI:-}" = true ] && werror=ON
started=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/uvmc-test.XXXXXX")

torch_env() { # VERSION: what the torch suites need to know about that version's set
    local reason="" fb
    read -r _ fb _ _ <<<"$(uvmc_torch_set "$1")"
    [ "$fb" != - ] || reason=$(uvmc_no_torchrec_reason "$1")
    echo "UVMC_NO_TORCHREC_REASON=$reason"
}
torch_label() { # VERSION: the CTest label of the suites that set runs (tools/setup.sh's table)
    local label
    read -r _ _ _ label <<<"$(uvmc_torch_set "$1")"
    echo "$label"
}

# Jobs: one ctest run each in the background, output to $work/NAME.log, shown when it ends.
declare -A job_pid=() job_t0=() job_what=()
# UVMC_TEST_JOBS: how many jobs run at once (default 1). Side by side (2 or more) the suites of
# different sets and the installs behind them overloaded this 2-core machine: torch suites of 17 s
# hit CTest's 300 s limit (tests/README.md, "Time"); with 1, every venv is installed before the
# first PyTorch suite starts, as before.
UVMC_TEST_JOBS=${UVMC_TEST_JOBS:-1}
failed=()
installer=""
start_job() { # NAME WHAT ENV... -- CTEST ARGS...
    local name=$1 what=$2 envs=()
    shift 2
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    mkdir -p "$work/tmp-$name"
    while ((${#job_pid[@]} >= UVMC_TEST_JOBS)); do finish_done; sleep 2; done
    echo "uvmchunk: [$((SECONDS - started)) s] started: $what"
    # setsid: the job's own process group, so that an early exit stops its tests too (abort_jobs)
    (cd "$UVMC_BUILD" && exec setsid env TMPDIR="$work/tmp-$name" UVMC_TEST_DURATIONS="$work/$name.durations" \
        "${envs[@]}" ctest --output-on-failure -j 2 "$@" "${ctest_args[@]}") >"$work/$name.log" 2>&1 &
    job_pid[$name]=$!
    job_t0[$name]=$SECONDS
    job_what[$name]=$what
}
finish_job() { # NAME: waits for it, prints its output, its time and its ten slowest tests
    local name=$1 rc=0
    wait "${job_pid[$name]}" || rc=$?
    echo
    echo "uvmchunk: ==== $((SECONDS - started)) s: ${job_what[$name]}: $([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)")"
    cat "$work/$name.log"
    echo "uvmchunk: ${job_what[$name]} took $((SECONDS - job_t0[$name])) s; its ten slowest:"
    { grep -E '^ *[0-9]+/[0-9]+ Test +#' "$work/$name.log" |
          sed -E 's/.*Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 s  \1 (CTest)/'
      [ -f "$work/$name.durations" ] && sed -E 's/^([0-9.]+) /\1 s  /' "$work/$name.durations"
    } | sort -rn | head -n 10 | sed 's/^/    /'
    ((rc == 0)) || failed+=("${job_what[$name]}")
    unset "job_pid[$name]"
}
finish_done() { # finishes every job that has ended
    local name
    for name in "${!job_pid[@]}"; do
        kill -0 "${job_pid[$name]}" 2>/dev/null || finish_job "$name"
    done
}
ctest_args=("$@")
abort_jobs() { # on exit: jobs still running are stopped, with what they printed so far
    local name
    for name in "${!job_pid[@]}"; do
        kill -- -"${job_pid[$name]}" 2>/dev/null || true
        wait "${job_pid[$name]}" 2>/dev/null || true
        echo "uvmchunk: ==== stopped unfinished: ${job_what[$name]}; its output so far:"
        tail -n 60 "$work/$name.log"
    done
    [ -z "$installer" ] || kill "$installer" 2>/dev/null || true
    [ -z "${sanitizers:-}" ] || kill -- -"$sanitizers" 2>/dev/null || true
    rm -rf "$work"
}
trap abort_jobs EXIT

if [ "${UVMC_NO_TORCH:-}" = 1 ] || ((quick)); then UVMC_TORCH_VERSIONS=""; fi
# each version once, the first set never again (a job per version: its name is the version), and
# the sets that run every PyTorch suite installed before those that run the TorchRec suite alone
UVMC_TORCH_VERSIONS=$(for v in $UVMC_TORCH_VERSIONS; do
                          [ "$v" = "$UVMC_TORCH_VERSION" ] || echo "$([ "$(torch_label "$v")" = torch ]; echo $?) $v"
                      done | awk '!seen[$2]++' | sort -s -k1,1n | cut -d' ' -f2 | tr '\n' ' ')
# The venvs, one after another in the background: $work/VERSION.py holds its python once ready
# (empty: not installed; its suites are skipped, or under CI=true the run fails).
# A set's S3 clients (tools/setup.sh's uvmc_install_s3: up to five minutes in a fresh CI run, its
# many small packages) install beside the next set's PyTorch, which does not wait for them.
install_all() {
    local v py s3=()
    for v in "$UVMC_TORCH_VERSION" $UVMC_TORCH_VERSIONS; do
        py=$(UVMC_S3_LATER=1 uvmc_install_one "$v") || py=""
        if [ -n "$py" ]; then
            (uvmc_install_s3 "$(uvmc_venv_for "$v")" "$v" >&2
             echo "$py" >"$work/$v.py.part" && mv "$work/$v.py.part" "$work/$v.py") &
            s3+=($!)
        else
            echo "" >"$work/$v.py.part" && mv "$work/$v.py.part" "$work/$v.py"
            [ "${CI:-}" != true ] || return 1
        fi
    done
    wait "${s3[@]}"
}
venv_python() { # VERSION: waits for its install (finishing the jobs that end meanwhile, so not
    # in a subshell); sets $py to its python (empty: none); false when the installs stopped first
    while [ ! -f "$work/$1.py" ]; do
        if [ -z "$installer" ] || { ! kill -0 "$installer" 2>/dev/null && [ ! -f "$work/$1.py" ]; }; then return 1; fi
        finish_done
        sleep 2
    done
    py=$(cat "$work/$1.py")
}
if [ "${UVMC_NO_TORCH:-}" = 1 ]; then
    echo "uvmchunk: UVMC_NO_TORCH=1: the PyTorch tests will be skipped"
    : >"$work/$UVMC_TORCH_VERSION.py"
else
    install_all &
    installer=$!
fi

# The build does not wait for PyTorch: the main venv's python is where tools/setup.sh puts it
# (without PyTorch, python3: the Python suites report SKIP).
if [ "${UVMC_NO_TORCH:-}" = 1 ]; then
    build_py=$(command -v python3 || true)
else
    build_py=$(uvmc_venv_for "$UVMC_TORCH_VERSION")/bin/python
fi
uvmc_build -DUVMC_WERROR=$werror -DUVMC_PYTHON="$build_py"
echo "uvmchunk: [$((SECONDS - started)) s] built"
sanitizers=""
if [ "${UVMC_WITH_SANITIZERS:-}" = 1 ] && ((!quick)); then
    # .ci/run's sanitizer, memcheck and fuzzing pass, in its own build trees, while the PyTorch sets
    # install: the installs wait on the network and the disk, and the PyTorch suites start only once
    # it is done (beside them this 2-core machine was overloaded: tests/README.md, "Time")
    echo "uvmchunk: [$((SECONDS - started)) s] started: the sanitizer, memcheck and fuzzing pass (tests/hardening/run_sanitizers.sh)"
    (exec setsid bash "$UVMC_TOP/tests/hardening/run_sanitizers.sh") >"$work/sanitizers.log" 2>&1 &
    sanitizers=$!
    sanitizers_t0=$SECONDS
fi
finish_sanitizers() { # waits for the sanitizer pass, prints its output and time
    [ -n "$sanitizers" ] || return 0
    local rc=0
    wait "$sanitizers" || rc=$?
    echo
    echo "uvmchunk: ==== $((SECONDS - started)) s: the sanitizer, memcheck and fuzzing pass: $([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)")"
    cat "$work/sanitizers.log"
    echo "uvmchunk: the sanitizer pass took $((SECONDS - sanitizers_t0)) s"
    ((rc == 0)) || failed+=("the sanitizer, memcheck and fuzzing pass")
    sanitizers=""
}
if ((!quick)); then
    # The core suites once more on the lenient simulator, so a library that only works on the strict
    # one (the harshest documented reading of the driver) is caught too.
    start_job lenient "the core suites on the lenient simulator (UVMSIM_PROFILE=lenient)" \
        UVMSIM_PROFILE=lenient -- -L core
fi

venv_python "$UVMC_TORCH_VERSION" || { echo "uvmchunk: installing PyTorch $UVMC_TORCH_VERSION failed" >&2; exit 1; }
main_py=$py
if [ -z "$main_py" ] && [ "${CI:-}" = true ] && [ "${UVMC_NO_TORCH:-}" != 1 ]; then
    echo "uvmchunk: installing PyTorch $UVMC_TORCH_VERSION failed" >&2
    exit 1
fi
UVMC_PYTHON=$main_py
if [ -z "$main_py" ] && [ "${UVMC_NO_TORCH:-}" != 1 ]; then
    # the install failed: the Python suites run with python3 and report SKIP (configured once the
    # lenient job, which runs in the same tree, is done)
    [ -z "${job_pid[lenient]:-}" ] || finish_job lenient
    uvmc_build -DUVMC_WERROR=$werror -DUVMC_PYTHON="$(command -v python3 || true)"
elif [ -n "$main_py" ]; then
    echo "uvmchunk: [$((SECONDS - started)) s] PyTorch $UVMC_TORCH_VERSION ready"
    # kept in $work: readme_recipes runs `bash tools/setup.sh torch`, which builds the wheel anew in
    # the build tree while later sets still install this one
    uvmc_build_package "$main_py" && cp "$UVMC_PACKAGE_WHEEL" "$work/" &&
        UVMC_PACKAGE_WHEEL=$work/$(basename "$UVMC_PACKAGE_WHEEL") && uvmc_install_package "$main_py" ||
        { [ "${CI:-}" != true ] || exit 1; echo "uvmchunk: the tests run without the package of this tree installed" >&2; }
fi
echo "uvmchunk: set-up and build took $((SECONDS - started)) s"
if ((UVMC_TEST_JOBS == 1)) && [ -n "$installer" ]; then
    echo "uvmchunk: [$((SECONDS - started)) s] waiting for the other PyTorch sets' installs (UVMC_TEST_JOBS=1)"
    wait "$installer" || true
    installer=""
fi
finish_sanitizers
if [ -n "$soak" ]; then
    # CTest's TIMEOUT property (600 s) would stop a longer search: run the suite's own command
    # with its environment as CTest has them, without a limit
    (cd "$UVMC_BUILD" && ctest -R '^torch_fuzz$' --show-only=json-v1) | "$main_py" -c '
import json, os, sys
(t,) = json.load(sys.stdin)["tests"]
env = dict(os.environ)
for p in t.get("properties", []):
    if p["name"] == "ENVIRONMENT":
        env.update(kv.split("=", 1) for kv in p["value"])
env["UVMC_FUZZ_SECONDS"] = str(int(float(sys.argv[1]) * 60))
os.chdir(os.path.join(sys.argv[2], "tests", "torch"))
os.execvpe(t["command"][0], t["command"], env)' "$soak" "$UVMC_BUILD" && echo "uvmchunk: the $soak-minute soak found nothing" && exit 0
    failed+=("torch_fuzz --soak $soak")
    printf 'uvmchunk: FAILED: %s\n' "${failed[@]}"
    exit 1
fi
if ((quick)); then
    start_job main "every suite but the slow ones (PyTorch $UVMC_TORCH_VERSION, --quick)" \
        "$(torch_env "$UVMC_TORCH_VERSION")" -- -LE slow
else
    start_job main "every suite (PyTorch $UVMC_TORCH_VERSION)" "$(torch_env "$UVMC_TORCH_VERSION")" --
fi
for v in $UVMC_TORCH_VERSIONS; do
    venv_python "$v" || { echo "uvmchunk: installing PyTorch $v failed" >&2; exit 1; }
    if [ -z "$py" ]; then
        [ "${CI:-}" != true ] || { echo "uvmchunk: installing PyTorch $v failed" >&2; exit 1; }
        echo "uvmchunk: PyTorch $v could not be installed: its suites are skipped"
        continue
    fi
    echo "uvmchunk: [$((SECONDS - started)) s] PyTorch $v ready"
    if [ -n "${UVMC_PACKAGE_WHEEL:-}" ]; then
        uvmc_install_package "$py" || { [ "${CI:-}" != true ] || exit 1; }
    fi
    label=$(torch_label "$v")
    start_job "torch$v" "the suites labelled $label with PyTorch $v ($py)" \
        "$(torch_env "$v")" UVMC_TORCH_PYTHON="$py" -- -L "$label"
done
[ -z "$installer" ] || wait "$installer" || true
while ((${#job_pid[@]})); do
    finish_done
    ((${#job_pid[@]})) && sleep 2
done
if ((${#failed[@]})); then
    printf 'uvmchunk: FAILED: %s\n' "${failed[@]}"
    echo "uvmchunk: tests took $((SECONDS - started)) s in all"
    exit 1
fi
echo "uvmchunk: tests took $((SECONDS - started)) s in all"
