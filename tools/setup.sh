# setup.sh: sourced by demo.sh and test.sh: installs what the build needs on Debian (only what is
# missing), then configures and builds into $UVMC_BUILD (default: build/ at the top of the tree).
set -eu
UVMC_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
UVMC_BUILD=${UVMC_BUILD:-$UVMC_TOP/build}

uvmc_install_packages() {
    local missing=() p
    for p in cmake make gcc pkg-config check uthash-dev; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "uvmchunk: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

uvmc_build() {
    # The CUDA toolkit provides the headers (found by CMake's FindCUDAToolkit); add its usual
    # place to PATH when nvcc is not there yet.
    command -v nvcc >/dev/null 2>&1 || export PATH="$PATH:/usr/local/cuda/bin"
    cmake -S "$UVMC_TOP" -B "$UVMC_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
    cmake --build "$UVMC_BUILD" -j "$(nproc)" >/dev/null
}

uvmc_install_packages
