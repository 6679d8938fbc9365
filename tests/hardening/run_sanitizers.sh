#!/usr/bin/env bash
# run_sanitizers.sh: CI's sanitizer, memcheck and fuzzing pass (issue 7). Builds the whole tree
# (library, simulated runtime, suites) with the same sanitizer flags, so the sanitizer runtime is
# a DT_NEEDED of the test program and precedes libc in the lookup scope even though CTest puts
# libuvmchunk.so first in LD_PRELOAD (hence verify_asan_link_order=0). Steps, each skippable:
#   asan      -fsanitize=address,undefined: every CTest suite except the ones that preload into
#             foreign programs (sh, cc, python3 are not instrumented)
#   tsan      -fsanitize=thread: the threaded suites (threads, concurrency, fork, capture, core)
#   memcheck  valgrind memcheck on interpose_core and harden_faults (release build)
#   fuzz      clang libFuzzer+ASan+UBSan on the config parser, FUZZ_SECONDS (default 60, max 120)
# Usage: run_sanitizers.sh [asan] [tsan] [memcheck] [fuzz]   (none: all four)
# Build dirs go under $UVMC_SAN_BUILD (default build-san/ at the top of the tree).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${UVMC_SAN_BUILD:-$top/build-san}
steps=${*:-asan tsan memcheck fuzz}
jobs=$(nproc)
command -v nvcc >/dev/null 2>&1 || export PATH="$PATH:/usr/local/cuda/bin"
status=0
started=$SECONDS
say() { printf '\n== run_sanitizers [%d s]: %s\n' "$((SECONDS - started))" "$*"; }

build() { # dir cflags
    cmake -S "$top" -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUVMC_WERROR=ON \
        -DCMAKE_C_FLAGS="$2" -DCMAKE_EXE_LINKER_FLAGS="$2" -DCMAKE_SHARED_LINKER_FLAGS="$2" >/dev/null
    cmake --build "$1" -j "$jobs" >/dev/null
}

for step in $steps; do
case $step in
asan)
    say "AddressSanitizer + UndefinedBehaviorSanitizer"
    build "$out/asan" "-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
    # The simulator's streams are detached threads that may still own queued ops at exit: leaks
    # there are the fixture's, not the library's; ASan still reports every overflow/use-after-free.
    ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 HARDEN_SECONDS=2 \
        ctest --test-dir "$out/asan" --output-on-failure -j "$jobs" \
        -E 'no_cuda_processes|demo|bench_|rtld_local|torch_|readme' || status=1
    ;;
tsan)
    say "ThreadSanitizer"
    build "$out/tsan" "-fsanitize=thread -fno-omit-frame-pointer"
    # tsan.supp: races the suites make on purpose (reading a destination while its copy runs).
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=0:suppressions=$top/tests/hardening/tsan.supp" \
        HARDEN_SECONDS=2 \
        ctest --test-dir "$out/tsan" --output-on-failure -j 1 \
        -R '^(threads|interpose_core|interpose_fidelity|harden_concurrency|harden_fork|harden_capture_cross|harden_capture_modes|harden_faults)$' \
        || status=1
    ;;
memcheck)
    say "valgrind memcheck"
    if ! command -v valgrind >/dev/null 2>&1; then echo "valgrind not installed: skipped"; continue; fi
    build "$out/plain" ""
    b=$out/plain
    vg=(valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
        --show-leak-kinds=definite --track-origins=yes)
    # UVMCHUNK_* as in tests/CMakeLists.txt; valgrind puts its own preload after ours.
    env LD_PRELOAD="$b/libuvmchunk.so" UVMCHUNK_CONFIG= UVMCHUNK_THRESHOLD=1MiB UVMCHUNK_CHUNK_SIZE=256KiB \
        UVMCHUNK_DEPTH=2 CK_FORK=no "${vg[@]}" "$b/tests/test_interpose" core || status=1
    env LD_PRELOAD="$b/libuvmchunk.so" UVMCHUNK_CONFIG= UVMCHUNK_THRESHOLD=1MiB UVMCHUNK_CHUNK_SIZE=256KiB \
        UVMCHUNK_DEPTH=4 "${vg[@]}" "$b/tests/hardening/harden_faults" core || status=1
    ;;
fuzz)
    say "libFuzzer on the config parser"
    cc=$(command -v clang-14 || command -v clang || true)
    if [ -z "$cc" ]; then echo "clang not installed: skipped"; continue; fi
    secs=${FUZZ_SECONDS:-60}
    [ "$secs" -le 120 ] || secs=120
    mkdir -p "$out/fuzz/corpus"
    "$cc" -g -O1 -std=c11 -D_GNU_SOURCE -DUVMC_LIBFUZZER -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=undefined -I"$top/config" "$top/config/config.c" \
        "$top/tests/hardening/fuzz_config.c" -o "$out/fuzz/fuzz_config"
    # New inputs go to the scratch corpus; the seed corpus in the tree is read only.
    (cd "$out/fuzz" && ./fuzz_config -max_total_time="$secs" -max_len=4096 -timeout=10 \
        -print_final_stats=1 corpus "$top/tests/hardening/fuzz_corpus" 2>&1 | tail -n 15) || status=1
    ;;
*) echo "run_sanitizers: unknown step $step (asan, tsan, memcheck, fuzz)"; exit 2 ;;
esac
done
say "$([ $status -eq 0 ] && echo 'all clean' || echo 'FAILURES above')"
exit $status
