"""torchrun --standalone --nproc_per_node=2 with gloo on one simulated GPU: each rank saves its own
managed table with torch.distributed.checkpoint; the checkpoint reloads bitwise equal, and each
rank's stats show its table's copy split. And a two-node launch on one machine: two torchrun agents
(--nnodes=2, c10d rendezvous on 127.0.0.1) under uvmchunk-run; the launcher's environment reaches
every worker of every agent."""
import os
import socket
import subprocess
import sys

import pytest

from conftest import SIZE, Run, _need, run_body, sim_env

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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_agents_c10d_rendezvous_under_uvmchunk_run(tmp_path):
    """Two torchrun agents on this machine, each launched by uvmchunk-run --config FILE (as a job
    scheduler would start one per node), rendezvous over c10d on 127.0.0.1 into one job of four
    workers; every worker has the library first in LD_PRELOAD and mapped, sees the config file, and
    its copy of a managed table is split by the library (one stats line per worker)."""
    lib = os.path.realpath(_need("UVMC_LIB"))
    run = os.path.join(os.path.dirname(lib), "uvmchunk-run")
    conf = tmp_path / "uvmchunk.conf"
    conf.write_text("threshold = 16MiB\nchunk_size = 8MiB\ndepth = 2\nstats = on\n")
    port = free_port()
    env = sim_env(False)  # the simulator only; the library and its settings come from uvmchunk-run
    _need("UVMC_MANAGED_ALLOC")
    agents = []
    for node in (0, 1):
        cmd = [run, "--config", str(conf), "--", sys.executable, "-m", "torch.distributed.run",
               "--nnodes=2", "--nproc_per_node=2", f"--node_rank={node}", "--rdzv_backend=c10d",
               f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=uvmchunk-two-agents",
               f"--rdzv_conf=is_host={1 if node == 0 else 0}",
               _need("UVMC_TORCH_BODY"), "launch_env", "--size", str(32 << 20)]
        agents.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    runs = []
    try:
        for p in agents:
            out, err = p.communicate(timeout=400)
            runs.append(Run(subprocess.CompletedProcess(p.args, p.returncode, out, err)))
    finally:
        for p in agents:
            if p.poll() is None:
                p.kill()
    for node, r in enumerate(runs):
        assert r.rc == 0, f"agent {node}: " + r.describe()
        assert sorted(x["local_rank"] for x in r.results) == [0, 1], r.describe()
        assert all(x["node"] == node for x in r.results), r.describe()
        # one stats line per worker of this agent, each with its copy split
        assert len(r.stats) == 2 and all(s[:2] == (1, 32 << 20) for s in r.stats), r.describe()
        for x in r.results:
            print(f"agent {node} worker rank {x['rank']} (local {x['local_rank']}): LD_PRELOAD first "
                  f"{x['preload_first']}, library mapped {x['lib_mapped']}, UVMCHUNK_CONFIG {x['config']}")
    workers = [x for r in runs for x in r.results]
    assert sorted(x["rank"] for x in workers) == [0, 1, 2, 3], runs[0].describe()
    for x in workers:
        assert x["world"] == 4 and x["all_reduce"] == 4 and x["equal"], x
        assert x["preload_first"] == lib and x["lib_mapped"], x
        assert x["config"] == str(conf), x
