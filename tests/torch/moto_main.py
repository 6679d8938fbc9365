"""moto's S3 server (moto.server.main, moto on PyPI) with one change to what a GET costs it, none to
what it answers: a key's bytes are read from its buffer once per key and kept for the next GET
of the same key (one key kept at a time), where moto reads the whole object for every request.

Why: moto answers a ranged GET by reading the whole object and slicing it (moto/s3/models.py,
FakeKey.value; moto/s3/responses.py, _handle_range_header), so a load of a 768 MiB object in 16 MiB
ranged GETs (python/uvmchunk/_downloads.py) made moto read 48 x 768 MiB, minutes of the test's
time that S3 itself never spends (a ranged GET costs S3 what its range costs: AWS S3 user guide,
"Performance guidelines for Amazon S3", byte-range fetches). A key changes only through its value
setter (moto replaces a key object on every PUT and CompleteMultipartUpload), which drops it here.
Started by tests/torch/s3_server.py with moto.server's own arguments."""
import sys
import threading

from moto.s3.models import FakeKey
from moto.server import main

_value = FakeKey.value  # moto's property: getter reads the buffer whole, setter rewrites it
_lock = threading.Lock()
_kept: list = [None, b""]  # [the key, its bytes]; the key held so a new key never reuses its id


def _get(key: FakeKey) -> bytes:
    # the read under the lock: a setter between the read and the keeping would leave old bytes kept
    with _lock:
        if _kept[0] is not key:
            _kept[:] = [key, _value.fget(key)]
        return _kept[1]


def _set(key: FakeKey, new) -> None:
    with _lock:
        if _kept[0] is key:
            _kept[:] = [None, b""]
        _value.fset(key, new)


FakeKey.value = property(_get, _set)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
