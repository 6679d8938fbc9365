#!/usr/bin/env bash
# run.sh [overhead|memory|throughput|all] [MiB]: builds (tools/setup.sh, into $UVMC_BUILD, default
# build/) and runs uvmchunk-bench: overhead (pass-through cost by callgrind, classification queries,
# chunked/unchunked throughput at 1 GiB, extra memory and time from 64 MiB to 4 GiB), memory (peak
# RSS without/with the library over the checkpoint sequence), throughput (host engine vs one copy).
# Figures only; no GPU needed.
source "$(dirname "$0")/../setup.sh"
command -v valgrind >/dev/null 2>&1 || echo "uvmchunk-bench: valgrind is not installed; the pass-through cost row is skipped"
echo "uvmchunk: building into $UVMC_BUILD (about 30 s the first time; log: $UVMC_BUILD.log)"
uvmc_build
exec "$UVMC_BUILD/uvmchunk-bench" "$@"
