#!/usr/bin/env bash
# run.sh: builds (tools/setup.sh, into $UVMC_BUILD, default build/) and runs uvmchunk-bench, which
# prints one table: pass-through cost (callgrind), classification queries and chunked/unchunked
# throughput at 1 GiB, and extra memory and time from 64 MiB to 4 GiB. Figures only; no GPU needed.
source "$(dirname "$0")/../setup.sh"
command -v valgrind >/dev/null 2>&1 || echo "uvmchunk-bench: valgrind is not installed; the pass-through cost row is skipped"
uvmc_build
exec "$UVMC_BUILD/uvmchunk-bench" "$@"
