"""One version per object on S3 loads: a checkpoint prefix overwritten by another save of the same
layout while a load of it runs (body: s3_version_body.py, 16 MiB and 8 MiB items, moto's server).
Stock through s3fs reads each file through one S3File, which pins every ranged GET to the ETag it
saw at open (s3fs/core.py, S3File.__init__ sets read_kw's IfMatch, _fetch_range turns the failed
precondition into FileExpired) or, on a version-aware file system, to its VersionId; the
connector's default reader streams the file's items with one request (s3torchconnector/s3reader/
dcp_optimized.py), whose parts the CRT pins to the first part's ETag. So stock either raises the
client's error or returns checkpoint A whole. The library's own GETs must do the same: before
their pin, through both clients, it loaded the table from B and the dense tensor from A, no error."""
import os
import pytest

from conftest import run_body
from s3_server import CREDENTIALS, bucket, need, server  # noqa: F401  (server: a fixture)

MIB = 1 << 20
BODY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "s3_version_body.py")
# 5 MiB parts: the 16 MiB table is read as concurrent ranged GETs (python/uvmchunk/_downloads.py),
# each of which must carry the pin
AUTO = {"UVMCHUNK_DCP_VIEWS": "on", "UVMCHUNK_PINNED_THRESHOLD": "8MiB", "UVMCHUNK_S3_PART_SIZE": "5MiB"}
CLIENTS = ("s3fs", "connector")
# what each client raises for an object that changed under an open reader
CHANGED = {"s3fs": "s3fs.utils.FileExpired", "connector": "s3torchconnectorclient._mountpoint_s3_client.S3Exception"}


@pytest.fixture(scope="module")
def outcomes(server):
    """{(mode, client, first item, versioned): RESULT} of a stock and a library run of the body."""
    need(["s3fs", "s3torchconnector"])
    out = {}
    for mode in ("stock", "library"):
        name = f"version-{mode}"
        bucket(server, name)
        r = run_body(None, mode == "library", "--endpoint", server, "--bucket", name, "--clients",
                     ",".join(CLIENTS), "--size", str(16 * MIB), script=BODY, lib_env=AUTO,
                     extra_env={**CREDENTIALS, "AWS_ENDPOINT_URL": server}, timeout=240)
        for res in r.results:
            out[(mode, res["client"], res["first"], res["versioned"])] = res
    return out


def outcome(res):
    """The client's error type when the load raised it, "A" when every item came back from A."""
    if res["errors"]:
        return next((t for t in res["errors"] if t in CHANGED.values()), res["errors"])
    return "A" if set(res["values"].values()) == {"A"} else f"values {res['values']}"


@pytest.mark.parametrize("client,first,versioned", [(c, f, False) for c in CLIENTS for f in ("table", "dense")]
                         + [("s3fs", "dense", True)])
def test_one_version_per_object(outcomes, client, first, versioned):
    """Stock and the library each either raise the client's own error for a changed object or
    return checkpoint A whole; never items of both checkpoints. On a versioned bucket read through
    s3fs's version-aware file system both return A whole (every GET names the version)."""
    got = {mode: outcome(outcomes[(mode, client, first, versioned)]) for mode in ("stock", "library")}
    print(f"{client}, {first} first{', versioned' if versioned else ''}: stock {got['stock']}, library "
          f"{got['library']} (overwritten after {outcomes[('library', client, first, versioned)]['committed_first']})")
    allowed = {"A"} if versioned else {"A", CHANGED[client]}
    for mode, o in got.items():
        assert o in allowed, (mode, outcomes[(mode, client, first, versioned)])
