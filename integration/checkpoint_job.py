"""checkpoint_job.py: the users' job in miniature, for integration/run.sh.

Run by `torchrun --standalone --nproc_per_node=2` (gloo, both ranks on cuda:0; NCCL refuses two
ranks on one GPU). Each rank builds a state dict holding one managed-memory table of --size bytes
(cudaMallocManaged with FBGEMM's advice, through integration/managed_alloc.c as a
torch.cuda.memory.CUDAPluggableAllocator in a torch.cuda.MemPool) plus ordinary CUDA tensors,
saves it with torch.distributed.checkpoint.save, loads it back into fresh tensors of the same kinds
and checks every byte. Each rank then writes ONE line (one os.write) `RESULT <json>` on stdout:
seconds (save, load, wall), peak resident host memory (VmHWM of /proc/self/status), the save's own
peak above the resident memory just before it (save_extra: the peak is reset with
/proc/self/clear_refs first), the load's own peak measured the same way (load_extra, the fresh
tensors zero-filled first), pinned figures, zero-copy views the planners took, whether libuvmchunk
was mapped in the process. The library's own `uvmchunk: stats:` line
comes on the rank's stderr at exit; run.sh collects it from torchrun's per-rank logs.

The same script serves the real GPU and the simulated CUDA runtime (tests/sim): no operation here
launches a kernel (the simulator cannot run one): CUDA tensors are made with torch.empty and filled
with host-to-device .copy_(), and every comparison is made on the CPU.

Environment: UVMC_MANAGED_ALLOC = path of managed_alloc.so (required).
usage: checkpoint_job.py --size BYTES [--dir DIR] [--chunk BYTES] [--mode stock|serial|planner|async|s3fs|s3torchconnector]

--mode s3fs / s3torchconnector: --dir is an s3://BUCKET/PATH URL, saved to and loaded from with
stock DCP calls through that client: checkpoint_id=URL (DCP's FsspecWriter / FsspecReader over
s3fs), or the S3 Connector's S3StorageWriter / S3StorageReader; the endpoint and credentials come
from the environment (AWS_ENDPOINT_URL: run.sh points it at a moto server on 127.0.0.1).

--mode async saves with dcp.async_save and waits for its upload; the result line then also holds
"async": the stall (async_save returning) and the upload's completion in seconds, the peaks of
RssAnon, RssFile and RssShmem above their values just before the call (sampled every 5 ms), and
the seconds of a dd of the same bytes with fsync into the checkpoint's folder, for scale.
"""
import argparse
import ctypes
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

from uvmc_managed import managed_empty  # next to this script

# Ordinary CUDA tensors, float32, replicated: the same keys and bytes on every rank (DCP saves one
# copy). The managed table is sharded: its key names the rank, and its bytes differ per rank.
PLAIN_TENSORS = {"dense.weight": (1024, 1024), "dense.bias": (1024,)}
REPLICA_SEED = 999


def report(**kw):
    # one write(2) of one line: both ranks share torchrun's stdout
    os.write(1, ("RESULT " + json.dumps(kw, sort_keys=True) + "\n").encode())


def proc_status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None


def reset_peak():
    """Resets VmHWM to the current resident size (Linux: '5' to /proc/self/clear_refs), so the next
    VmHWM reading is the peak from here on. False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def mapped(name):
    with open("/proc/self/maps") as f:
        return sorted({ln.split()[-1] for ln in f if ln.rstrip().endswith(name) or ("/" + name) in ln})


def sim_driver():
    """The simulated driver's control API (tests/sim/uvmsim.h) when this process runs on it."""
    for path in mapped("libcuda.so.1"):
        try:
            drv = ctypes.CDLL(path)
        except OSError:
            continue
        if hasattr(drv, "uvmsim_pinned_peak"):
            drv.uvmsim_pinned_peak.restype = ctypes.c_ulonglong
            return drv
    return None


class Filler:
    """Deterministic content, block by block: a random block of the seed, XORed with the block
    index. Regenerated to verify, so no reference copy is held in host memory (it would distort the
    peak RSS figure)."""

    def __init__(self, chunk, seed):
        import torch
        self.chunk = chunk
        g = torch.Generator().manual_seed(1000 + seed)
        self.base = torch.randint(0, 256, (chunk,), dtype=torch.uint8, generator=g)

    def expected(self, index, n):
        b = self.base[:n]
        return b ^ (index & 0xFF) if index & 0xFF else b


def fill(t, filler):
    """Write the pattern into CUDA tensor t (any dtype, contiguous) block by block: host-to-device
    copies only."""
    import torch
    flat = t.view(-1).view(torch.uint8)
    n, c = flat.numel(), filler.chunk
    for i, off in enumerate(range(0, n, c)):
        m = min(c, n - off)
        flat[off:off + m].copy_(filler.expected(i, m))
    torch.cuda.synchronize()


def zero(t, chunk):
    """Zero-fill CUDA tensor t block by block (host-to-device copies only), so every page is
    resident before a measurement, as FBGEMM zero-fills a new table (memory_utils.cu)."""
    import torch
    flat = t.view(-1).view(torch.uint8)
    zeros = torch.zeros(min(chunk, flat.numel()), dtype=torch.uint8)
    for off in range(0, flat.numel(), zeros.numel()):
        m = min(zeros.numel(), flat.numel() - off)
        flat[off:off + m].copy_(zeros[:m])
    torch.cuda.synchronize()


def verify(t, filler):
    """Copy t back block by block (each block below any copy threshold) and compare on the CPU."""
    import torch
    flat = t.view(-1).view(torch.uint8)
    n, c = flat.numel(), filler.chunk
    host = torch.empty(c, dtype=torch.uint8)
    for i, off in enumerate(range(0, n, c)):
        m = min(c, n - off)
        host[:m].copy_(flat[off:off + m])  # device-to-host, synchronous
        if not torch.equal(host[:m], filler.expected(i, m)):
            return False
    return True




def make_state(size, rank):
    """The state dict's tensors, empty: this rank's managed table (float32 rows of 256) and the
    replicated plain CUDA tensors; with the seed of each one's content."""
    import torch
    rows = size // (256 * 4)
    state = {f"table_rank{rank}.weight": (managed_empty((rows, 256), torch.float32), rank)}
    for k, shape in PLAIN_TENSORS.items():
        state[k] = (torch.empty(shape, dtype=torch.float32, device="cuda"), REPLICA_SEED)
    return state


def host_pinned_peak():
    """Peak bytes PyTorch's caching host allocator held (what it asked cudaHostAlloc for)."""
    import torch
    try:
        s = torch.cuda.host_memory_stats()
    except Exception:  # noqa: BLE001  (older PyTorch)
        return None
    for key in ("reserved_bytes.peak", "allocated_bytes.peak", "reserved_bytes.all.peak"):
        if key in s:
            return int(s[key])
    return None


class Sampler:
    """Peaks of /proc/self/status fields (bytes) in a thread, every 5 ms, from start() to stop()."""

    KEYS = ("RssAnon", "RssFile", "RssShmem")

    def __init__(self):
        import threading
        self.peak = {k: 0 for k in self.KEYS}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def sample(self):
        for k in self.KEYS:
            self.peak[k] = max(self.peak[k], proc_status(k) or 0)

    def run(self):
        while not self.done.is_set():
            self.sample()
            time.sleep(0.005)

    def start(self):
        self.base = {k: proc_status(k) or 0 for k in self.KEYS}
        self.thread.start()

    def stop(self):
        self.done.set()
        self.thread.join()
        self.sample()
        return {k: self.peak[k] - self.base[k] for k in self.KEYS}


def async_save(dcp, state, ckpt):
    """dcp.async_save, then its upload waited for: (figures, seconds until the upload completed)."""
    import gc
    import subprocess
    sampler = Sampler()
    sampler.start()
    t0 = time.monotonic()
    resp = dcp.async_save(state, checkpoint_id=ckpt)
    stall = time.monotonic() - t0
    getattr(resp, "upload_completion", resp).result()
    upload = time.monotonic() - t0
    del resp
    time.sleep(0.5)  # the upload thread drops the staged copy just after the future completes
    gc.collect()
    peaks = sampler.stop()
    left = {k: (proc_status(k) or 0) - sampler.base[k] for k in Sampler.KEYS}
    nbytes = sum(t.numel() * t.element_size() for t in state.values())
    target = os.path.join(ckpt, f"dd-{os.getpid()}.tmp")
    t0 = time.monotonic()
    subprocess.run(["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={max(1, nbytes >> 20)}", "conv=fsync"],
                   capture_output=True, check=False)
    dd = time.monotonic() - t0
    os.unlink(target) if os.path.exists(target) else None
    return {"stall_s": stall, "upload_s": upload, "dd_s": dd, "anon_peak": peaks["RssAnon"],
            "file_peak": peaks["RssFile"], "shmem_peak": peaks["RssShmem"], "anon_left": left["RssAnon"],
            "file_left": left["RssFile"]}, upload


def views_taken(what, planner):
    """Zero-copy views of this process's save or load: the explicit planner's count, else the
    automatic path's (uvmchunk.dcp, imported by the package's hook when it is active), else 0."""
    views = getattr(getattr(planner, "zero_copy", None), "views", None)
    if views is not None:
        return views
    auto = sys.modules.get("uvmchunk.dcp")
    return auto.views_taken()[what] if auto is not None and hasattr(auto, "views_taken") else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, required=True, help="managed table bytes per rank (multiple of 1 KiB)")
    p.add_argument("--dir", help="checkpoint folder (default: a temporary folder, removed after)")
    p.add_argument("--chunk", type=int, default=8 << 20, help="fill/verify block bytes (below the copy threshold)")
    p.add_argument("--mode", choices=("stock", "serial", "planner", "async", "s3fs", "s3torchconnector"),
                   default="stock",
                   help="stock DCP; serial: FileSystemWriter(per_thread_copy_ahead=0); planner: uvmchunk.dcp's "
                        "ZeroCopy planners; async: dcp.async_save; s3fs / s3torchconnector: --dir is an s3:// URL "
                        "saved to through that client")
    a = p.parse_args()
    t_start = time.monotonic()

    import warnings
    warnings.filterwarnings("ignore")
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    save_kw, load_kw = {}, {}
    if a.mode == "planner":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
        from uvmchunk.dcp import ZeroCopyLoadPlanner, ZeroCopySavePlanner
        save_kw, load_kw = {"planner": ZeroCopySavePlanner()}, {"planner": ZeroCopyLoadPlanner()}
    if a.mode == "s3torchconnector":  # s3fs needs nothing but the s3:// checkpoint_id
        from s3torchconnector.dcp import S3StorageReader, S3StorageWriter
        region = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
        save_kw, load_kw = {"storage_writer": S3StorageWriter(region, a.dir)}, {"storage_reader": S3StorageReader(region, a.dir)}

    dist.init_process_group("gloo")
    torch.cuda.set_device(0)  # every rank on GPU 0: gloo, never NCCL
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {"rank": rank, "world": world, "size": a.size, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0), "pid": os.getpid(),
           "preloaded": bool(mapped("libuvmchunk.so")), "ok": False}
    drv = sim_driver()
    out["simulated"] = drv is not None
    own_dir = None
    try:
        if a.size <= 0 or a.size % 1024:
            raise ValueError(f"--size {a.size}: want a positive multiple of 1024")
        free, total = torch.cuda.mem_get_info()
        out["gpu_free"], out["gpu_total"] = free, total
        # Never ask for more managed memory than the card has free (it can hang the GPU): all ranks share GPU 0,
        # and each holds its saved table and the fresh one it loads into.
        if 2 * a.size * world > free:
            raise RuntimeError(f"{world} x 2 x {a.size} managed bytes exceed the {free} bytes free on the GPU")

        ckpt = a.dir
        if ckpt is None:
            holder = [tempfile.mkdtemp(prefix="uvmc-ckpt-") if rank == 0 else None]
            dist.broadcast_object_list(holder, src=0)
            ckpt = own_dir = holder[0]

        fillers = {}
        made = make_state(a.size, rank)
        for t, seed in made.values():
            fillers.setdefault(seed, Filler(min(a.chunk, a.size), seed))
            fill(t, fillers[seed])
        state = {k: t for k, (t, _) in made.items()}
        out["bytes"] = sum(t.numel() * t.element_size() for t in state.values())
        del made
        dist.barrier()

        if a.mode == "serial":  # stock DCP's own lever: a blocking exact-size copy per tensor
            save_kw = {"storage_writer": dcp.FileSystemWriter(ckpt, per_thread_copy_ahead=0)}
        # what the save costs on top of what the job already holds (PyTorch, the tables)
        out["vmhwm_before_save"] = proc_status("VmHWM")  # the reset below forgets it
        peak_reset = reset_peak()
        rss_start = proc_status("VmRSS")
        t0 = time.monotonic()
        if a.mode == "async":
            out["async"], out["save_s"] = async_save(dcp, state, ckpt)
        else:
            dcp.save(state, checkpoint_id=ckpt, **save_kw)
            out["save_s"] = time.monotonic() - t0
        out["save_extra"] = proc_status("VmHWM") - rss_start if peak_reset else None
        out["rss_after_save"] = proc_status("VmRSS")
        out["held_after_save"] = out["rss_after_save"] - rss_start  # what the save left behind
        out["save_views"] = views_taken("save", save_kw.get("planner"))
        dist.barrier()

        # fresh tensors while the saved ones are still alive: the pool cannot hand the same memory
        # back, so a load that wrote nothing cannot pass the comparison
        made = make_state(a.size, rank)
        fresh = {k: t for k, (t, _) in made.items()}
        for t in fresh.values():  # resident, as a new table is: the load's figure is the load's own
            zero(t, a.chunk)
        # the load's own peak above what the job holds then, measured as the save's
        out["vmhwm_before_load"] = proc_status("VmHWM")  # the reset below forgets it
        peak_reset = reset_peak()
        rss_start = proc_status("VmRSS")
        t0 = time.monotonic()
        dcp.load(fresh, checkpoint_id=ckpt, **load_kw)
        torch.cuda.synchronize()
        out["load_s"] = time.monotonic() - t0
        out["load_extra"] = proc_status("VmHWM") - rss_start if peak_reset else None
        out["load_views"] = views_taken("load", load_kw.get("planner"))
        out["equal"] = {k: verify(t, fillers[seed]) for k, (t, seed) in made.items()}
        out["ok"] = all(out["equal"].values())
        del made, fresh, state
        dist.barrier()
    except Exception as e:  # noqa: BLE001  (reported in the result line, then exit 1)
        out["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    out["pinned_asked_peak"] = host_pinned_peak()
    out["pinned_locked_peak"] = int(drv.uvmsim_pinned_peak()) if drv else None
    out["vmhwm"] = max(proc_status("VmHWM"), out.get("vmhwm_before_save") or 0, out.get("vmhwm_before_load") or 0)
    out["wall_s"] = time.monotonic() - t_start
    report(**out)
    try:
        dist.destroy_process_group()
    finally:
        if own_dir and rank == 0:
            shutil.rmtree(own_dir, ignore_errors=True)
    sys.exit(0 if out["ok"] else 1)


if __name__ == "__main__":
    main()
