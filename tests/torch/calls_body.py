"""Bodies of tests/torch/test_calls.py, run in a subprocess stock (no preload,
TORCH_DEVICE_BACKEND_AUTOLOAD=0), with the package but without the library, or under the library, on
the simulated CUDA runtime (tests/sim), each printing one line `RESULT <json>`: a state dict that
contains itself, two threads' checkpoints at once, and the deprecated save_state_dict /
load_state_dict.

usage: python calls_body.py cycle|threads|deprecated --dir DIR [--mode save|async_save|load]
"""
import argparse
import os
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_body import _status_kib, cuda_from, pattern, quiet_dcp, result, sim_driver, views_taken  # noqa: E402

MIB = 1 << 20


_dcp, _views = quiet_dcp, views_taken


def _rss():
    return _status_kib("VmRSS") * 1024


def _async_save(dcp, state, where):
    """dcp.async_save without a process group (2.8's takes no no_dist: it saves without one then)."""
    import inspect
    extra = {"no_dist": True} if "no_dist" in inspect.signature(dcp.async_save).parameters else {}
    return dcp.async_save(state, checkpoint_id=where, **extra)


def body_cycle(a):
    """dcp.save / dcp.async_save / dcp.load of {"w": managed table, "self": <the dict itself>}:
    what it raised (type, and the type of each failure CheckpointException carries), how long it
    took and how far the resident size grew. A watchdog ends the process with hung=True after 20 s
    (or 1 GiB of growth): a walker without a visited set loops and grows."""
    dcp = _dcp()
    state = {"w": cuda_from(pattern(4 * MIB, 1), managed=True)}
    state["self"] = state
    rss0, t0 = _rss(), time.monotonic()
    done = threading.Event()

    def watchdog():
        while not done.wait(0.2):
            grown = _rss() - rss0
            if time.monotonic() - t0 > 20 or grown > (1 << 30):
                result(hung=True, seconds=time.monotonic() - t0, grown=grown)
                os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    raised = inner = None
    try:
        where = os.path.join(a.dir, "c")
        if a.mode == "save":
            dcp.save(state, checkpoint_id=where, no_dist=True)
        elif a.mode == "async_save":
            resp = _async_save(dcp, state, where)
            getattr(resp, "upload_completion", resp).result()
        else:
            dcp.save({"w": state["w"]}, checkpoint_id=where, no_dist=True)
            dcp.load(state, checkpoint_id=where, no_dist=True)
    except BaseException as e:  # noqa: BLE001  (CheckpointException is a BaseException)
        raised = type(e).__name__
        failures = getattr(e, "failures", None) or {}
        inner = sorted({type(f[0] if isinstance(f, tuple) else f).__name__ for f in failures.values()})
    done.set()
    result(hung=False, raised=raised, inner=inner, seconds=time.monotonic() - t0, grown=_rss() - rss0)


def body_threads(a):
    """Thread A: dcp.async_save of table A given only a checkpoint_id, slowed down 1.5 s at its
    start on thread A (PyTorch's _stateful_to_state_dict, which async_save calls before staging on
    2.8 and 2.11, sleeps first), so it is still staging; meanwhile thread B: an ordinary dcp.save of
    table B (64 MiB, managed). What B's save got: views, the page-locked bytes held after it and
    after both, and the reloaded values of both checkpoints."""
    dcp = _dcp()
    drv = sim_driver()
    from torch.distributed.checkpoint import state_dict_saver

    table_a = cuda_from(pattern(16 * MIB, 2), managed=True)
    table_b = cuda_from(pattern(64 * MIB, 3), managed=True)
    staging_started = threading.Event()
    orig = state_dict_saver._stateful_to_state_dict

    def slow(*args, **kwargs):
        if threading.current_thread().name == "A":
            staging_started.set()
            time.sleep(1.5)
        return orig(*args, **kwargs)

    state_dict_saver._stateful_to_state_dict = slow
    out = {}

    def thread_a():
        resp = _async_save(dcp, {"a": table_a}, os.path.join(a.dir, "a"))
        getattr(resp, "upload_completion", resp).result()

    def thread_b():
        staging_started.wait(30)
        v0 = _views()["save"]
        dcp.save({"b": table_b}, checkpoint_id=os.path.join(a.dir, "b"), no_dist=True)
        out["b_views"] = _views()["save"] - v0
        out["b_pinned_after"] = drv.uvmsim_pinned_bytes()
        out["b_staging_still"] = not done_a.is_set()

    done_a = threading.Event()
    ta = threading.Thread(target=lambda: (thread_a(), done_a.set()), name="A")
    tb = threading.Thread(target=thread_b, name="B")
    ta.start()
    tb.start()
    ta.join(60)
    tb.join(60)
    time.sleep(0.5)  # the async save's done callbacks run just after its future completes
    back = {"a": torch.zeros(16 * MIB, dtype=torch.uint8)}
    dcp.load(back, checkpoint_id=os.path.join(a.dir, "a"), no_dist=True)
    back_b = {"b": torch.zeros(64 * MIB, dtype=torch.uint8)}
    dcp.load(back_b, checkpoint_id=os.path.join(a.dir, "b"), no_dist=True)
    result(pinned_after_both=drv.uvmsim_pinned_bytes(), staging_seen=staging_started.is_set(),
           equal={"a": torch.equal(back["a"], table_a.cpu()), "b": torch.equal(back_b["b"], table_b.cpu())}, **out)


def body_deprecated(a):
    """dcp.save_state_dict / dcp.load_state_dict (deprecated aliases, storage passed positionally
    as PyTorch's own tests do) of two managed tables and a CPU tensor: views taken, the bytes of
    each data file written, and the values loaded into fresh managed tables."""
    dcp = _dcp()
    from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
    state = {"t1": cuda_from(pattern(8 * MIB, 4), managed=True), "t2": cuda_from(pattern(4 * MIB, 5), managed=True),
             "cpu": pattern(1 * MIB, 6)}
    v0 = _views()
    dcp.save_state_dict(state, FileSystemWriter(a.dir), no_dist=True)
    back = {"t1": cuda_from(torch.zeros(8 * MIB, dtype=torch.uint8), managed=True),
            "t2": cuda_from(torch.zeros(4 * MIB, dtype=torch.uint8), managed=True),
            "cpu": torch.zeros(1 * MIB, dtype=torch.uint8)}
    dcp.load_state_dict(back, FileSystemReader(a.dir), no_dist=True)
    v1 = _views()
    import hashlib
    files = {}
    for name in sorted(os.listdir(a.dir)):
        if name.endswith(".distcp"):
            with open(os.path.join(a.dir, name), "rb") as f:
                files[name] = hashlib.sha256(f.read()).hexdigest()
    result(save_views=v1["save"] - v0["save"], load_views=v1["load"] - v0["load"], files=files,
           equal={k: torch.equal(back[k].cpu(), state[k].cpu()) for k in state})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("body")
    p.add_argument("--dir", required=True)
    p.add_argument("--mode", default="save")
    a = p.parse_args()
    globals()["body_" + a.body](a)


if __name__ == "__main__":
    main()
