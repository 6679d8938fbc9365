#!/usr/bin/env bash
# test.sh: installs what is missing, builds, and runs every test suite on the simulated CUDA
# runtime (no GPU needed). CI=true also makes warnings errors. The PyTorch suites (CTest label torch)
# run once per PyTorch version of the matrix in tools/setup.sh, each venv with this tree's uvmchunk
# package installed.
source "$(dirname "$0")/setup.sh"
werror=OFF
[ "${CI:-}" = true ] && werror=ON
started=$SECONDS
uvmc_install_python
uvmc_build -DUVMC_WERROR=$werror ${UVMC_PYTHON:+-DUVMC_PYTHON=$UVMC_PYTHON}
uvmc_package_everywhere
echo "uvmchunk: set-up and build took $((SECONDS - started)) s"
cd "$UVMC_BUILD"
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
# Every suite on the strict simulator (the harshest documented reading of the driver), then the core
# suites once more on the lenient one, so a library that only works on either is caught.
t0=$SECONDS
env "$(torch_env "$UVMC_TORCH_VERSION")" ctest --output-on-failure -j 2 "$@"
echo "uvmchunk: every suite (PyTorch $UVMC_TORCH_VERSION) took $((SECONDS - t0)) s"
echo "uvmchunk: the core suites again on the lenient simulator (UVMSIM_PROFILE=lenient)"
UVMSIM_PROFILE=lenient ctest --output-on-failure -j 2 -L core "$@"
for e in $UVMC_PYTHONS; do
    t0=$SECONDS
    label=$(torch_label "${e%%=*}")
    echo "uvmchunk: the suites labelled $label again with PyTorch ${e%%=*} (${e#*=})"
    env "$(torch_env "${e%%=*}")" UVMC_TORCH_PYTHON="${e#*=}" ctest --output-on-failure -j 2 -L "$label" "$@"
    echo "uvmchunk: the suites labelled $label with PyTorch ${e%%=*} took $((SECONDS - t0)) s"
done
