#!/bin/sh
# test_nocuda.sh LIB: the library preloaded into programs that never touch CUDA exits 0, writes
# nothing on stderr, and never loads a CUDA library (BRIEF §2: no DT_NEEDED, NOLOAD lookups).
lib=$1
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
others=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v -E '^cu(da)?[A-Z][A-Za-z0-9_]*$')
if [ -z "$others" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: non-CUDA exports: $others"; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
