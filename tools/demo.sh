#!/usr/bin/env bash
# demo.sh [--compare] [--size BYTES[K|M|G]]: installs what is missing, builds, then runs
# uvmchunk-demo under uvmchunk-run: on the GPU when one is present, otherwise on the simulated CUDA
# runtime. Without arguments: --compare (the checkpoint sequence without and with the library, side
# by side).
source "$(dirname "$0")/setup.sh"
# the build is quiet (its output goes to the log) and takes about 30 s the first time
echo "uvmchunk: building into $UVMC_BUILD (about 30 s the first time; log: $UVMC_BUILD.log)"
uvmc_build
export UVMCHUNK_STATS=${UVMCHUNK_STATS:-on}
if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "uvmchunk: GPU found: running on the real CUDA runtime"
else
    echo "uvmchunk: no GPU found: running on the simulated CUDA runtime ($UVMC_BUILD/sim)"
    export LD_LIBRARY_PATH="$UVMC_BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
(($#)) || set -- --compare
exec "$UVMC_BUILD/uvmchunk-run" -- "$UVMC_BUILD/uvmchunk-demo" "$@"
