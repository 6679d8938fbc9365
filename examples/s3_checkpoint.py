"""A managed-memory table (FBGEMM's new_managed_tensor, as its UVM embedding tables are) saved to S3
with torch.distributed.checkpoint and loaded back, through either client, with no uvmchunk code:

    uvmchunk-run -- python examples/s3_checkpoint.py s3://BUCKET/PATH --client s3fs
    uvmchunk-run -- python examples/s3_checkpoint.py s3://BUCKET/PATH --client s3torchconnector

s3fs: checkpoint_id="s3://..." (DCP picks its FsspecWriter / FsspecReader). s3torchconnector: its
S3StorageWriter / S3StorageReader. Both clients take the endpoint from AWS_ENDPOINT_URL (botocore
for s3fs; at s3torchconnector 1.5.0 its native client, mountpoint-s3-client's s3_crt_client.rs),
so the same command runs against a local S3 server with that one variable set. Prints one line: the table's size, whether it came back equal,
and the save's and load's seconds; the library's per-checkpoint lines name the store. A failed
save or load ends with one line naming the client's error, the S3 code and message where it has
them (exit 1); a URL that is not s3:// is refused (exit 2)."""
import argparse
import os
import sys
import time
import warnings

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException


def storage(url: str, client: str, save: bool) -> dict:
    """dcp.save / dcp.load's keyword argument for `url` through `client`."""
    if client == "s3fs":
        return {"checkpoint_id": url}
    try:  # its DCP classes import tenacity, which only the connector's dcp extra installs
        from s3torchconnector import S3ClientConfig
        from s3torchconnector.dcp import S3StorageReader, S3StorageWriter
    except ImportError as e:
        sys.exit(f"uvmchunk: s3_checkpoint.py: s3torchconnector's DCP classes do not import ({type(e).__name__}: "
                 f"{e}): install `pip install 's3torchconnector[dcp]'` into this Python ({sys.executable})")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    if not save:
        return {"storage_reader": S3StorageReader(region, url)}
    # the connector's client keeps up to 4 parts per connection in memory while it uploads (aws-c-s3
    # source/s3_client.c; 10 connections up to 4 Gbps): 40 parts of 5 MiB, 200 MiB, where its
    # defaults (10 Gbps, 8 MiB) allow 100 of 8 MiB; an object then holds at most 10,000 parts (S3's
    # limit) of 5 MiB, 48.8 GiB: a rank that writes more needs larger parts
    bounded = S3ClientConfig(throughput_target_gbps=4.0, part_size=5 << 20)
    return {"storage_writer": S3StorageWriter(region, url, s3client_config=bounded)}


def root_cause(e: BaseException) -> BaseException:
    """The error a failed dcp.save / dcp.load started from: DCP's CheckpointException keeps each
    rank's in ``failures`` (torch/distributed/checkpoint/api.py: the exception and its stack), each
    with its own cause chain."""
    seen = set()
    while id(e) not in seen:
        seen.add(id(e))
        failures = getattr(e, "failures", None)
        if failures:
            e = next(iter(failures.values()))
            e = e[0] if isinstance(e, tuple) else e
        elif e.__cause__ is not None or e.__context__ is not None:
            e = e.__cause__ or e.__context__
        else:
            break
    return e


def error_line(e: BaseException) -> str:
    """`e` as one line, in full: the S3 error code and message where the client's error carries
    them ("NoSuchBucket: The specified bucket does not exist"; the connector's S3Exception holds the
    XML error body), by uvmchunk's own reading of store errors when the package is there."""
    try:
        from uvmchunk._store_errors import describe
    except ImportError:
        return f"{type(e).__name__}: {' '.join(str(e).split())}"
    return describe(e)


def main() -> None:
    p = argparse.ArgumentParser(description="A managed-memory table saved to S3 with "
                                "torch.distributed.checkpoint and loaded back, through s3fs or s3torchconnector. "
                                "Region: AWS_REGION or AWS_DEFAULT_REGION (default us-east-1); endpoint: "
                                "AWS_ENDPOINT_URL (default AWS).")
    p.add_argument("url", help="s3://BUCKET/PATH: the checkpoint")
    p.add_argument("--client", choices=("s3fs", "s3torchconnector"), default="s3fs",
                   help="the storage client DCP saves and loads through (default s3fs)")
    p.add_argument("--mib", type=int, default=64, help="the table's size in MiB (default 64)")
    a = p.parse_args()
    if not a.url.startswith("s3://") or len(a.url) <= len("s3://"):
        print(f"uvmchunk: s3_checkpoint.py: the checkpoint is an s3://BUCKET/PATH URL, not {a.url!r}", file=sys.stderr)
        sys.exit(2)
    warnings.filterwarnings("ignore")  # DCP's "assuming the intent is to save in a single process"
    if not torch.cuda.is_available():
        sys.exit("uvmchunk: s3_checkpoint.py: no CUDA device here (see README \"Try it without a GPU\")")
    import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm)
    n = a.mib << 20
    src = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    table = torch.ops.fbgemm.new_managed_tensor(torch.empty(0, dtype=torch.uint8, device="cuda"), [n])
    table.copy_(src)  # a host-to-device copy
    back = torch.ops.fbgemm.new_managed_tensor(torch.empty(0, dtype=torch.uint8, device="cuda"), [n])
    step = "save"
    try:
        t0 = time.monotonic()
        dcp.save({"table": table}, no_dist=True, **storage(a.url, a.client, True))
        t1 = time.monotonic()
        step = "load"
        dcp.load({"table": back}, no_dist=True, **storage(a.url, a.client, False))
        t2 = time.monotonic()
    except (Exception, CheckpointException) as e:  # noqa: BLE001  (a BaseException: torch/distributed/checkpoint/api.py)
        print(f"uvmchunk: s3_checkpoint.py: the {step} to {a.url} through {a.client} failed: "
              f"{error_line(root_cause(e))}", file=sys.stderr)
        sys.exit(1)
    equal = torch.equal(back.cpu(), src)
    print(f"{a.client}: {a.mib} MiB to {a.url} and back, {'equal' if equal else 'NOT EQUAL'}; "
          f"save {t1 - t0:.2f} s, load {t2 - t1:.2f} s", flush=True)
    sys.exit(0 if equal else 1)


if __name__ == "__main__":
    main()
