#!/bin/sh
# test_nocuda_more.sh LIB DLHEAVY [SIMDIR]: the library preloaded into processes with no CUDA: a shell
# running a pipeline, a C compiler compiling and linking a program, python3, and a program that
# calls dlopen/dlsym heavily. Each exits 0 with empty stderr, and the dynamic loader's own log
# (LD_DEBUG=files) shows libuvmchunk.so loaded and no CUDA library, in every process they start.
# SIMDIR (the simulated libcuda.so.1) goes on LD_LIBRARY_PATH, so a library that tried to load the
# driver would find one and be caught.
lib=$1 dlheavy=$2
[ -n "${3:-}" ] && export LD_LIBRARY_PATH=$3${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
printf 'int main(void){return 0;}\n' > "$tmp/t.c"
pass=0 fail=0
check() {
    name=$1; shift
    rm -f "$tmp"/ld.*
    err=$(LD_PRELOAD=$lib LD_DEBUG=files LD_DEBUG_OUTPUT=$tmp/ld "$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -ne 0 ] || [ -n "$err" ]; then
        fail=$((fail + 1)); echo "FAIL: $name exited $rc, stderr: $err"; return
    fi
    if ! cat "$tmp"/ld.* 2>/dev/null | grep -q 'libuvmchunk.so'; then
        fail=$((fail + 1)); echo "FAIL: $name: libuvmchunk.so was not preloaded"; return
    fi
    # "calling init" only for objects really loaded (a RTLD_NOLOAD probe also logs file=...).
    if cat "$tmp"/ld.* | grep -E 'calling init: [^ ]*libcud' >/dev/null; then
        fail=$((fail + 1)); echo "FAIL: $name: a CUDA library was loaded"; return
    fi
    pass=$((pass + 1))
}
check "sh pipeline" sh -c 'echo a | cat | wc -c >/dev/null; ls / >/dev/null'
check "cc compile+link" cc -O1 -o "$tmp/t" "$tmp/t.c"
check "compiled program" "$tmp/t"
check "python3 -c pass" python3 -c pass
check "python3 ctypes" python3 -c 'import ctypes, ctypes.util; ctypes.CDLL(ctypes.util.find_library("m")).cos'
check "dlopen/dlsym heavy" "$dlheavy"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
