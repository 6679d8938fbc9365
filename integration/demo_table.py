"""demo_table.py: tools/demo.sh's table, stock DCP and uvmchunk-run side by side, from one run of
checkpoint_job.py each (one rank). Every figure is the job's own measurement (its RESULT line:
VmHWM and VmRSS of /proc/self/status around dcp.save and around dcp.load, page-locked bytes from the
simulator's counter or PyTorch's host allocator), put in words by report.py's functions, so the
demo and the harness's tables read the same figures the same way.

usage: demo_table.py --backend gpu|sim FOLDER   (FOLDER/stock.out and .err, FOLDER/uvmchunk.out and
.err: each run's stdout and stderr). Exit status: 0 when both runs reloaded every byte and
libuvmchunk.so was mapped in the uvmchunk-run job only, else 1."""
import argparse
import json
import os
import sys

from report import page_locked, read, signed_size, size_text, stats_of  # next to this script

RUNS = (("stock", "stock DCP"), ("uvmchunk", "uvmchunk-run"))


def result(folder: str, run: str, backend: str) -> dict:
    """The run's RESULT record plus "locked": its page-locked peak in bytes (None: not known)."""
    out, err = read(os.path.join(folder, run + ".out")), read(os.path.join(folder, run + ".err"))
    res = next(json.loads(ln[7:]) for ln in out.splitlines() if ln.startswith("RESULT "))
    # the worker's own stats line: torchrun's process, preloaded too, says its own at exit
    own = "\n".join(ln for ln in err.splitlines() if f"stats: pid {res['pid']}," in ln)
    res["locked"] = page_locked(res, stats_of(own), backend)
    return res


def seconds(s: float) -> str:
    return f"{s:.2f}"


# (row, the RESULT field, its format); None in a field reads '-'
ROWS = (("host memory added by dcp.save", "save_extra", size_text),
        ("host memory added by dcp.load", "load_extra", size_text),
        ("page-locked at peak", "locked", size_text),
        ("left resident after the save", "held_after_save", signed_size),
        ("seconds of dcp.save", "save_s", seconds),
        ("seconds of dcp.load", "load_s", seconds),
        ("reloaded, every byte equal", "ok", lambda ok: "yes" if ok else "NO"))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--backend", choices=("gpu", "sim"), required=True)
    p.add_argument("folder")
    a = p.parse_args()
    r = [result(a.folder, run, a.backend) for run, _ in RUNS]
    cells = [[name] + ["-" if x.get(key) is None else fmt(x[key]) for x in r] for name, key, fmt in ROWS]
    head = [""] + [title for _, title in RUNS]
    width = [max(len(row[i]) for row in [head] + cells) for i in range(len(head))]
    for row in [head, ["-" * w for w in width]] + cells:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, width)) + " |")
    if a.backend == "gpu":
        print("page-locked on the GPU: what PyTorch's host allocator asked for, less what libuvmchunk served"
              " lazily (its stats line)")
    # the columns' names are true only when the library was mapped in the second run alone
    wrong = [f"{title}: libuvmchunk.so {'mapped' if x.get('preloaded') else 'not mapped'}"
             for (run, title), x in zip(RUNS, r) if bool(x.get("preloaded")) != (run == "uvmchunk")]
    for w in wrong:
        print(f"uvmchunk: {w} in that run (LD_PRELOAD before the demo: {os.environ.get('LD_PRELOAD', '')!r})")
    return 0 if all(x["ok"] for x in r) and not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
