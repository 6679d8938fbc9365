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
    if ! command -v nvcc >/dev/null 2>&1; then
        echo "uvmchunk: the CUDA toolkit (nvcc, cuda.h) was not found on PATH or in /usr/local/cuda;" \
             "install it first (only its headers are used)" >&2
        exit 1
    fi
    local log="$UVMC_BUILD.log"
    mkdir -p "$UVMC_BUILD"
    if ! { cmake -S "$UVMC_TOP" -B "$UVMC_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" &&
           cmake --build "$UVMC_BUILD" -j "$(nproc)"; } >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        echo "uvmchunk: build failed; full log in $log" >&2
        exit 1
    fi
}

uvmc_install_packages
