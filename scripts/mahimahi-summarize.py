#!/usr/bin/env python3
"""Median table from mahimahi-compare.sh's results.csv: Mbit/s per row x kind, and braid-link/mahimahi ratios."""
import csv
import statistics
import sys

path = sys.argv[1]
rows_order = ["rtt-100", "rtt-200", "rtt-400", "queue-20", "queue-100", "loss-1pct"]
kinds = ["mm-braid", "mm-cubic", "mm-bbr", "bl-braid", "bl-cubic", "bl-bbr"]
vals = {}
for r in csv.DictReader(open(path)):
    vals.setdefault((r["row"], r["kind"]), []).append(r["mbps"])


def med(row, kind):
    v = vals.get((row, kind), [])
    ok = [float(x) for x in v if x not in ("NA", "")]
    if not ok:
        return None, len(v), 0
    return statistics.median(ok), len(v), len(ok)


def fmt(x, n=1):
    return "-" if x is None else f"{x:.{n}f}"


hdr = f"{'row':10}" + "".join(f"{k:>10}" for k in kinds) + f"{'braid bl/mm':>12}{'cubic bl/mm':>12}{'bbr bl/mm':>11}"
print("Median goodput, Mbit/s (mm = mahimahi, bl = braid link)")
print(hdr)
notes = []
for row in rows_order:
    if not any((row, k) in vals for k in kinds):
        continue
    m = {}
    line = f"{row:10}"
    for k in kinds:
        v, n, nok = med(row, k)
        m[k] = v
        cell = fmt(v) + ("" if nok == n else f"({nok}/{n})")
        line += f"{cell:>10}"
        if nok != n:
            notes.append(f"{row} {k}: {n - nok} of {n} runs failed/timed out")
    for a, b, w in (("bl-braid", "mm-braid", 12), ("bl-cubic", "mm-cubic", 12), ("bl-bbr", "mm-bbr", 11)):
        r = m[a] / m[b] if m[a] is not None and m[b] else None
        line += f"{fmt(r, 2):>{w}}"
    print(line)
for n in notes:
    print("note:", n)
