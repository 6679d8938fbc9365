"""report.py: the tables of integration/run.sh, from its manifest (one tab-separated line per run:
kind, size in bytes, mode, exit status, log, per-rank log folder, note) and integration/modes.txt
(the modes: how each ran, what success means, the legend). Standard library only.

Job table, one row per size and mode, 100 columns wide, with the README's column names and the
largest rank's figures: success; save seconds (slowest rank); "extra host memory of the save":
the rank's peak during dcp.save above its resident memory just before it, i.e. what the save
itself cost; "page-locked at peak" (simulator: its own measured peak; GPU: what PyTorch's host
allocator asked for minus what libuvmchunk served lazily, derived, when none of those was pinned
at its first use); "left resident after the save"; load seconds; "load extra" (the job's
load_extra, the same peak for dcp.load; '-' when the job does not give it); "saved vs stock": the
first mode's (stock DCP's) extra minus this mode's, for the same size. Then the details: GB/s
(bytes per rank over that rank's save seconds, slowest rank), peak resident host memory (VmHWM:
PyTorch and the tables included), pinned bytes PyTorch asked for, bytes libuvmchunk served
lazily, the copies it split, the zero-copy views the save took, whether the library was mapped,
per rank, and whether the package's per-checkpoint record (UVMCHUNK_REPORT, written under
uvmchunk-run: RANKS_FOLDER.report.jsonl) agrees with the job's own measurement of dcp.save (and
dcp.load) within 5 % or 4 MiB, whichever is larger (a disagreement fails the row). Success: exit 0, every tensor reloaded bitwise equal on both ranks, and what modes.txt
expects of the mode: the library mapped in both ranks when it was preloaded, a split copy in each
rank's stats (expect split), a view in each rank (expect views); a failure's reasons follow the
table.

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
    """Bytes as a person reads them, like config/units.c: 48 MiB, 1.50 GiB, 512 bytes; 0 for none
    (narrow columns); '-' for None."""
    if n is None:
        return "-"
    if n == 0:
        return "0"
    sign, n = ("-", -n) if n < 0 else ("", n)
    if n < 1024:
        return f"{sign}{n} byte{'' if n == 1 else 's'}"
    for shift, unit in ((60, "EiB"), (50, "PiB"), (40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= (1 << shift) * 0.9995:  # just under a unit reads as it ("1.00 GiB", not "1024 MiB")
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


def page_locked(result, stats, backend):
    """One rank's page-locked peak in bytes, or None where it is not known. On the simulator: its own
    measured peak (the job's pinned_locked_peak). On a GPU, derived: the peak PyTorch's host allocator
    asked for minus the bytes libuvmchunk served lazily (stats: that process's stats_of tuple, or
    None without the library); None when a lazy buffer was pinned at its first use (locked after all)."""
    if backend == "sim":
        return result.get("pinned_locked_peak")
    asked = result.get("pinned_asked_peak")
    if asked is None or (stats and stats[5]):
        return None
    return max(0, asked - (stats[4] if stats else 0))


def signed_size(n):
    """A size difference: '+1.50 MiB', '-63 MiB', '0'."""
    return ("-" if n < 0 else "+" if n > 0 else "") + size_text(abs(n))


def per_rank(values, fmt=str):
    return ",".join("-" if v is None else fmt(v) for v in values) or "-"


def largest(values, fmt=str):
    """The largest rank's figure (as the README's table gives it); '-' when a rank lacks it (a job
    that does not measure it)."""
    return fmt(max(values)) if values and None not in values else "-"


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
    row["report"] = report_check(folder + ".report.jsonl", results, why)
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
    row["extra_top"] = largest(extras, size_text)
    row["held_top"] = largest([x.get("held_after_save") for x in res], signed_size)
    row["load_extra"] = largest([x.get("load_extra") for x in res], size_text)
    row["rss_top"] = largest([x.get("vmhwm") for x in res], size_text)
    asked = [x.get("pinned_asked_peak") for x in res if x.get("pinned_asked_peak") is not None]
    row["pinned_asked"] = size_text(max(asked)) if asked else "-"
    locked = [v for v in (page_locked(x, stats.get(r), backend) for r, x in sorted(results.items())) if v is not None]
    row["pinned_locked"] = ("" if backend == "sim" else "~") + size_text(max(locked)) if locked else "-"
    row["split"] = ",".join(f"{stats[r][0]}/{size_text(stats[r][1])}" if r in stats else "-"
                            for r in sorted(results)) or "-"
    row["pageable"] = ",".join(size_text(stats[r][4]) if r in stats else "-" for r in sorted(results)) or "-"
    row["views"] = per_rank([x.get("save_views", 0) for x in res])
    row["preload"] = ",".join("y" if x.get("preloaded") else "n" for x in res) or "-"
    if any("async" in x for x in res):  # --mode async: the figures of the async table
        def fig(key, fmt):  # the largest rank's, as in the job table
            return largest([x["async"].get(key) if "async" in x else None for x in res], fmt)
        for key in ("anon_peak", "file_peak", "shmem_peak", "anon_left", "file_left"):
            row[key] = fig(key, signed_size)
        for key in ("stall_s", "upload_s", "dd_s"):
            row[key] = fig(key, lambda v: f"{v:.2f}")
    return row


# The package's per-checkpoint record (python/uvmchunk/_report.py, UVMCHUNK_REPORT) against the job's
# own measurement of the same call: (record call, its field, the job's result field).
REPORT_FIGURES = (("dcp.save", "host_peak_added_bytes", "save_extra"),
                  ("dcp.load", "host_peak_added_bytes", "load_extra"))


def report_check(path, results, why):
    """'agrees' when every rank's record of each call the job measured is within 5 % or 4 MiB
    (whichever is larger) of the job's figure, '-' when there are no records (the package's report
    runs under uvmchunk-run only); a disagreement is added to `why`."""
    records = []
    for line in read(path).splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            why.append(f"report {path}: a line that is not JSON")
    if not records:
        return "-"
    compared, differ = 0, 0
    for rank, res in sorted(results.items()):
        for call, field, own in REPORT_FIGURES:
            mine = [r for r in records if r.get("rank") == rank and r.get("call") == call]
            if res.get(own) is None or not mine:
                continue
            got, want = mine[0].get(field, 0), res[own]
            compared += 1
            if abs(got - want) > max(0.05 * abs(want), 4 << 20):
                differ += 1
                why.append(f"rank {rank} {call}: the report says +{size_text(got)}, the job measured +{size_text(want)}")
    return "differs" if differ else "agrees" if compared else "-"


def saved_vs_stock(jobs, baseline):
    """'saved vs stock' per row: the baseline mode's largest per-rank save extra minus this row's,
    same size ('-' for the baseline itself or when either figure is missing)."""
    base = {r["bytes"]: r.get("extra_max") for r in jobs if r["mode"] == baseline}
    for r in jobs:
        b, x = base.get(r["bytes"]), r.get("extra_max")
        if r["mode"] == baseline or b is None or x is None:
            r["saved"] = "-"
        else:
            r["saved"] = size_text(b - x)


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
    """Columns (key, header) left-aligned, one blank apart; a header's '\\n' breaks it over lines
    (so the README's column names fit 100 columns)."""
    heads = {k: h.split("\n") for k, h in cols}
    depth = max(len(h) for h in heads.values())
    width = {k: max(*(len(x) for x in heads[k]), *(len(str(r.get(k, "-"))) for r in rows)) for k, _ in cols}
    lines = [" ".join((heads[k][i] if i < len(heads[k]) else "").ljust(width[k]) for k, _ in cols).rstrip()
             for i in range(depth)]
    for r in rows:
        lines.append(" ".join(str(r.get(k, "-")).ljust(width[k]) for k, _ in cols).rstrip())
    return "\n".join(lines)


# The job tables' columns, (row key, header): the README's names for the figures it quotes, the
# largest rank's value. A new figure is one entry here and one line in job_row; a new mode (an
# async one) is a line of modes.txt and needs neither.
JOB_COLUMNS = [("size", "size/rank"), ("mode", "mode"), ("ok_short", "ok"), ("save_s", "save s"),
               ("extra_top", "extra host\nmemory of\nthe save"), ("pinned_locked", "page-locked\nat peak"),
               ("held_top", "left resident\nafter the\nsave"), ("load_s", "load s"), ("load_extra", "load\nextra"),
               ("saved", "saved vs\nstock")]
DETAIL_COLUMNS = [("size", "size/rank"), ("mode", "mode"), ("gbps", "GB/s"), ("rss_top", "peak\nRSS"),
                  ("pinned_asked", "pinned\nasked"), ("pageable", "served lazily\nr0,r1"),
                  ("split", "split copies/\nbytes r0,r1"), ("views", "views\nr0,r1"), ("preload", "library\nr0,r1"),
                  ("report", "report")]

ASYNC_COLUMNS = [("size", "size/rank"), ("mode", "mode"), ("ok_short", "ok"), ("stall_s", "stall\ns"),
                 ("upload_s", "upload\ndone s"), ("dd_s", "dd+\nfsync s"), ("anon_peak", "anonymous\npeak"),
                 ("file_peak", "file-\nbacked\npeak"), ("shmem_peak", "shmem\npeak"), ("pinned_locked", "page-\nlocked"),
                 ("anon_left", "anonymous\nleft"), ("file_left", "file-\nbacked\nleft")]


def wrapped(text, width=100):
    import textwrap
    return "\n".join(textwrap.wrap(text, width, subsequent_indent="  "))


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
    for r in jobs:
        r["ok_short"] = r["ok"] if r["ok"] == "yes" or r["ok"].startswith("not run") else "NO"
    print(wrapped(f"== checkpoint job: torchrun --nproc_per_node=2 (gloo, both ranks on GPU 0), dcp.save + "
                  f"dcp.load, sizes per rank; the largest rank's figures ({head})"))
    print(table(jobs, JOB_COLUMNS))
    for r in jobs:
        if r["ok_short"] == "NO":
            print(wrapped(f"{r['size']} {r['mode']}: {r['ok']}"))
    print("modes:")
    for name in dict.fromkeys(r["mode"] for r in jobs):
        print(wrapped(f"  {name}: {modes.get(name, {}).get('legend') or '(not in modes.txt)'}"))
    print(wrapped("extra host memory of the save: the save's own peak above the memory held just before it. "
                  "page-locked at peak: " +
                  ("the simulator's measured page-locked peak. " if a.backend == "sim" else
                   "PyTorch's pinned requests minus what libuvmchunk served lazily (derived, ~). ") +
                  "left resident after the save: resident memory once dcp.save returned, minus just before it. "
                  "load extra: the same peak for dcp.load ('-': the job does not measure it). "
                  f"saved vs stock: {baseline}'s extra minus this mode's. s: the slowest rank."))
    print()
    print("== the same runs, per rank where two figures are given")
    print(table(jobs, DETAIL_COLUMNS))
    print(wrapped("GB/s: bytes per rank / save seconds, slowest rank. peak RSS: the whole process (PyTorch, the "
                  "table, the save), largest rank. pinned asked: peak of PyTorch's host allocator, largest rank. "
                  "served lazily, split copies: from libuvmchunk's stats line. views: zero-copy views the save "
                  "took. library: libuvmchunk.so mapped (y/n). report: the package's per-checkpoint record "
                  "(UVMCHUNK_REPORT) agrees with the job's own measurement of the save (and the load) within 5 % "
                  "or 4 MiB ('-': no record, the library was not loaded)."))
    async_jobs = [r for r in jobs if "stall_s" in r]
    if async_jobs:
        print()
        print(wrapped(f"== dcp.async_save: the stall, the upload, and what the staged copy cost per rank ({head})"))
        print(table(async_jobs, ASYNC_COLUMNS))
        print(wrapped("the largest rank's figures. peaks and what is left: above the values just before async_save (RssAnon, RssFile, "
                      "RssShmem of /proc/self/status, sampled every 5 ms); left: once the upload completed. "
                      "dd+fsync: the same bytes written into the checkpoint's folder, for scale."))
    print()
    print(wrapped(f"== engine comparison: one managed buffer (FBGEMM's advice) -> pinned destination ({head})"))
    print(table(engines, [("size", "SIZE"), ("path", "path"), ("ok", "success"), ("seconds", "seconds"),
                          ("gbps", "GB/s"), ("blocks", "blocks")]))
    for n in sorted(notes):
        print(f"note: {n}")
    print()
    print("RESULT: all runs succeeded" if ran_ok else "RESULT: FAILURES above (logs in the manifest's folder)")
    sys.exit(0 if ran_ok else 1)


if __name__ == "__main__":
    main()
