"""Body of test_s3_faults.py: one process, one managed table, every fault case of one S3 client in
sequence against moto's server (the test's own, and servers the test started for this body to
kill), one RESULT line per case: the exception's chain (DCP's CheckpointException, its ranks'
failures, their causes and contexts) as (module.type, text with notes), whether the failed save
left a .metadata object and whether it reached the writer's finish, the seconds until the error, and VmRSS before the call and after the
error, with the exception still held (its traceback keeps the clients' frames) and once dropped."""
import argparse
import ctypes
import gc
import os
import signal
import sys
import threading
import time
import urllib.request

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s3_body import REGION, ROW, storage  # noqa: E402
from torch_body import _status_kib, cuda_from, pattern, result  # noqa: E402

MIB = 1 << 20


def chain(e):
    """Every exception in `e`'s chain, `e` first: a CheckpointException's failures (exception,
    traceback) pairs, and each one's __cause__ and __context__."""
    seen, todo, out = set(), [e], []
    while todo:
        x = todo.pop(0)
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        out.append(x)
        failures = getattr(x, "failures", None)
        if isinstance(failures, dict):
            todo += [f[0] if isinstance(f, tuple) else f for f in failures.values()]
        # as Python shows a chain: the cause, else the context unless suppressed (raise ... from None)
        todo.append(x.__cause__ or (None if x.__suppress_context__ else x.__context__))
    return out


# The connector's native client keeps its part buffers for reuse and gives them back 5 s after its
# last request ended (aws-c-s3 source/s3_client.c, s_buffer_pool_trim_time_offset_in_s): before
# that, what a failed transfer left there (+64 MiB seen) reads as held
SETTLE_S = {"s3fs": 0.5, "connector": 6.0}


def settled_rss(wait=0.5):
    """VmRSS in bytes once freed memory is given back: Python's garbage collected, glibc's free
    lists trimmed (malloc_trim), the clients' threads given `wait` seconds to drop what they held."""
    time.sleep(wait)
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return _status_kib("VmRSS") * 1024


def keys(endpoint, bucket):
    """The keys in `bucket` (an empty list when it does not exist), listed through moto's REST API."""
    import xml.etree.ElementTree as ET
    try:
        with urllib.request.urlopen(f"{endpoint}/{bucket}?list-type=2", timeout=30) as r:
            root = ET.fromstring(r.read())
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return []
        raise
    return [k.text for k in root.iter() if k.tag.endswith("}Key")]


def auth(endpoint, on):
    """moto checks credentials (its /moto-api/reset-auth: the number of requests let through
    unchecked, moto/moto_api/_internal/responses.py) or not."""
    req = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0" if on else b"inf", method="POST",
                                 headers={"Content-Type": "application/json"})  # not a form: moto reads the body
    urllib.request.urlopen(req, timeout=30).close()


def bounded_retries():
    """Both clients give up on a dead server in seconds: botocore's own retry setting (one
    attempt, s3fs's config_kwargs through fsspec's configuration, fsspec/config.py) under s3fs's
    five tries, and the connector's S3ClientConfig.max_attempts (default 10). Their defaults took
    14 s (s3fs) and 23 to 48 s (the connector) against the 64 MiB table here."""
    import fsspec.config
    fsspec.config.conf.setdefault("s3", {})["config_kwargs"] = {"retries": {"total_max_attempts": 1},
                                                                "connect_timeout": 2, "read_timeout": 10}


def connector(kw, endpoint):
    """s3_body.storage's connector writer or reader, its client retrying at most twice."""
    from s3torchconnector import S3ClientConfig
    from s3torchconnector._s3client import S3Client
    from s3torchconnector.dcp.s3_file_system import S3FileSystem
    for s in kw.values():
        if not isinstance(s, str):
            client = S3Client(REGION, endpoint=endpoint,
                              s3client_config=S3ClientConfig(force_path_style=True, max_attempts=2))
            s.fs = S3FileSystem(REGION, s3_client=client, reader_constructor=s.fs._reader_constructor)
    return kw


def use(a, endpoint):
    """Points both clients at `endpoint`: s3fs through AWS_ENDPOINT_URL with its instance cache
    cleared (fsspec caches file systems by their arguments, not the environment), the connector
    through s3_body.storage's a.endpoint; a.bucket made there."""
    import s3fs
    os.environ["AWS_ENDPOINT_URL"] = a.endpoint = endpoint
    s3fs.S3FileSystem.clear_instance_cache()
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/{a.bucket}", method="PUT"), timeout=30).close()


def kill_when(a, pid, what):
    """Kills the server `pid` (SIGKILL) from inside the client's own calls: `what` "save", once
    the save has uploaded a part (s3fs: as the library's upload sends its second part; the connector: after its
    S3Writer took two pieces, uploading in the background); "load", before the client's first
    ranged read past the table's first 32 MiB (two pieces; the library asks the connector for at
    most its client's part_size at a time: python/uvmchunk/_streams.py) once those have landed.
    Returns the undo."""
    state = {"n": 0, "asked": 0, "done": 0}
    lock = threading.Lock()

    def counted(stream, nbytes):
        """The connector's ranged stream, its bytes counted in state["done"] once its reader is done
        with it (read to its end, or closed: the range reader stops once its buffer is full)."""
        try:
            yield from stream
        finally:
            with lock:
                state["done"] += nbytes

    def kill():
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)  # its sockets closed by the kernel

    if a.client == "s3fs" and what == "load":
        return kill_mid_body(kill)
    if a.client == "s3fs":
        # a save's file goes as one concurrent multipart upload (python/uvmchunk/_uploads.py), not
        # through S3File's _upload_chunk: killed as its second part is sent (the first in flight)
        from uvmchunk._uploads import MultipartWriter as cls
        name = "_send"
    elif what == "save":
        from s3torchconnector import S3Writer as cls
        name = "write"
    else:
        from s3torchconnector._s3client import S3Client as cls
        name = "_get_object_stream"
    orig = getattr(cls, name)

    def hooked(*args, **kw):
        if what == "save" and a.client == "s3fs":
            state["n"] += 1
            if state["n"] == 2:
                kill()
            return orig(*args, **kw)
        if what == "save":
            out = orig(*args, **kw)
            state["n"] += memoryview(args[1]).nbytes >= MIB if a.client == "connector" else 1
            if state["n"] == (2 if a.client == "connector" else 1):
                kill()
            return out
        ranged = (args[4] or 0) - (args[3] or 0) if len(args) > 4 else kw.get("end", 0) - kw.get("start", 0)
        if ranged < MIB:
            return orig(*args, **kw)
        with lock:
            before = state["asked"]
            state["asked"] += ranged
        if before >= 32 * MIB:
            # the library reads a table's parts concurrently (python/uvmchunk/_downloads.py): a
            # read past the first 32 MiB waits until those have landed, so the kill comes after
            # two pieces whatever the concurrency and the size of a request
            deadline = time.monotonic() + 60
            while state["done"] < 32 * MIB and time.monotonic() < deadline:
                time.sleep(0.01)
            with lock:
                if not state.get("killed"):
                    state["killed"] = True
                    kill()
        return counted(orig(*args, **kw), ranged)

    setattr(cls, name, hooked)
    return lambda: setattr(cls, name, orig)


def kill_mid_body(kill):
    """s3fs's load: an item is one GET whose body the library reads a piece at a time
    (python/uvmchunk/_versions.py, S3fsSource): the server is killed once aiobotocore's streaming
    body has handed out two pieces (32 MiB; the item's headers before them are a few KiB).
    Returns the undo."""
    from aiobotocore.response import StreamingBody as cls
    orig, state = cls.read, {"n": 0}

    async def read(self, *args, **kw):
        data = await orig(self, *args, **kw)
        state["n"] += len(data)
        if state["n"] >= 32 * MIB and not state.get("killed"):
            state["killed"] = True
            kill()
        return data

    cls.read = read
    return lambda: setattr(cls, "read", orig)


def watch_finish():
    """A one-element list counting FileSystemWriter.finish calls (torch/distributed/checkpoint/
    filesystem.py; FsspecWriter's and S3StorageWriter's own): the step that writes .metadata, so a
    save whose server is gone (nothing there to list) shows it was never reached."""
    from torch.distributed.checkpoint import filesystem
    calls, orig = [0], filesystem.FileSystemWriter.finish

    def finish(self, *args, **kw):
        calls[0] += 1
        return orig(self, *args, **kw)

    filesystem.FileSystemWriter.finish = finish
    return calls


FINISHED = []  # watch_finish's count, set in main


def attempt(a, case, fn, endpoint, name=None, save=False):
    """Runs the failing call fn(), prints its RESULT."""
    finished = FINISHED[0][0]
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    rss0 = _status_kib("VmRSS") * 1024
    t0 = time.monotonic()
    try:
        fn()
    except BaseException as e:  # noqa: BLE001  (DCP's CheckpointException is a BaseException)
        seconds = time.monotonic() - t0
        import traceback
        errors = [(f"{type(x).__module__}.{type(x).__qualname__}",
                   "".join(traceback.format_exception_only(type(x), x))) for x in chain(e)]
        held = settled_rss(SETTLE_S[a.client])
        del e
    else:
        seconds, errors, held = time.monotonic() - t0, [], None
    rss1 = settled_rss()
    meta = None
    if save and endpoint is not None:
        meta = f"{name}/.metadata" in keys(endpoint, a.bucket)
    result(case=case, client=a.client, errors=errors, seconds=seconds, metadata=meta,
           finished=FINISHED[0][0] > finished,
           rss_before=rss0, rss_held=held, rss_after=rss1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True, help="the test's server, alive throughout")
    p.add_argument("--gone", required=True, action="append",
                   help="URL,PID of a server to kill: per client, one mid-save, then one mid-load")
    p.add_argument("--clients", required=True, help="s3fs and/or connector, comma-separated")
    p.add_argument("--size", type=int, required=True)
    a = p.parse_args()
    import warnings
    warnings.filterwarnings("ignore")
    bounded_retries()
    FINISHED.append(watch_finish())

    table = cuda_from(pattern(a.size, 7).view(-1, ROW), managed=True)
    back = cuda_from(torch.zeros(a.size // ROW, ROW, dtype=torch.uint8), managed=True)
    gone = iter(a.gone)
    for a.client in a.clients.split(","):
        a.bucket, a.name = f"faults-{a.client}", "good"
        faults(a, table, back, next(gone), next(gone))


def faults(a, table, back, save_gone, load_gone):
    """Every fault case of client a.client, one RESULT each."""
    import torch.distributed.checkpoint as dcp

    def save(name):
        return lambda: dcp.save({"t": table}, **connector(storage(a, True, name), a.endpoint))

    def load(name):
        return lambda: dcp.load({"t": back}, **connector(storage(a, False, name), a.endpoint))

    home = a.endpoint
    use(a, home)
    for name in ("good", "missing", "truncated"):
        save(name)()
    # a missing bucket: the connector's save and both clients' loads fail; s3fs's save creates it
    # (FsspecWriter's makedirs), said as the RESULT of a save that did not fail
    good_bucket, a.bucket = a.bucket, a.bucket + "-none"
    attempt(a, "missing bucket load", load("good"), None)
    attempt(a, "missing bucket save", save("nb"), a.endpoint, "nb", save=True)
    a.bucket = good_bucket
    # bad credentials: moto checks them and knows none
    auth(a.endpoint, True)
    try:
        attempt(a, "bad credentials save", save("denied"), None)
        attempt(a, "bad credentials load", load("good"), None)
    finally:
        auth(a.endpoint, False)
    result(case="bad credentials metadata", client=a.client,
           metadata=any(k.startswith("denied/") and k.endswith(".metadata") for k in keys(a.endpoint, a.bucket)))
    # a missing and a truncated data file: the checkpoint's .distcp object deleted, or cut to half
    import s3fs
    fs = s3fs.S3FileSystem()
    data = [k for k in keys(a.endpoint, a.bucket) if k.startswith("missing/") and k.endswith(".distcp")]
    fs.rm(f"{a.bucket}/{data[0]}")
    attempt(a, "missing object load", load("missing"), None)
    data = [k for k in keys(a.endpoint, a.bucket) if k.startswith("truncated/") and k.endswith(".distcp")]
    fs.pipe_file(f"{a.bucket}/{data[0]}", fs.cat_file(f"{a.bucket}/{data[0]}")[:a.size // 2])
    del fs
    attempt(a, "truncated object load", load("truncated"), None)
    # the server gone mid-save, mid-load: SIGKILL from inside the client's calls
    url, pid = save_gone.split(",")
    use(a, url)
    undo = kill_when(a, int(pid), "save")
    attempt(a, "server gone save", save("gone"), None)
    undo()
    url, pid = load_gone.split(",")
    use(a, url)
    save("gone")()
    undo = kill_when(a, int(pid), "load")
    attempt(a, "server gone load", load("gone"), None)
    undo()
    use(a, home)


if __name__ == "__main__":
    main()
