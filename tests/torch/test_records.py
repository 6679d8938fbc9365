"""What a checkpoint's records say, under the library as under stock (bodies in records_body.py).
Rebuild metadata: a tensor saved with PyTorch's lazy negative or conjugate bit (its record's
_rebuild_tensor_v2 metadata, torch/_utils.py) loads into a managed table with the values stock
loads, the direct read (python/uvmchunk/_reads.py) leaving such a record to PyTorch's own read; the
records the library saves are stock's. Torn records: a table rewritten by another thread during a
synchronous dcp.save leaves records whose CRC-32 matches their bytes (zipfile.testzip), and the
report says the table changed during the save."""
import json
import os
import shutil

from conftest import run_body

BODY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "records_body.py")
AUTO = {"UVMCHUNK_DCP_VIEWS": "on", "UVMCHUNK_PINNED_THRESHOLD": "32MiB"}


def body_run(tmp_path, body, mode, *args, name=None, lib_env=None):
    folder = tmp_path / (name or mode)
    try:
        r = run_body(body, mode != "stock", "--dir", str(folder), "--mode", mode, *args, script=BODY,
                     lib_env=lib_env or AUTO, timeout=300)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return r, r.result


def test_lazy_neg_and_conj_bits_load_as_stock(tmp_path):
    stock_r, stock = body_run(tmp_path, "rebuild", "stock")
    for name, case in stock["cases"].items():
        assert case["equal"], (name, stock_r.describe())
    for mode in ("auto", "planner"):
        r, res = body_run(tmp_path, "rebuild", mode)
        for name, case in res["cases"].items():
            print(f"{mode:8s} {name:20s} equal {case['equal']}, torch.load calls {case['torch_loads']}")
            assert case["equal"], (mode, name, r.describe())
            # the save side: each item's records (data.pkl with its metadata, the data) are stock's
            assert case["items"] == stock["cases"][name]["items"], (mode, name, r.describe())
        # a plain table is still read straight into its pages
        assert res["cases"]["plain_f32"]["torch_loads"] == 0, r.describe()
    # a managed table's negative or conjugate view gets no view of its raw bytes on save: DCP's own
    # path writes it, as stock
    assert res["eligible"] == {"neg_table": False, "conj_table": False, "table": True}, r.describe()


def test_a_table_changed_during_a_save_leaves_consistent_records(tmp_path):
    report = tmp_path / "report.jsonl"
    env = dict(AUTO, UVMCHUNK_REPORT=str(report))
    r, res = body_run(tmp_path, "torn", "auto", lib_env=env)
    print(f"writes during the saves: {res['writes']}")
    lines = [l for l in r.err.splitlines() if " dcp.save " in l]
    for run, rec, line in zip(res["runs"], res["records"], lines):
        print(f"testzip {run['testzip']}; changed {rec.get('changed_tensors', 0)}; {line}")
    assert len(res["runs"]) == 7 and len(res["records"]) == 7, r.describe()
    assert "changed_tensors" not in res["records"][6], r.describe()  # the control: nobody wrote it
    for run, rec in zip(res["runs"], res["records"]):
        # every record is internally consistent
        assert all(v is None for v in run["testzip"].values()), (run, rec, r.describe())
    # the table did change under the saves (else this proves nothing), and the report said so
    assert sum(rec.get("changed_tensors", 0) for rec in res["records"][:3]) >= 1, r.describe()
    assert sum(rec.get("changed_tensors", 0) for rec in res["records"][3:]) >= 1, r.describe()
    assert "changed during the save" in r.err, r.describe()
