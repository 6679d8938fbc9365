"""torch.distributed.checkpoint save + load of a managed tensor in one process: the checkpoint
reloads bitwise equal, and the writer's whole-tensor copy (_OverlappingCpuLoader._refill) is split.
With the pinned-allocation substitution on (pinned_threshold below the table), the power-of-two
page-locked destination PyTorch asks for is served lazily, and as the split copy's destination stays
pageable: the simulator sees no pinned bytes."""
import pytest

from conftest import SIZE, run_body

POW2 = 1 << (SIZE - 1).bit_length()  # what PyTorch's caching host allocator asks for


@pytest.mark.parametrize("with_lib", [False, True], ids=["plain", "uvmchunk"])
def test_dcp_save_load(with_lib, tmp_path):
    r = run_body("dcp", with_lib, "--size", str(SIZE), "--dir", str(tmp_path / "ckpt"))
    res = r.result
    assert res["equal"] is True, r.describe()
    if with_lib:
        assert r.stats and r.stats[-1][:2] == (1, SIZE), r.describe()
    else:
        assert not r.stats, r.describe()
        assert res["pinned_peak"] >= POW2, r.describe()  # the full power-of-two buffer was pinned


def test_dcp_pinned_substitution(tmp_path):
    r = run_body("dcp", True, "--size", str(SIZE), "--dir", str(tmp_path / "ckpt"),
                 lib_env={"UVMCHUNK_PINNED_THRESHOLD": "64MiB"})
    res = r.result
    assert res["equal"] is True, r.describe()
    assert r.stats and r.stats[-1][:2] == (1, SIZE), r.describe()
    assert r.pinned and r.pinned[-1][0] >= 1 and r.pinned[-1][1] >= POW2, r.describe()
    print(f"pinned asked by PyTorch: {r.pinned[-1][1]} bytes in {r.pinned[-1][0]} requests, served "
          f"lazily ({r.pinned[-1][2]} pinned later); page-locked bytes at peak (simulator): {res['pinned_peak']}")
    assert res["pinned_peak"] < POW2, r.describe()
