#!/bin/sh
# test_nocuda.sh LIB NEXT_INTERPOSER: the library preloaded into programs that never touch CUDA exits 0, writes
# nothing on stderr, and never loads a CUDA library (BRIEF §2: no DT_NEEDED, NOLOAD lookups).
lib=$1
next_interposer=$2
pass=0 fail=0
check() {
    err=$(LD_PRELOAD=$lib "$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 0 ] && [ -z "$err" ]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL: $* exited $rc, stderr: $err"; fi
}
check sh -c true
check cc --version
check python3 -c pass
maps=$(LD_PRELOAD=$lib sh -c 'cat /proc/$$/maps')
case $maps in
    *libuvmchunk.so*) pass=$((pass + 1)) ;;
    *) fail=$((fail + 1)); echo "FAIL: the library was not preloaded" ;;
esac
case $maps in
    *libcuda*) fail=$((fail + 1)); echo "FAIL: a CUDA library was loaded" ;;
    *) pass=$((pass + 1)) ;;
esac
if readelf -d "$lib" | grep -q 'NEEDED.*libcud'; then fail=$((fail + 1)); echo "FAIL: DT_NEEDED on CUDA"; else pass=$((pass + 1)); fi
# Another interposer behind ours keeps its RTLD_NEXT scope through our dlsym (python3 prints a pid).
out=$(LD_PRELOAD="$lib $next_interposer" python3 -c 'import os; print(os.getpid())' 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$out" -gt 0 ] 2>/dev/null; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: an RTLD_NEXT interposer behind ours: rc $rc, output: $out"; fi
others=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v -E '^(cu(da)?[A-Z][A-Za-z0-9_]*|dlsym)$')
if [ -z "$others" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: non-CUDA exports: $others"; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
