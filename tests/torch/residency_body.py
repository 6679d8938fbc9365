"""Body of test_report.py's resident-pages test: a managed table saved to a local folder, then
loaded into a freshly allocated managed table (untouched: none of its pages resident yet, as
FBGEMM's new_managed_tensor leaves one), with no code change of ours. The table's resident bytes
are read around the load independently of the package: its pages' present bits in
/proc/self/pagemap, not mincore(2). argv: the table's size (bytes, a multiple of the page
size), the checkpoint folder. One RESULT line."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from torch_body import cuda_from, managed_empty, pattern, result  # noqa: E402


def present_bytes(ptr, nbytes):
    """Bytes of the pages of [ptr, ptr + nbytes) present in memory now: bit 63 of each page's entry
    in /proc/self/pagemap (the kernel's admin-guide/mm/pagemap.rst; readable by the process itself,
    which sees the flags, not the frame numbers). Exactly the table's pages: its mapping in
    /proc/self/smaps may be merged with a neighbour's (two anonymous mmaps side by side)."""
    page = os.sysconf("SC_PAGE_SIZE")
    first, last = ptr // page, (ptr + nbytes - 1) // page
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(first * 8)
        raw = f.read((last - first + 1) * 8)
    entries = memoryview(raw).cast("Q")
    return sum(1 for e in entries if e >> 63) * page


def main():
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    size, ckpt = int(sys.argv[1]), sys.argv[2]
    src = cuda_from(pattern(size, 1), managed=True)
    dcp.save({"t": src}, checkpoint_id=ckpt, no_dist=True)
    fresh = managed_empty(size)
    before = present_bytes(fresh.data_ptr(), size)
    dcp.load({"t": fresh}, checkpoint_id=ckpt, no_dist=True)
    after = present_bytes(fresh.data_ptr(), size)
    result(before=before, after=after, equal=torch.equal(fresh.cpu(), src.cpu()))


if __name__ == "__main__":
    main()
