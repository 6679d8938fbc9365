"""dcp.async_save to object storage: a 256 MiB managed table and a 64 MiB ordinary
CUDA tensor saved with async_save through s3fs (checkpoint_id="s3://...") to moto's server
(s3_server.py), a 64 MiB async_memory_budget, the tensors overwritten right after the call; body in
s3_async_body.py. Under the library the spill's staged file (python/uvmchunk/_spill.py) is uploaded
in pieces (python/uvmchunk/_streams.py), so the call adds at most 256 MiB of anonymous memory and
the checkpoint holds the bytes at the call, bitwise. Stock's figure is printed beside it."""
import os

from conftest import run_body
from s3_server import CREDENTIALS, bucket, need, server  # noqa: F401  (server: a fixture)

MIB = 1 << 20
BODY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "s3_async_body.py")
SIZE = 256 * MIB
LIB = {"UVMCHUNK_DCP_VIEWS": "on", "UVMCHUNK_ASYNC_MEMORY_BUDGET": "64MiB"}


def run(server, with_lib, tmp, name, size=SIZE, client="s3fs", lib_env=None):
    r = run_body(None, with_lib, "--endpoint", server, "--bucket", bucket(server, "uvmc-async"), "--name", name,
                 "--client", client, "--size", str(size), script=BODY,
                 lib_env=dict(LIB, UVMCHUNK_ASYNC_SPILL_DIR=str(tmp), **(lib_env or {})),
                 extra_env={**CREDENTIALS, "AWS_ENDPOINT_URL": server}, timeout=600)
    res = r.result
    print(f"{client} {'library' if with_lib else 'stock'} {size // MIB} MiB + 64 MiB dense: "
          f"+{res['peak_anon_extra'] / MIB:.0f} MiB anonymous, +{res['peak_resident_extra'] / MIB:.0f} MiB "
          f"resident, {res['upload_s']:.2f} s")
    assert res["equal"], r.describe()
    return r, res


def test_async_save_to_s3_within_budget(server, tmp_path):
    need(["s3fs"])
    run(server, False, tmp_path, "stock")
    r, res = run(server, True, tmp_path, "library")
    assert res["peak_anon_extra"] <= 256 * MIB, r.describe()



def test_async_save_through_the_connector_within_budget(server, tmp_path):
    """The same through s3torchconnector's S3StorageWriter, its client set as README.md ("Checkpoint
    to S3") tells users to bound its upload buffers (s3_body.connector_fs): the connector's client
    copies each piece into parts it keeps until uploaded, at most 40 of 5 MiB there."""
    need(["s3torchconnector"])
    r, res = run(server, True, tmp_path, "library-connector", client="connector")
    assert res["peak_anon_extra"] <= 256 * MIB, r.describe()
