"""Body of test_s3_version.py: a checkpoint prefix overwritten by another save of the same layout
while a load of it runs (an evaluator reading `latest/` while the trainer rewrites it). Per case
(client, which item the file holds first, bucket versioned or not): checkpoint A saved to
`<case>/latest`, checkpoint B (same keys, shapes and dtypes, other values) to `<case>/next`; then
dcp.load of `latest` into fresh targets, and once the load has committed its first item
(DefaultLoadPlanner.commit_tensor, which PyTorch's read_data and the library's call after each item)
every object of `next` is copied over `latest` (CopyObject). One RESULT per case: the exception's
chain as module.type names, or, when the load returned, which checkpoint each item's values came
from ("A", "B", or "other")."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s3_body import REGION, ROW, connector_fs  # noqa: E402
from s3_fault_body import chain  # noqa: E402
from torch_body import cuda_from, pattern, result  # noqa: E402

MIB = 1 << 20


def state(size, seed, table_first, managed=True):
    """The checkpoint's state dict: under key "a" an item of `size` bytes, under "b" one of half
    that, seeds seed and seed + 1; one is a managed table (read directly under the library), the
    other a CPU tensor (read by PyTorch's own code), the table under "a" when `table_first`.
    PyTorch's read_data reads items in its plan's order ("a" first); the connector's default reader
    sorts them by their offset in the file (s3torchconnector/dcp/s3_file_system.py,
    prepare_local_plan), so between the two clients each case is read in both orders (the RESULT's
    committed_first says which item came first). managed=False: zeros of the same layout, the
    table still managed (a fresh target)."""
    sizes = {"a": size, "b": size // 2}
    table = "a" if table_first else "b"
    out = {}
    for i, (k, n) in enumerate(sizes.items()):
        cpu = pattern(n, seed + i) if managed else torch.zeros(n, dtype=torch.uint8)
        out[k] = cuda_from(cpu.view(-1, ROW), managed=True) if k == table else cpu
    return out


def storage(a, client, url, writer, versioned):
    """dcp.save / dcp.load keywords for `url` through `client`."""
    if client == "s3fs":
        from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader, FsspecWriter
        if writer:
            return {"storage_writer": FsspecWriter(url)}
        return {"storage_reader": FsspecReader(url, **({"version_aware": True} if versioned else {}))}
    from s3torchconnector.dcp import S3StorageReader, S3StorageWriter
    s = S3StorageWriter(REGION, url) if writer else S3StorageReader(REGION, url)
    s.fs = connector_fs(a.endpoint, None if writer else s, writes=writer)
    return {"storage_writer" if writer else "storage_reader": s}


def overwrite_after_first_commit(fs, src, dst):
    """Copies every object under `src` over `dst` (s3fs's copy: CopyObject) once the load has
    committed its first item; returns the undo."""
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
    orig, done = DefaultLoadPlanner.commit_tensor, []

    def commit_tensor(self, read_item, tensor):
        out = orig(self, read_item, tensor)
        if not done:
            done.append(read_item.storage_index.fqn)
            for path in fs.ls(src, refresh=True):
                fs.copy(path, f"{dst}/{path.rsplit('/', 1)[1]}")
        return out

    DefaultLoadPlanner.commit_tensor = commit_tensor
    return lambda: setattr(DefaultLoadPlanner, "commit_tensor", orig), done


def case(a, fs, client, size, table_first, versioned):
    import torch.distributed.checkpoint as dcp
    bucket = f"{a.bucket}-v" if versioned else a.bucket
    first = "table" if table_first else "dense"
    prefix = f"{bucket}/{client}-{first}-first"
    saved = {"A": state(size, 1, table_first), "B": state(size, 3, table_first)}
    dcp.save(saved["A"], **storage(a, client, f"s3://{prefix}/latest", True, False))
    dcp.save(saved["B"], **storage(a, client, f"s3://{prefix}/next", True, False))
    back = state(size, 0, table_first, managed=False)
    undo, committed = overwrite_after_first_commit(fs, f"{prefix}/next", f"{prefix}/latest")
    errors, values = [], {}
    try:
        dcp.load(back, **storage(a, client, f"s3://{prefix}/latest", False, versioned))
    except BaseException as e:  # noqa: BLE001  (DCP's CheckpointException is a BaseException)
        errors = [f"{type(x).__module__}.{type(x).__qualname__}" for x in chain(e)]
    finally:
        undo()
    if not errors:
        for k, v in back.items():
            v = v.cpu()
            values[k] = next((name for name, sd in saved.items() if torch.equal(v, sd[k].cpu())), "other")
    result(client=client, first=first, versioned=versioned, committed_first=committed,
           errors=errors, values=values)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--bucket", required=True, help="a bucket; BUCKET-v is made here, with versioning on")
    p.add_argument("--clients", required=True, help="s3fs and/or connector, comma-separated")
    p.add_argument("--size", type=int, required=True, help="the larger item's bytes")
    a = p.parse_args()
    import warnings
    warnings.filterwarnings("ignore")
    import s3fs
    os.environ["AWS_ENDPOINT_URL"] = a.endpoint
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    fs.mkdir(f"{a.bucket}-v")
    fs.call_s3("put_bucket_versioning", Bucket=f"{a.bucket}-v", VersioningConfiguration={"Status": "Enabled"})
    for client in a.clients.split(","):
        for table_first in (True, False):
            case(a, fs, client, a.size, table_first, False)
    if "s3fs" in a.clients.split(","):  # s3fs's version_aware file system pins VersionId (the connector has no such setting)
        case(a, fs, "s3fs", a.size, False, True)


if __name__ == "__main__":
    main()
