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

# PyTorch for tests/torch: the real CUDA 13 wheels, run on the simulated CUDA runtime (no GPU), in two
# versions: UVMC_TORCH_VERSION (2.11.0, the GPU machine's) in $UVMC_VENV (default .venv), and
# UVMC_TORCH_VERSION2 (2.15.0, the newest on PyPI, built on the CUDA 13.2 runtime) in $UVMC_VENV2
# (default .venv-torch2.15.0; UVMC_TORCH_VERSION2= skips it). The wheels are downloaded once into
# $UVMC_WHEEL_CACHE (default ~/.cache/uvmchunk/wheels; both sets ~5.4 GiB) and installed from there.
# Sets UVMC_PYTHON and UVMC_PYTHON2 to the venvs' pythons, or leaves them empty (the torch tests
# then report themselves skipped). UVMC_NO_TORCH=1 skips both. A failed install is fatal only
# under CI=true.
UVMC_TORCH_VERSION=${UVMC_TORCH_VERSION:-2.11.0}
UVMC_TORCH_VERSION2=${UVMC_TORCH_VERSION2-2.15.0}
UVMC_VENV=${UVMC_VENV:-$UVMC_TOP/.venv}
UVMC_VENV2=${UVMC_VENV2:-$UVMC_TOP/.venv-torch$UVMC_TORCH_VERSION2}
UVMC_WHEEL_CACHE=${UVMC_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uvmchunk/wheels}
UVMC_PYTHON=${UVMC_PYTHON:-}
UVMC_PYTHON2=${UVMC_PYTHON2:-}

uvmc_torch_ready() { # VENV VERSION
    [ -x "$1/bin/python" ] && "$1/bin/python" -c "
import sys, pytest, torch
sys.exit(torch.__version__.split('+')[0] != '$2' or not torch.version.cuda)" 2>/dev/null
}

uvmc_install_python_try() { # VENV VERSION
    local pkgs=("torch==$2" pytest numpy)
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo=sudo
        echo "uvmchunk: installing python3 python3-venv"
        $sudo apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3 python3-venv >/dev/null || return 1
    fi
    [ -x "$1/bin/python" ] || python3 -m venv "$1" || return 1
    echo "uvmchunk: installing PyTorch $2 (CUDA 13 wheel) and pytest into $1 (wheels cached in $UVMC_WHEEL_CACHE)"
    mkdir -p "$UVMC_WHEEL_CACHE" &&
        "$1/bin/python" -m pip download --quiet --disable-pip-version-check -d "$UVMC_WHEEL_CACHE" "${pkgs[@]}" &&
        "$1/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
            --find-links "$UVMC_WHEEL_CACHE" "${pkgs[@]}" &&
        uvmc_torch_ready "$1" "$2"
}

uvmc_install_one() { # VENV VERSION: prints the python on success
    if uvmc_torch_ready "$1" "$2" || uvmc_install_python_try "$1" "$2" >&2; then
        echo "$1/bin/python"
        return 0
    fi
    if [ "${CI:-}" = true ]; then
        echo "uvmchunk: installing PyTorch $2 failed" >&2
        exit 1
    fi
    echo "uvmchunk: could not install PyTorch $2; its PyTorch tests will be skipped" >&2
}

uvmc_install_python() {
    if [ "${UVMC_NO_TORCH:-}" = 1 ]; then
        echo "uvmchunk: UVMC_NO_TORCH=1: the PyTorch tests will be skipped"
        return 0
    fi
    # uvmc_install_one runs in a subshell: its exit under CI=true must end this shell too
    UVMC_PYTHON=$(uvmc_install_one "$UVMC_VENV" "$UVMC_TORCH_VERSION") || exit 1
    if [ -n "$UVMC_TORCH_VERSION2" ]; then
        UVMC_PYTHON2=$(uvmc_install_one "$UVMC_VENV2" "$UVMC_TORCH_VERSION2") || exit 1
    fi
}

uvmc_install_packages
