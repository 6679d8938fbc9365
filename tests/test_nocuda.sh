#!/bin/sh
# test_nocuda.sh LIB NEXT_INTERPOSER LATER_DLSYM [DLSYM_OBJECT]: the library preloaded into programs
# that never touch CUDA exits 0, writes nothing on stderr, and never loads a CUDA library (no
# DT_NEEDED, NOLOAD lookups: sglang#36533, triton#2845); it exports CUDA names only, no dlsym, so a dlsym exported by an
# object loaded after it (LATER_DLSYM, a stand-in for HAMi-core's libvgpu.so) still answers. With
# DLSYM_OBJECT (libuvmchunk-dlsym.so, x86-64), the same through it, which exports dlsym alone.
lib=$1
next_interposer=$2
later_dlsym=$3
dlsym_object=${4:-}
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() {
    err=$(LD_PRELOAD=$lib "$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 0 ] && [ -z "$err" ]; then ok; else bad "$* exited $rc, stderr: $err"; fi
}
check sh -c true
check cc --version
check python3 -c pass
maps=$(LD_PRELOAD=$lib sh -c 'cat /proc/$$/maps')
case $maps in
    *libuvmchunk.so*) ok ;;
    *) bad "the library was not preloaded" ;;
esac
case $maps in
    *libcuda*) bad "a CUDA library was loaded" ;;
    *) ok ;;
esac
if readelf -d "$lib" | grep -q 'NEEDED.*libcud'; then bad "DT_NEEDED on CUDA"; else ok; fi
# Exports: CUDA names only (runtime names under the nodes libcudart.so.12 and .13, which appear too).
others=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' |
    grep -v -E '^(cu(da)?[A-Z][A-Za-z0-9_]*|libcudart\.so\.1[23])$')
if [ -z "$others" ]; then ok; else bad "non-CUDA exports: $others"; fi
marker="import ctypes; ctypes.CDLL(None).uvmchunk_later_dlsym_marker"
# preload [OBJECTS...]: python3 finds the later dlsym's marker, and an RTLD_NEXT interposer behind
# the preloads keeps its scope (python3 prints a pid).
preloads() {
    out=$(LD_PRELOAD="$* $later_dlsym" python3 -c "$marker" 2>&1); rc=$?
    if [ $rc -eq 0 ] && [ -z "$out" ]; then ok; else bad "a dlsym loaded after [$*] was bypassed: rc $rc, $out"; fi
    out=$(LD_PRELOAD="$* $next_interposer" python3 -c 'import os; print(os.getpid())' 2>&1); rc=$?
    if [ $rc -eq 0 ] && [ "$out" -gt 0 ] 2>/dev/null; then ok; else
        bad "an RTLD_NEXT interposer behind [$*]: rc $rc, output: $out"; fi
}
preloads "$lib"
if [ -n "$dlsym_object" ]; then
    preloads "$dlsym_object" "$lib"
    exports=$(nm -D --defined-only "$dlsym_object" | awk '{print $3}')
    if [ "$exports" = dlsym ]; then ok; else bad "libuvmchunk-dlsym.so exports: $exports"; fi
    check python3 -c pass
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
