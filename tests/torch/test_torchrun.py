"""torchrun --standalone --nproc_per_node=2 with gloo on one simulated GPU: each rank saves its own
managed table with torch.distributed.checkpoint; the checkpoint reloads bitwise equal, and each
rank's stats show its table's copy split."""
import sys

import pytest

from conftest import SIZE, run_body

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


@pytest.mark.parametrize("with_lib", [False, True], ids=["plain", "uvmchunk"])
def test_torchrun_two_ranks_gloo(with_lib, tmp_path):
    r = run_body("dcp_dist", with_lib, "--size", str(SIZE), "--dir", str(tmp_path / "ckpt"), launcher=TORCHRUN)
    assert sorted(x["rank"] for x in r.results) == [0, 1], r.describe()
    assert all(x["equal"] for x in r.results), r.describe()
    if with_lib:
        ranks_split = [s for s in r.stats if s[0] >= 1]
        assert len(ranks_split) == 2 and all(s[:2] == (1, SIZE) for s in ranks_split), r.describe()
    else:
        assert not r.stats, r.describe()
