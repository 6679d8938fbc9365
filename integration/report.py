"""report.py: the tables of integration/run.sh, from its manifest (one tab-separated line per run:
kind, size in bytes, mode, exit status, log, per-rank log folder, note) and integration/modes.txt
(the modes: how each ran, what success means, the legend). Standard library only.

Job table, one row per size and mode: success; save seconds (slowest rank); GB/s (bytes per rank
over that rank's save seconds, slowest rank); load seconds; peak resident host memory of each rank
(VmHWM, which includes PyTorch and the tables); "extra over the start": each rank's peak during
dcp.save above its resident memory just before it, i.e. what the save itself cost; "saved vs
stock": the first mode's (stock DCP's) extra minus this mode's, for the same size, largest rank;
pinned bytes PyTorch's host allocator asked for (peak, largest rank); pinned bytes really
page-locked (simulator: its own measured peak; GPU: asked minus what libuvmchunk served lazily,
derived, when none of those was pinned at its first use); bytes libuvmchunk served lazily; the
copies it split per rank; the zero-copy views the save took per rank; whether the library was
mapped in each rank. Success: exit 0, every tensor reloaded bitwise equal on both ranks, and what
modes.txt expects of the mode: the library mapped in both ranks when it was preloaded, a split copy
in each rank's stats (expect split), a view in each rank (expect views).

Engine table, one row per path: success (exit 0, checksum verified, one split copy with the
library), seconds, GB/s, blocks.

usage: report.py --backend gpu|sim [--modes MODES_TXT] MANIFEST
Exit status: 0 when every row that ran succeeded, 1 otherwise.
"""
import argparse
import glob
import json
import os
import re
import sys

# The library's stats line (interpose/stats.c), singular or plural; a part whose count is 0 is left out:
# "uvmchunk: stats: pid 42, rank 0, local rank 0: split 1 copy (48 MiB in 6 blocks, ...); passed
# through ...; 1 pinned request served lazily (64 MiB, 0 pinned at first use)"
SIZE_TEXT = r"(\d+(?:\.\d+)? (?:bytes?|[KMGTPE]iB))"
SPLIT_RE = re.compile(r"uvmchunk: stats: pid \d+[^:\n]*: split (\d+) cop(?:y|ies)(?: \(" + SIZE_TEXT + r" in (\d+) blocks?)?")
LAZY_RE = re.compile(r"(\d+) pinned requests? served lazily(?: \(" + SIZE_TEXT + r", (\d+) pinned at first use\))?")
UNITS = {"byte": 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50,
         "EiB": 1 << 60}


def size_bytes(text):
    """'48 MiB' -> 50331648; None or '' -> 0."""
    if not text:
        return 0
    number, unit = text.split()
    return round(float(number) * UNITS[unit])


def size_text(n):
    """Bytes as a person reads them, like config/units.c: 48 MiB, 1.50 GiB, 512 bytes; '-' for None."""
    if n is None:
        return "-"
    sign, n = ("-", -n) if n < 0 else ("", n)
    if n < 1024:
        return f"{sign}{n} byte{'' if n == 1 else 's'}"
    for shift, unit in ((60, "EiB"), (50, "PiB"), (40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >> shift:
            if n % (1 << shift) == 0:
                return f"{sign}{n >> shift} {unit}"
            v = n / (1 << shift)
            return f"{sign}{v:.0f} {unit}" if v >= 99.95 else f"{sign}{v:.1f} {unit}" if v >= 9.995 else \
                f"{sign}{v:.2f} {unit}"
    return f"{sign}{n} bytes"


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def load_modes(path):
    """{name: {"launch", "job", "expect", "quick", "legend"}} in file order (integration/modes.txt)."""
    modes = {}
    for line in read(path).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, launch, job, expect, quick, legend = (f.strip() for f in (line.split("|", 5) + [""] * 6)[:6])
        modes[name] = {"launch": launch, "job": job, "expect": expect, "quick": quick, "legend": legend}
    return modes


def rank_logs(folder):
    """{rank: (stdout, stderr)} from torchrun's --log-dir layout RUN_ID/attempt_N/RANK/std*.log
    (the last attempt)."""
    found = {}
    for p in sorted(glob.glob(os.path.join(folder, "*", "attempt_*", "*", "stdout.log"))):
        rank = os.path.basename(os.path.dirname(p))
        if rank.isdigit():
            found[int(rank)] = (read(p), read(os.path.join(os.path.dirname(p), "stderr.log")))
    return found


def stats_of(err):
    """(split copies, split bytes, blocks, lazy requests, lazy bytes, pinned at first use) from the
    last stats line in err, or None."""
    lines = [ln for ln in err.splitlines() if "uvmchunk: stats: " in ln]
    if not lines:
        return None
    m, lazy = SPLIT_RE.search(lines[-1]), LAZY_RE.search(lines[-1])
    split = (int(m.group(1)), size_bytes(m.group(2)), int(m.group(3) or 0)) if m else (0, 0, 0)
    pinned = (int(lazy.group(1)), size_bytes(lazy.group(2)), int(lazy.group(3) or 0)) if lazy else (0, 0, 0)
    return split + pinned


def signed_size(n):
    """A size difference: '+1.50 MiB', '-63 MiB', '0 bytes'."""
    return ("-" if n < 0 else "+" if n > 0 else "") + size_text(abs(n))


def per_rank(values, fmt=str):
    return ",".join("-" if v is None else fmt(v) for v in values) or "-"


def job_row(size, mode, rc, log, folder, note, backend, spec):
    row = {"size": size_text(int(size)), "bytes": int(size), "mode": mode}
    if rc == "-":
        row["ok"] = note
        return row
    ranks = rank_logs(folder)
    results, stats = {}, {}
    for r, (out, err) in ranks.items():
        for line in out.splitlines():
            if line.startswith("RESULT "):
                results[r] = json.loads(line[7:])
        s = stats_of(err)
        if s:
            stats[r] = s
    why = []
    if rc != "0":
        why.append(f"exit {rc}" + (" (time limit)" if rc in ("124", "137") else ""))
    if sorted(results) != [0, 1]:
        why.append(f"results from ranks {sorted(results)}")
    for r, res in sorted(results.items()):
        if res.get("error"):
            why.append(f"rank {r}: {res['error'][:80]}")
        elif not res.get("ok"):
            why.append(f"rank {r}: reload differs {res.get('equal')}")
    if spec.get("launch", "").startswith("preload"):
        if not all(res.get("preloaded") for res in results.values()):
            why.append("library not mapped in every rank")
    elif stats:
        why.append("library stats without the library")
    if spec.get("expect") == "split" and (sorted(stats) != [0, 1] or not all(s[0] >= 1 for s in stats.values())):
        why.append(f"stats show no split copy in some rank: {stats}")
    if spec.get("expect") == "views" and not (results and all(res.get("save_views", 0) >= 1 for res in results.values())):
        why.append("no zero-copy view in some rank")
    row["ok"] = "yes" if not why else "NO: " + "; ".join(why)
    res = [results[r] for r in sorted(results)]
    saves = [x for x in res if x.get("save_s")]
    if saves:
        slow = max(saves, key=lambda x: x["save_s"])
        row["save_s"] = f"{slow['save_s']:.2f}"
        row["gbps"] = f"{min(x['bytes'] / x['save_s'] / 1e9 for x in saves):.2f}"
    loads = [x["load_s"] for x in res if x.get("load_s")]
    if loads:
        row["load_s"] = f"{max(loads):.2f}"
    row["rss"] = per_rank([x.get("vmhwm") for x in res], size_text)
    extras = [x.get("save_extra") for x in res]
    row["extra"] = per_rank(extras, size_text)
    row["extra_max"] = max(extras) if extras and None not in extras else None
    row["held"] = per_rank([x.get("held_after_save") for x in res], signed_size)
    row["load_extra"] = per_rank([x.get("load_extra") for x in res], size_text)
    asked = [x.get("pinned_asked_peak") for x in res if x.get("pinned_asked_peak") is not None]
    row["pinned_asked"] = size_text(max(asked)) if asked else "-"
    if backend == "sim":
        locked = [x.get("pinned_locked_peak") for x in res if x.get("pinned_locked_peak") is not None]
        row["pinned_locked"] = size_text(max(locked)) if locked else "-"
    else:
        vals = []
        for r, x in sorted(results.items()):
            a = x.get("pinned_asked_peak")
            # a lazy buffer pinned at its first use is locked after all: then nothing is derived
            if a is not None and not (r in stats and stats[r][5]):
                vals.append(max(0, a - (stats[r][4] if r in stats else 0)))
        row["pinned_locked"] = ("~" + size_text(max(vals))) if vals else "-"
    row["split"] = ",".join(f"{stats[r][0]}/{size_text(stats[r][1])}" if r in stats else "-"
                            for r in sorted(results)) or "-"
    row["pageable"] = ",".join(size_text(stats[r][4]) if r in stats else "-" for r in sorted(results)) or "-"
    row["views"] = per_rank([x.get("save_views", 0) for x in res])
    row["preload"] = ",".join("y" if x.get("preloaded") else "n" for x in res) or "-"
    if any("async" in x for x in res):  # --mode async: the figures of the async table
        def fig(key, fmt):
            return per_rank([x["async"].get(key) if "async" in x else None for x in res], fmt)
        for key in ("anon_peak", "file_peak", "shmem_peak", "anon_left", "file_left"):
            row[key] = fig(key, signed_size)
        for key in ("stall_s", "upload_s", "dd_s"):
            row[key] = fig(key, lambda v: f"{v:.2f}")
    return row


def saved_vs_stock(jobs, baseline):
    """'saved vs stock' per row: the baseline mode's largest per-rank save extra minus this row's,
    same size ('-' for the baseline itself or when either figure is missing)."""
    base = {r["bytes"]: r.get("extra_max") for r in jobs if r["mode"] == baseline}
    for r in jobs:
        b, x = base.get(r["bytes"]), r.get("extra_max")
        if r["mode"] == baseline or b is None or x is None:
            r["saved"] = "-"
        else:
            r["saved"] = size_text(b - x) + (f" ({(b - x) / b:.0%})" if b > 0 else "")


def engine_row(size, path, rc, log, note):
    row = {"size": size_text(int(size)), "path": {"unchunked": "unchunked (no library)", "copy": "copy engine",
                                                  "host": "host engine"}.get(path, path)}
    if rc == "-":
        row["ok"] = note
        return row
    text = read(log)

    def grab(pat):
        m = re.search(pat, text)
        return m.group(1) if m else None
    row["seconds"], row["gbps"] = grab(r"seconds: ([\d.]+)"), grab(r"rate: ([\d.]+) GB/s")
    verified = grab(r"checksum: [0-9a-f]+ (verified)") is not None
    st = stats_of(text)
    split = st[0] if st else 0
    row["blocks"] = str(st[2]) if st else "1"
    why = []
    if rc != "0":
        why.append(f"exit {rc}")
    if not verified:
        why.append("checksum not verified")
    if path == "unchunked" and st:
        why.append("library loaded")
    if path != "unchunked" and split != 1:
        why.append(f"split {split} {'copy' if split == 1 else 'copies'}, expected 1")
    row["ok"] = "yes" if not why else "NO: " + "; ".join(why)
    return row


def table(rows, cols):
    width = {k: max(len(h), *(len(str(r.get(k, "-"))) for r in rows)) for k, h in cols}
    lines = ["  ".join(h.ljust(width[k]) for k, h in cols)]
    for r in rows:
        lines.append("  ".join(str(r.get(k, "-")).ljust(width[k]) for k, _ in cols).rstrip())
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", choices=("gpu", "sim"), required=True)
    p.add_argument("--modes", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "modes.txt"))
    p.add_argument("manifest")
    a = p.parse_args()
    modes = load_modes(a.modes)
    jobs, engines, notes = [], [], set()
    with open(a.manifest) as f:
        for line in f:
            kind, size, mode, rc, log, folder, note = (line.rstrip("\n").split("\t") + [""] * 7)[:7]
            if kind == "job":
                jobs.append(job_row(size, mode, rc, log, folder, note, a.backend, modes.get(mode, {})))
            elif kind == "engine":
                engines.append(engine_row(size, mode, rc, log, note))
                if note and rc != "-":
                    notes.add(note)
    baseline = next(iter(modes), None)
    saved_vs_stock(jobs, baseline)
    ran_ok = all(r["ok"] == "yes" for r in jobs + engines if not r["ok"].startswith("not run"))
    head = "SIMULATED: figures are not GPU figures" if a.backend == "sim" else "GPU figures"
    print(f"== checkpoint job: torchrun --nproc_per_node=2 (gloo, both ranks on GPU 0), "
          f"dcp.save + dcp.load, sizes per rank ({head})")
    print(table(jobs, [("size", "SIZE/rank"), ("mode", "mode"), ("ok", "success"), ("save_s", "save s"),
                       ("gbps", "GB/s"), ("load_s", "load s"), ("rss", "peak RSS r0,r1"),
                       ("extra", "extra over the start r0,r1"), ("saved", f"saved vs stock ({baseline})"),
                       ("held", "held after the save r0,r1"), ("load_extra", "load extra r0,r1"),
                       ("pinned_asked", "pinned asked"), ("pinned_locked", "pinned locked"),
                       ("pageable", "served lazily r0,r1"), ("split", "split copies/bytes r0,r1"),
                       ("views", "zero-copy views r0,r1"), ("preload", "preloaded r0,r1")]))
    print("modes:")
    for name in dict.fromkeys(r["mode"] for r in jobs):
        print(f"  {name}: {modes.get(name, {}).get('legend') or '(not in modes.txt)'}")
    print("peak RSS: the whole process (PyTorch, the table, the save). extra over the start: the save's own "
          "peak above the memory held just before it. held after the save: resident memory once dcp.save returned, minus "
          "just before it. load extra: the load's own peak above the memory held just before it. saved vs stock: the largest rank's extra, "
          f"{baseline} minus this mode. GB/s: bytes per rank / save seconds, slowest rank. pinned asked: peak of "
          "PyTorch's host allocator (largest rank). pinned locked: " +
          ("the simulator's measured page-locked peak." if a.backend == "sim" else
           "asked minus bytes libuvmchunk served lazily (derived, ~)."))
    async_jobs = [r for r in jobs if "stall_s" in r]
    if async_jobs:
        print()
        print(f"== dcp.async_save: the stall, the upload, and what the staged copy cost per rank ({head})")
        print(table(async_jobs, [("size", "SIZE/rank"), ("mode", "mode"), ("ok", "success"),
                                 ("stall_s", "stall s r0,r1"), ("upload_s", "upload done s r0,r1"),
                                 ("dd_s", "dd+fsync s r0,r1"), ("anon_peak", "anonymous peak r0,r1"),
                                 ("file_peak", "file-backed peak r0,r1"), ("shmem_peak", "shmem peak r0,r1"),
                                 ("pinned_locked", "pinned locked"), ("anon_left", "anonymous left r0,r1"),
                                 ("file_left", "file-backed left r0,r1")]))
        print("peaks and what is left: above the values just before async_save (RssAnon, RssFile, RssShmem of "
              "/proc/self/status, sampled every 5 ms), left: once the upload completed. dd+fsync: the same "
              "bytes written into the checkpoint's folder, for scale.")
    print()
    print(f"== engine comparison: one managed buffer (FBGEMM's advice) -> pinned destination ({head})")
    print(table(engines, [("size", "SIZE"), ("path", "path"), ("ok", "success"), ("seconds", "seconds"),
                          ("gbps", "GB/s"), ("blocks", "blocks")]))
    for n in sorted(notes):
        print(f"note: {n}")
    print()
    print("RESULT: all runs succeeded" if ran_ok else "RESULT: FAILURES above (logs in the manifest's folder)")
    sys.exit(0 if ran_ok else 1)


if __name__ == "__main__":
    main()
