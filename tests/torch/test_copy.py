"""tensor.to("cpu", non_blocking=True) of a managed tensor (FBGEMM's advice) is bitwise equal with
and without libuvmchunk, and the library splits it into blocks; an ordinary CUDA tensor from the
caching allocator (device memory) is never split."""
import pytest

from conftest import SIZE, run_body

# UVMCHUNK_CHUNK_SIZE=16MiB, UVMCHUNK_DEPTH=2 in conftest.LIB_ENV. PyTorch copies on the legacy
# stream, which nothing may wait for: the copy is queued on the copy engine in at most 4 x depth
# blocks of whole chunks (interpose/engine.c).
CHUNKS = -(-SIZE // (16 << 20))
PER_BLOCK = -(-CHUNKS // (4 * 2))
BLOCKS = -(-SIZE // (PER_BLOCK * (16 << 20)))


@pytest.mark.parametrize("with_lib", [False, True], ids=["plain", "uvmchunk"])
def test_managed_tensor_to_cpu_non_blocking(with_lib):
    r = run_body("managed", with_lib, "--size", str(SIZE))
    res = r.result
    assert res["memory_type"] == 3, r.describe()  # cudaMemoryTypeManaged
    assert res["pinned"] is True and res["equal"] is True, r.describe()
    # PyTorch's caching host allocator pins the power-of-two size (reported for the record)
    assert res["pinned_peak"] >= SIZE, r.describe()
    if with_lib:
        assert r.stats, r.describe()
        split, nbytes, blocks = r.stats[-1]
        assert (split, nbytes, blocks) == (1, SIZE, BLOCKS), r.describe()
    else:
        assert not r.stats, r.describe()


@pytest.mark.parametrize("with_lib", [False, True], ids=["plain", "uvmchunk"])
def test_ordinary_cuda_tensor_is_never_split(with_lib):
    r = run_body("plain", with_lib, "--size", str(SIZE))
    res = r.result
    assert res["memory_type"] == 2 and res["equal"] is True, r.describe()  # cudaMemoryTypeDevice
    if with_lib:
        assert r.stats and r.stats[-1][0] == 0, r.describe()
        assert r.passed and r.passed[-1][0] >= 1, r.describe()  # examined, passed through
