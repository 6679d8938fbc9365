"""report.py: the tables of integration/run.sh, from its manifest (one tab-separated line per run:
kind, size, mode, exit status, log, per-rank log folder, note). Standard library only.

Job table, one row per size and mode: success, save seconds (slowest rank), GB/s (bytes per rank
over that rank's save seconds, slowest rank), load seconds, peak resident host memory of each rank
(VmHWM), pinned bytes PyTorch's host allocator asked for (peak, largest rank), pinned bytes really
page-locked (simulator: its own measured peak; GPU: asked minus what libuvmchunk served lazily,
derived, when none of those was pinned at its first use), the copies libuvmchunk split per rank, and whether it was mapped in each rank.
Success: exit 0, every tensor reloaded bitwise equal on both ranks, and with the library: mapped in
both ranks and each rank's stats show at least one split copy (the save's copy of its table).

Engine table, one row per path: success (exit 0, checksum verified, blocks as expected), seconds,
GB/s, blocks.

usage: report.py --backend gpu|sim MANIFEST
Exit status: 0 when every row that ran succeeded, 1 otherwise.
"""
import argparse
import glob
import json
import os
import re
import sys

STATS_RE = re.compile(r"uvmchunk: stats: split (\d+) copies \((\d+) bytes in (\d+) blocks.*?"
                      r"(\d+) pinned requests served lazily \((\d+) bytes, (\d+) pinned at their first use\)")


def gib(n):
    return "-" if n is None else f"{n / (1 << 30):.2f}G"


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def rank_logs(folder):
    """{rank: (stdout, stderr)} from torchrun's --log-dir layout RUN_ID/attempt_N/RANK/std*.log
    (the last attempt)."""
    found = {}
    for p in sorted(glob.glob(os.path.join(folder, "*", "attempt_*", "*", "stdout.log"))):
        rank = os.path.basename(os.path.dirname(p))
        if rank.isdigit():
            found[int(rank)] = (read(p), read(os.path.join(os.path.dirname(p), "stderr.log")))
    return found


def job_row(size, mode, rc, log, folder, note, backend):
    row = {"size": size, "mode": mode}
    if rc == "-":
        row["ok"] = note
        return row
    ranks = rank_logs(folder)
    results, stats = {}, {}
    for r, (out, err) in ranks.items():
        for line in out.splitlines():
            if line.startswith("RESULT "):
                results[r] = json.loads(line[7:])
        m = list(STATS_RE.finditer(err))
        if m:
            stats[r] = tuple(int(x) for x in m[-1].groups())
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
    if mode == "uvmchunk":
        if not all(res.get("preloaded") for res in results.values()):
            why.append("library not mapped in every rank")
        if sorted(stats) != [0, 1] or not all(s[0] >= 1 for s in stats.values()):
            why.append(f"stats show no split copy in some rank: {stats}")
    elif stats:
        why.append("library stats without the library")
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
    row["rss"] = ",".join(gib(x.get("vmhwm")) for x in res) or "-"
    asked = [x.get("pinned_asked_peak") for x in res if x.get("pinned_asked_peak") is not None]
    row["pinned_asked"] = gib(max(asked)) if asked else "-"
    if backend == "sim":
        locked = [x.get("pinned_locked_peak") for x in res if x.get("pinned_locked_peak") is not None]
        row["pinned_locked"] = gib(max(locked)) if locked else "-"
    else:
        vals = []
        for r, x in sorted(results.items()):
            a = x.get("pinned_asked_peak")
            # a lazy buffer pinned at its first use is locked after all: then nothing is derived
            if a is not None and not (r in stats and stats[r][5]):
                vals.append(max(0, a - (stats[r][4] if r in stats else 0)))
        row["pinned_locked"] = ("~" + gib(max(vals))) if vals else "-"
    row["split"] = ",".join(f"{stats[r][0]}/{gib(stats[r][1])}" if r in stats else "-" for r in sorted(results)) or "-"
    row["pageable"] = ",".join(gib(stats[r][4]) if r in stats else "-" for r in sorted(results)) or "-"
    row["preload"] = ",".join("y" if x.get("preloaded") else "n" for x in res) or "-"
    return row


def engine_row(size, path, rc, log, note):
    row = {"size": size, "path": {"unchunked": "unchunked (no library)", "copy": "copy engine",
                                  "host": "host engine"}.get(path, path)}
    if rc == "-":
        row["ok"] = note
        return row
    text = read(log)

    def grab(pat):
        m = re.search(pat, text)
        return m.group(1) if m else None
    row["seconds"], row["gbps"] = grab(r"seconds: ([\d.]+)"), grab(r"GB/s: ([\d.]+)")
    verified = grab(r"checksum: [0-9a-f]+ (verified)") is not None
    st = STATS_RE.search(text)
    split = int(st.group(1)) if st else 0
    row["blocks"] = st.group(3) if st else "1"
    why = []
    if rc != "0":
        why.append(f"exit {rc}")
    if not verified:
        why.append("checksum not verified")
    if path == "unchunked" and st:
        why.append("library loaded")
    if path != "unchunked" and split != 1:
        why.append(f"split {split} copies, expected 1")
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
    p.add_argument("manifest")
    a = p.parse_args()
    jobs, engines, notes = [], [], set()
    with open(a.manifest) as f:
        for line in f:
            kind, size, mode, rc, log, folder, note = (line.rstrip("\n").split("\t") + [""] * 7)[:7]
            if kind == "job":
                jobs.append(job_row(size, mode, rc, log, folder, note, a.backend))
            elif kind == "engine":
                engines.append(engine_row(size, mode, rc, log, note))
                if note and rc != "-":
                    notes.add(note)
    ran_ok = all(r["ok"] == "yes" for r in jobs + engines if not r["ok"].startswith("not run"))
    head = "SIMULATED: figures are not GPU figures" if a.backend == "sim" else "GPU figures"
    print(f"== checkpoint job: torchrun --nproc_per_node=2 (gloo, both ranks on GPU 0), "
          f"dcp.save + dcp.load, sizes per rank ({head})")
    print(table(jobs, [("size", "SIZE/rank"), ("mode", "mode"), ("ok", "success"), ("save_s", "save s"),
                       ("gbps", "GB/s"), ("load_s", "load s"), ("rss", "peak RSS r0,r1"),
                       ("pinned_asked", "pinned asked"), ("pinned_locked", "pinned locked"),
                       ("pageable", "served lazily r0,r1"), ("split", "split copies/bytes r0,r1"),
                       ("preload", "preloaded r0,r1")]))
    print("GB/s: bytes per rank / save seconds, slowest rank. pinned asked: peak of PyTorch's host "
          "allocator (largest rank). pinned locked: " +
          ("the simulator's measured page-locked peak." if a.backend == "sim" else
           "asked minus bytes libuvmchunk served lazily (derived, ~)."))
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
