"""Bodies of test_s3.py: one managed table saved to a local S3 server (moto, started by the test)
with dcp.save through the real clients, then loaded back into a fresh managed table and compared.
--client s3fs: checkpoint_id="s3://BUCKET/NAME" (DCP's FsspecWriter / FsspecReader over s3fs);
--client connector: s3torchconnector's S3StorageWriter / S3StorageReader, their file system pointed
at the server. Prints the save's and the load's peak resident memory above the state before each
(VmHWM reset first, after a small save that loads the client), their seconds, and whether the
bytes came back equal, and the client's own download (and upload) of the same bytes in seconds."""
import argparse
import ctypes
import gc
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_body import _clear_hwm, _status_kib, cuda_from, pattern, result  # noqa: E402

MIB = 1 << 20
ROW = 4096
REGION = "us-east-1"


def connector_fs(endpoint, reader=None, writes=False):
    """The connector's DCP file system over the test's server (its writer and reader take no
    endpoint); a reader's own constructor object, or its range injection finds no ranges. For
    `writes`, its client set as README.md ("Checkpoint to S3") tells users to bound its upload
    buffers: at most 4 Gbps (10 connections, 40 parts in memory) and 5 MiB parts; a reader's keeps
    its defaults, but for the part size UVMC_S3_BENCH_READER_PART_MIB names (test_s3_bench.py)."""
    from s3torchconnector import S3ClientConfig
    from s3torchconnector._s3client import S3Client
    from s3torchconnector.dcp.s3_file_system import S3FileSystem
    reader_part = os.environ.get("UVMC_S3_BENCH_READER_PART_MIB")
    bound = ({"throughput_target_gbps": 4.0, "part_size": 5 << 20} if writes else
             {"part_size": int(reader_part) << 20} if reader_part else {})
    config = S3ClientConfig(force_path_style=True, **bound)
    client = S3Client(REGION, endpoint=endpoint, s3client_config=config)
    return S3FileSystem(REGION, s3_client=client,
                        reader_constructor=reader._reader_constructor if reader is not None else None)


def storage(a, writer, name=None):
    """(keyword, storage) for dcp.save / dcp.load of checkpoint `name` (default --name):
    checkpoint_id alone for s3fs, the connector's writer or reader otherwise."""
    if a.client == "file":  # DCP's FsspecReader / FsspecWriter over fsspec's local file system
        return {"checkpoint_id": f"file://{a.bucket}/{name or a.name}"}
    url = f"s3://{a.bucket}/{name or a.name}"
    if a.client == "s3fs":
        return {"checkpoint_id": url}
    from s3torchconnector.dcp import S3StorageReader, S3StorageWriter
    if writer:
        w = S3StorageWriter(REGION, url)
        w.fs = connector_fs(a.endpoint, writes=True)
        return {"storage_writer": w}
    if getattr(a, "reader", "default") == "default":  # dcp_optimized at 1.5.0; s3_async_body has no --reader
        r = S3StorageReader(REGION, url)
    else:
        from s3torchconnector.s3reader import S3ReaderConstructor
        r = S3StorageReader(REGION, url, reader_constructor=getattr(S3ReaderConstructor, a.reader)())
    r.fs = connector_fs(a.endpoint, r)
    return {"storage_reader": r}


def watch_writes(client):
    """The largest buffer the client's file's write() is handed, in a one-element list: fsspec's
    AbstractBufferedFile (s3fs) or the connector's S3Writer, wrapped in this process."""
    if client in ("s3fs", "file"):
        from fsspec.spec import AbstractBufferedFile as cls
    else:
        from s3torchconnector import S3Writer as cls
    largest, orig = [0], cls.write

    def write(self, data):
        largest[0] = max(largest[0], memoryview(data).nbytes)
        return orig(self, data)

    cls.write = write
    return largest


def measured(fn):
    """(peak resident bytes above the state before fn, seconds) of fn(). The state before is
    trimmed (glibc's malloc_trim): freed memory the allocator still held would otherwise serve
    fn()'s first allocations unseen, by an amount that depends on what ran before."""
    gc.collect()
    torch._C._host_emptyCache()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    _clear_hwm()
    rss0 = _status_kib("VmRSS")
    t0 = time.monotonic()
    fn()
    return (_status_kib("VmHWM") - rss0) * 1024, time.monotonic() - t0


def body_save_load(a):
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    src = pattern(a.size, 11)
    table = cuda_from(src.view(-1, ROW), managed=True)
    del src
    # the client's modules, its file system and its first connection are not the table's: a 4 KiB
    # save first (botocore's service models alone are tens of MiB)
    dcp.save({"warm": torch.zeros(1024)}, **storage(a, True, f"{a.name}-warm"))
    largest = watch_writes(a.client)
    save_peak, save_s = measured(lambda: dcp.save({"t": table}, **storage(a, True)))
    largest = largest[0]  # the save's: the raw upload below writes the whole data file at once
    del table
    if a.no_load:
        result(table_bytes=a.size, largest_write=largest, save_peak_extra=save_peak, save_s=save_s)
        return
    # --repeat (test_s3_bench.py): loads, each followed by the client's own download, that many
    # times; the median seconds and the largest memory are given, the raw upload timed after the last
    peaks, loads, raws, equal, raw_up_s = [], [], [], True, None
    for i in range(a.repeat):
        back = cuda_from(torch.zeros(a.size // ROW, ROW, dtype=torch.uint8), managed=True)
        peak, s = measured(lambda: dcp.load({"t": back}, **storage(a, False)))
        peaks.append(peak)
        loads.append(s)
        equal = equal and torch.equal(back.cpu().view(-1), pattern(a.size, 11))
        del back
        raw, raw_up_s = raw_transfers(a, upload=a.raw_upload and i == a.repeat - 1)
        raws.append(raw)
    load_peak, load_s, raw_s = max(peaks), statistics.median(loads), statistics.median(raws)
    result(equal=equal, table_bytes=a.size, largest_write=largest, save_peak_extra=save_peak, save_s=save_s,
           load_peak_extra=load_peak, load_s=load_s, raw_s=raw_s, raw_up_s=raw_up_s, load_all=loads, raw_all=raws)


def body_mixed(a):
    """A managed table between items DCP reads itself (a CPU tensor, a non-tensor value), saved
    and loaded back; whether all came back equal."""
    import warnings
    warnings.filterwarnings("ignore")
    import torch.distributed.checkpoint as dcp
    sd = {"t": cuda_from(pattern(a.size, 11).view(-1, ROW), managed=True), "cpu": pattern(2 * a.size, 12), "step": 7}
    dcp.save(sd, **storage(a, True))
    back = {"t": cuda_from(torch.zeros(a.size // ROW, ROW, dtype=torch.uint8), managed=True),
            "cpu": torch.zeros(2 * a.size, dtype=torch.uint8), "step": 0}
    dcp.load(back, **storage(a, False))
    result(equal=back["step"] == 7 and all(torch.equal(back[k].cpu(), sd[k].cpu()) for k in ("t", "cpu")))


def raw_transfers(a, upload):
    """Seconds the client itself takes to download the checkpoint's data file whole (s3fs's
    cat_ranges of 16 MiB parts, concurrent; the connector's get_object().read()) and, where
    `upload`, to upload those bytes again as one object (s3fs's pipe_file, the connector's
    put_object().write()): what a load and a save in pieces are compared with. Upload None otherwise."""
    if a.client == "file":
        path = [os.path.join(a.bucket, a.name, f) for f in os.listdir(os.path.join(a.bucket, a.name))
                if f.endswith(".distcp")][0]
        t0 = time.monotonic()
        with open(path, "rb") as f:
            n = len(f.read())
        assert n >= a.size, n
        return time.monotonic() - t0, None
    import s3fs
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": a.endpoint})
    data = [p for p in fs.ls(f"{a.bucket}/{a.name}") if p.endswith(".distcp")][0]
    bucket, key = data.split("/", 1)
    t0 = time.monotonic()
    if a.client == "s3fs":  # concurrent ranged GETs of 16 MiB (fsspec's cat_ranges, one batch)
        size = fs.size(data)
        starts = list(range(0, size, 16 * MIB))
        raw = b"".join(fs.cat_ranges([data] * len(starts), starts, [min(x + 16 * MIB, size) for x in starts]))
    else:
        raw = connector_fs(a.endpoint)._client.get_object(bucket, key).read()
    down = time.monotonic() - t0
    assert len(raw) >= a.size, len(raw)
    if not upload:
        return down, None
    t0 = time.monotonic()
    if a.client == "s3fs":
        fs.pipe_file(f"{data}.raw", raw)
    else:
        with connector_fs(a.endpoint, writes=True)._client.put_object(bucket, f"{key}.raw") as w:
            w.write(raw)
    return down, time.monotonic() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("body")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--bucket", required=True, help="the bucket; for --client file, a local folder")
    p.add_argument("--name", required=True)
    p.add_argument("--client", choices=("s3fs", "connector", "file"), required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--reader", choices=("default", "sequential", "range_based"), default="default",
                   help="the connector's S3StorageReader's reader_constructor (S3ReaderConstructor)")
    p.add_argument("--no-load", action="store_true", help="save only")
    p.add_argument("--raw-upload", action="store_true", help="also time the client's own upload of the data")
    p.add_argument("--repeat", type=int, default=1, help="loads, each followed by the client's own download")
    a = p.parse_args()
    os.environ["AWS_ENDPOINT_URL"] = a.endpoint
    globals()["body_" + a.body](a)


if __name__ == "__main__":
    main()
