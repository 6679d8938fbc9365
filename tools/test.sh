#!/usr/bin/env bash
# test.sh: installs what is missing, builds, and runs every test suite on the simulated CUDA
# runtime (no GPU needed). CI=true also makes warnings errors.
source "$(dirname "$0")/setup.sh"
werror=OFF
[ "${CI:-}" = true ] && werror=ON
uvmc_install_python
uvmc_build -DUVMC_WERROR=$werror ${UVMC_PYTHON:+-DUVMC_PYTHON=$UVMC_PYTHON}
cd "$UVMC_BUILD"
# Every suite on the strict simulator (the harshest documented reading of the driver), then the core
# suites once more on the lenient one, so a library that only works on either is caught.
ctest --output-on-failure -j 2 "$@"
echo "uvmchunk: the core suites again on the lenient simulator (UVMSIM_PROFILE=lenient)"
UVMSIM_PROFILE=lenient ctest --output-on-failure -j 2 -L core "$@"
if [ -n "${UVMC_PYTHON2:-}" ]; then
    echo "uvmchunk: the PyTorch suites again with PyTorch $UVMC_TORCH_VERSION2 ($UVMC_PYTHON2)"
    UVMC_TORCH_PYTHON=$UVMC_PYTHON2 ctest --output-on-failure -j 2 -L torch "$@"
fi
