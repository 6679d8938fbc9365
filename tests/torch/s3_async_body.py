"""Body of test_s3_async.py: dcp.async_save of a managed table (--size) and a 64 MiB ordinary CUDA
tensor to a local S3 server (moto, started by the test) through s3fs (checkpoint_id="s3://...") or
s3torchconnector's S3StorageWriter (s3_body.storage). Right after async_save returns both tensors are
overwritten (the next training step); the checkpoint is then loaded back and compared with the bytes
at the call. Peak RssAnon above the state before the call is sampled every 2 ms until the upload
completed (spill_body.Sampler), peak resident (VmHWM) beside it. Prints one line `RESULT <json>`."""
import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from s3_body import storage  # noqa: E402
from spill_body import Sampler  # noqa: E402
from torch_body import _clear_hwm, _status_kib, cuda_from, pattern, result  # noqa: E402

MIB = 1 << 20
DENSE = 64 * MIB


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--bucket", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--client", choices=("s3fs", "connector"), required=True)
    p.add_argument("--size", type=int, required=True)
    a = p.parse_args()
    os.environ["AWS_ENDPOINT_URL"] = a.endpoint
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    state = {"table": cuda_from(pattern(a.size, 3), managed=True),
             "dense": cuda_from(pattern(DENSE, 5), managed=False)}
    # the client's modules and first connection are not the checkpoint's: a 4 KiB save first
    dcp.save({"warm": torch.zeros(1024)}, **storage(a, True, f"{a.name}-warm"))
    gc.collect()
    torch.cuda.synchronize()
    torch._C._host_emptyCache()
    _clear_hwm()
    base, rss0 = _status_kib("RssAnon") * 1024, _status_kib("VmRSS") * 1024
    sampler = Sampler()
    sampler.start()
    t0 = time.monotonic()
    resp = dcp.async_save(state, **storage(a, True))
    stall = time.monotonic() - t0
    fill = torch.full((4 * MIB,), 0x5A, dtype=torch.uint8)  # no kernel runs on the simulator: copies
    for t in state.values():  # the next training step rewrites every byte at once
        for off in range(0, t.numel(), fill.numel()):
            t[off:off + fill.numel()].copy_(fill[:t.numel() - off])
    torch.cuda.synchronize()
    getattr(resp, "upload_completion", resp).result()
    upload = time.monotonic() - t0
    del resp
    gc.collect()
    peak = sampler.stop() - base
    resident = _status_kib("VmHWM") * 1024 - rss0
    back = {"table": torch.zeros(a.size, dtype=torch.uint8), "dense": torch.zeros(DENSE, dtype=torch.uint8)}
    dcp.load(back, **storage(a, False))
    equal = torch.equal(back["table"], pattern(a.size, 3)) and torch.equal(back["dense"], pattern(DENSE, 5))
    result(peak_anon_extra=peak, peak_resident_extra=resident, equal=equal, stall_s=round(stall, 3),
           upload_s=round(upload, 3))


if __name__ == "__main__":
    main()
