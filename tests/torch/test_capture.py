"""A copy PyTorch issues while its stream is capturing a CUDA graph passes through unchanged (one
graph node, nothing run, nothing split); the same copy outside the capture is split."""
import pytest

from conftest import run_body, SIZE


@pytest.mark.parametrize("with_lib", [False, True], ids=["plain", "uvmchunk"])
def test_copy_during_capture_passes_through(with_lib):
    r = run_body("capture", with_lib, "--size", str(SIZE))
    res = r.result
    assert (res["begin"], res["capturing"], res["end"]) == (0, 1, 0), r.describe()
    assert res["graph_nodes"] == 1, r.describe()
    assert res["captured_untouched"] is True and res["equal_after"] is True, r.describe()
    if with_lib:
        assert r.stats and r.stats[-1][0] == 1, r.describe()  # only the copy after the capture
