"""Test body of test_torchrec.py, one torchrun rank: the integration harness's TorchRec job
(integration/torchrec_job.py: the model, the checkpoint round trip, the figures) at its default,
CI-sized tables, on the simulated runtime, where it writes the tables through the CPU and trains
nothing. Each rank prints one line `RESULT <json>` per output kind (ShardedTensor, DTensor).

usage: torchrec_body.py --mode stock|preload|planner|auto --dir DIR [--outputs sharded,dtensor]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
from torchrec_job import main  # noqa: E402  (the harness's job)

if __name__ == "__main__":
    main()
