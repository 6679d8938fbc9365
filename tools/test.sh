#!/usr/bin/env bash
# test.sh: installs what is missing, builds, and runs every test suite on the simulated CUDA
# runtime (no GPU needed). CI=true also makes warnings errors.
source "$(dirname "$0")/setup.sh"
werror=OFF
[ "${CI:-}" = true ] && werror=ON
uvmc_install_python
uvmc_build -DUVMC_WERROR=$werror ${UVMC_PYTHON:+-DUVMC_PYTHON=$UVMC_PYTHON}
cd "$UVMC_BUILD"
ctest --output-on-failure -j 2 "$@"
