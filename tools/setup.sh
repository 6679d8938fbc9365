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

# PyTorch for tests/torch: the real CUDA wheels, run on the simulated CUDA runtime (no GPU). The matrix
# (one row per PyTorch version): the CUDA major of its PyPI wheel (which simulated libcudart it runs
# on) and the fbgemm-gpu / torchrec pair that goes with it (fbgemm-gpu's compatibility table; torchrec
# pins no torch, so every set is installed under a constraints file that pins all three):
#   2.11.0  CUDA 13  fbgemm-gpu 1.6.0  torchrec 1.6.1   UVMC_TORCH_VERSION, in $UVMC_VENV (.venv)
#   2.8.0   CUDA 12  fbgemm-gpu 1.3.0  torchrec 1.3.0   the report's version (CUDA 12.8 wheels)
#   2.14.1  CUDA 13  fbgemm-gpu 1.9.0  torchrec 1.9.2   the newest pair: its TorchRec suite only
#   2.15.0  CUDA 13  none: no fbgemm-gpu release for it yet; every other PyTorch suite
# (tools/test.sh runs the CTest label the last column names: torch, every PyTorch suite; torchrec,
# the TorchRec suite alone: the newest release already runs the others, and CI time is bounded.)
# The versions after the first are UVMC_TORCH_VERSIONS (default "2.8.0 2.14.1 2.15.0"; the older
# UVMC_TORCH_VERSION2, when set, replaces the list: UVMC_TORCH_VERSION2= runs only the first), each
# in .venv-torch<VERSION>. Wheels are downloaded once into $UVMC_WHEEL_CACHE (default
# ~/.cache/uvmchunk/wheels; about 12 GiB for the four sets) and installed from there; under CI=true
# they are installed straight from the index and not kept. Sets
# UVMC_PYTHON (the first) and UVMC_PYTHONS ("VERSION=PYTHON ..." for the others), leaving out what
# could not be installed (its torch tests then report SKIP). UVMC_NO_TORCH=1 skips all of it. A
# failed install is fatal only under CI=true.
# Run directly, `bash tools/setup.sh torch [VERSION]` makes that one venv (default 2.11.0) with the
# package of this tree installed, and prints its python.
UVMC_TORCH_VERSION=${UVMC_TORCH_VERSION:-2.11.0}
if [ -n "${UVMC_TORCH_VERSION2+set}" ]; then UVMC_TORCH_VERSIONS=$UVMC_TORCH_VERSION2; fi
UVMC_TORCH_VERSIONS=${UVMC_TORCH_VERSIONS-2.8.0 2.14.1 2.15.0}
UVMC_VENV=${UVMC_VENV:-$UVMC_TOP/.venv}
UVMC_WHEEL_CACHE=${UVMC_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uvmchunk/wheels}
UVMC_PYTHON=${UVMC_PYTHON:-}
UVMC_PYTHONS=${UVMC_PYTHONS:-}

# uvmc_torch_set VERSION: "CUDA_MAJOR FBGEMM TORCHREC LABEL" ("-" where there is no pair or no
# knowledge; LABEL: the CTest label of the suites run with it)
uvmc_torch_set() {
    case $1 in
        2.8.0) echo "12 1.3.0 1.3.0 torch" ;;
        2.11.0) echo "13 1.6.0 1.6.1 torch" ;;
        2.14.1) echo "13 1.9.0 1.9.2 torchrec" ;;
        2.15.0) echo "13 - - torch" ;;
        *) echo "- - - torch" ;;
    esac
}
# Why a version has no TorchRec tests (read by tests/torch through UVMC_NO_TORCHREC_REASON).
uvmc_no_torchrec_reason() {
    case $1 in
        2.15.0) echo "no fbgemm-gpu release pairs with torch 2.15.0 (the newest, 1.9.0, pairs with 2.14; fbgemm-gpu's compatibility table)" ;;
        *) echo "tools/setup.sh knows no fbgemm-gpu / torchrec pair for torch $1" ;;
    esac
}
uvmc_venv_for() { # VERSION
    if [ "$1" = "$UVMC_TORCH_VERSION" ]; then echo "$UVMC_VENV"; else echo "$UVMC_TOP/.venv-torch$1"; fi
}

uvmc_torch_ready() { # VENV VERSION: torch (a CUDA build), pytest and the pair, at the versions pinned
    local set fb rec
    set=$(uvmc_torch_set "$2")
    read -r _ fb rec _ <<<"$set"
    [ -x "$1/bin/python" ] && "$1/bin/python" -c "
import sys, importlib.metadata as md, pytest, hypothesis, torch
want = {'torchrec': '$rec', 'fbgemm-gpu': '$fb'}
def have(p):
    try:
        return md.version(p)
    except md.PackageNotFoundError:
        return None
sys.exit(torch.__version__.split('+')[0] != '$2' or not torch.version.cuda
         or any(v != '-' and have(p) != v for p, v in want.items()))" 2>/dev/null
}

# Progress of the PyTorch installs, one line before and one after each step (pip's own progress
# bars are kept quiet: hundreds of lines for a set): what, how much disk, how long.
uvmc_du() { local n; n=$(du -sb "$1" 2>/dev/null | cut -f1); echo "${n:-0}"; } # bytes under a folder (0: absent)
uvmc_gb() { awk -v b="$1" 'BEGIN { printf "%.1f GB", b / 1e9 }'; }
uvmc_installed() { # VENV T0: the after-line of an install into VENV that started at SECONDS=T0
    echo "uvmchunk: installed in $((SECONDS - $2)) s; $1 now takes $(uvmc_gb "$(uvmc_du "$1")")"
}

uvmc_install_python_try() { # VENV VERSION
    local set fb rec pkgs constraints
    set=$(uvmc_torch_set "$2")
    read -r _ fb rec _ <<<"$set"
    pkgs=("torch==$2" pytest hypothesis numpy)
    if [ "$fb" != - ]; then pkgs+=("fbgemm-gpu==$fb" "torchrec==$rec"); fi
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo=sudo
        echo "uvmchunk: installing python3 python3-venv"
        $sudo apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3 python3-venv >/dev/null || return 1
    fi
    [ -x "$1/bin/python" ] || python3 -m venv "$1" || return 1
    # pip must never swap torch for another version to satisfy torchrec's or fbgemm-gpu's requirements
    constraints="$1/uvmchunk-constraints.txt"
    printf '%s\n' "torch==$2" ${fb:+"fbgemm-gpu==$fb"} ${rec:+"torchrec==$rec"} | grep -v '==-$' >"$constraints" || return 1
    local t0=$SECONDS cache0
    if [ "${CI:-}" = true ]; then
        # A CI machine starts empty and installs once: straight from the index, no cache kept (the
        # four sets' wheels are 12 GiB of disk on top of the 29 GiB of venvs)
        echo "uvmchunk: installing ${pkgs[*]} into $1 from the index (about 7 GB installed, one to two minutes)"
        "$1/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir -c "$constraints" \
            "${pkgs[@]}" && uvmc_installed "$1" "$t0" && uvmc_torch_ready "$1" "$2"
        return
    fi
    mkdir -p "$UVMC_WHEEL_CACHE" || return 1
    cache0=$(uvmc_du "$UVMC_WHEEL_CACHE")
    echo "uvmchunk: downloading ${pkgs[*]} into $UVMC_WHEEL_CACHE (up to 3 GB of wheels, kept for the next" \
         "install; $(uvmc_gb "$cache0") there now)"
    # setuptools and wheel: the build backend of the one sdist among them (iopath, a torchrec
    # dependency), which pip builds from the cache with --no-index
    "$1/bin/python" -m pip download --quiet --disable-pip-version-check -d "$UVMC_WHEEL_CACHE" \
        -c "$constraints" "${pkgs[@]}" setuptools wheel || return 1
    echo "uvmchunk: downloaded $(uvmc_gb $(($(uvmc_du "$UVMC_WHEEL_CACHE") - cache0))) in $((SECONDS - t0)) s;" \
         "installing them into $1 (about 7 GB)"
    t0=$SECONDS
    "$1/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
        --find-links "$UVMC_WHEEL_CACHE" -c "$constraints" "${pkgs[@]}" &&
        uvmc_installed "$1" "$t0" && uvmc_torch_ready "$1" "$2"
}

# The storage clients of tests/torch/test_s3.py and the local S3 server it starts (moto's server
# mode), under the set's constraints: a step of its own, whose failure only makes those tests skip
# (or, under CI=true with the first set, fail).
UVMC_S3_PACKAGES=("s3fs==2026.9.0" "s3torchconnector==1.5.0" "tenacity" "moto[server]==5.2.5")
uvmc_s3_ready() { # VENV
    "$1/bin/python" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in
                        ('s3fs', 's3torchconnector', 'tenacity', 'moto', 'flask')))" 2>/dev/null
}
uvmc_install_s3() { # VENV VERSION: only for the first set and 2.8.0 (the report's), where
    # tests/torch/test_s3.py runs; the other sets skip it (CI time is bounded)
    [ "$2" = "$UVMC_TORCH_VERSION" ] || [ "$2" = 2.8.0 ] || return 0
    uvmc_s3_ready "$1" && return 0
    local t0=$SECONDS cache=(--find-links "$UVMC_WHEEL_CACHE")
    [ "${CI:-}" = true ] && cache=(--no-cache-dir)
    echo "uvmchunk: installing ${UVMC_S3_PACKAGES[*]} into $1"
    if "$1/bin/python" -m pip install --quiet --disable-pip-version-check "${cache[@]}" \
            -c "$1/uvmchunk-constraints.txt" "${UVMC_S3_PACKAGES[@]}"; then
        echo "uvmchunk: installed the S3 clients in $((SECONDS - t0)) s"
    else
        echo "uvmchunk: could not install the S3 clients into $1: the S3 tests will be skipped there"
    fi
}

uvmc_install_one() { # VERSION: prints the venv's python on success
    local venv
    venv=$(uvmc_venv_for "$1")
    if uvmc_torch_ready "$venv" "$1" || uvmc_install_python_try "$venv" "$1" >&2; then
        [ "${UVMC_S3_LATER:-}" = 1 ] || uvmc_install_s3 "$venv" "$1" >&2  # tools/test.sh: beside the next set
        echo "$venv/bin/python"
        return 0
    fi
    if [ "${CI:-}" = true ]; then
        echo "uvmchunk: installing PyTorch $1 failed" >&2
        exit 1
    fi
    echo "uvmchunk: could not install PyTorch $1; its PyTorch tests will be skipped" >&2
}

uvmc_install_python() {
    if [ "${UVMC_NO_TORCH:-}" = 1 ]; then
        echo "uvmchunk: UVMC_NO_TORCH=1: the PyTorch tests will be skipped"
        return 0
    fi
    local v py t0
    # uvmc_install_one runs in a subshell: its exit under CI=true must end this shell too
    t0=$SECONDS
    UVMC_PYTHON=$(uvmc_install_one "$UVMC_TORCH_VERSION") || exit 1
    echo "uvmchunk: PyTorch $UVMC_TORCH_VERSION ready in $((SECONDS - t0)) s"
    for v in $UVMC_TORCH_VERSIONS; do
        t0=$SECONDS
        py=$(uvmc_install_one "$v") || exit 1
        echo "uvmchunk: PyTorch $v ready in $((SECONDS - t0)) s"
        [ -z "$py" ] || UVMC_PYTHONS="$UVMC_PYTHONS${UVMC_PYTHONS:+ }$v=$py"
    done
}

# The Python package of this tree (pyproject.toml), built once into a wheel and installed into every
# venv the tests use, so each runs the current package (its entry points included), never an older
# copy. UVMC_PACKAGE_WHEEL names the wheel afterwards (tests/python installs the same one).
uvmc_build_package() { # PYTHON
    local out=$UVMC_BUILD/package-wheel t0=$SECONDS
    echo "uvmchunk: building this tree's uvmchunk package (a wheel, with the library) for $1" >&2
    rm -rf "$out"
    mkdir -p "$out"
    # scikit-build-core (the build backend) is cached beside the wheels, for runs without the index
    "$1" -m pip download --quiet --disable-pip-version-check -d "$UVMC_WHEEL_CACHE" scikit-build-core >/dev/null 2>&1 || true
    if ! "$1" -m pip wheel --quiet --disable-pip-version-check --no-deps --find-links "$UVMC_WHEEL_CACHE" \
            -w "$out" "$UVMC_TOP" >"$out.log" 2>&1 &&
       ! "$1" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-index --find-links "$UVMC_WHEEL_CACHE" \
            -w "$out" "$UVMC_TOP" >>"$out.log" 2>&1; then
        tail -n 20 "$out.log" >&2
        echo "uvmchunk: building the Python package's wheel failed (log: $out.log)" >&2
        return 1
    fi
    UVMC_PACKAGE_WHEEL=$(ls "$out"/uvmchunk-*.whl)
    export UVMC_PACKAGE_WHEEL
    echo "uvmchunk: built $(basename "$UVMC_PACKAGE_WHEEL") in $((SECONDS - t0)) s" >&2
}
uvmc_install_package() { # PYTHON...: the wheel of this tree into each
    local py
    for py in "$@"; do
        "$py" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$UVMC_PACKAGE_WHEEL" ||
            { echo "uvmchunk: installing $UVMC_PACKAGE_WHEEL into $py failed" >&2; return 1; }
    done
}
uvmc_package_everywhere() { # the wheel into UVMC_PYTHON and every UVMC_PYTHONS entry
    [ -n "$UVMC_PYTHON" ] || return 0
    local pys=("$UVMC_PYTHON") e
    for e in $UVMC_PYTHONS; do pys+=("${e#*=}"); done
    uvmc_build_package "$UVMC_PYTHON" && uvmc_install_package "${pys[@]}" && return 0
    if [ "${CI:-}" = true ]; then exit 1; fi
    echo "uvmchunk: the tests run without the package of this tree installed" >&2
}

uvmc_install_packages

# bash tools/setup.sh torch [VERSION]: one venv with PyTorch VERSION (and its TorchRec pair) and this
# tree's package installed; prints its python.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    case ${1:-} in
        torch)
            v=${2:-$UVMC_TORCH_VERSION}
            py=$(uvmc_install_one "$v")
            [ -n "$py" ] || exit 1
            uvmc_build_package "$py" && uvmc_install_package "$py" || exit 1
            echo "$py"
            ;;
        *)
            echo "usage: bash tools/setup.sh torch [VERSION]   (a venv with PyTorch VERSION, default $UVMC_TORCH_VERSION," >&2
            echo "       its fbgemm-gpu/torchrec pair where one exists, and this tree's uvmchunk package)" >&2
            echo "       (sourced by tools/demo.sh and tools/test.sh otherwise)" >&2
            exit 2
            ;;
    esac
fi
