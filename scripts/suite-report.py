#!/usr/bin/env python3
"""Benchmark report for the scenario suites of issue 3.

Runs every scenario file of each suite in the simulator once per controller
and seed, and prints one markdown table per suite: the seed's published
TCP/iperf3 figure and its own system's figure, Linux TCP's best (issue 3's
"The TCP to beat"), braid's mean goodput per controller, braid's best, the
ideal (capacity x (1 - loss)), best/ideal, and whether the row's targets
(the `target_*` keys of its `[published]` table, docs/scenarios.md) are met.

Usage:
    scripts/suite-report.py [SUITE ...] [--cc aimd,cubic,bbr,mbecn,ncp] [--seeds N]
                            [--jobs N] [--series-dir DIR] [--braid PATH]

SUITE is a directory name under scenarios/ (or a path to one); none = every
directory of scenarios/ whose files have a [published] table. Nothing is
built: run `cargo build --release` first. Python 3.11+, standard library only.
"""

import argparse
import concurrent.futures
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = os.path.join(ROOT, "scenarios")

# Wire format (crates/braid-proto/src/wire.rs): public header, STREAM frame
# (type varint, offset varint, length varint), IPv4 + UDP as the simulator
# counts them on a link.
BRAID_HEADER = 19
IP_UDP = 28
DEFAULT_MTU = 1380
# TCP's payload/wire ratio with 1500-byte packets and timestamps (issue 3).
TCP_RATIO = 1448 / 1500

INCOMPLETE = "†"  # a run did not complete (or did not verify)


# ----------------------------------------------------------------- units


def parse_time(v):
    """Seconds from a scenario time value ("20ms", "1.5s", 0)."""
    if isinstance(v, (int, float)):
        return float(v)
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ns|us|ms|s|min)\s*", v)
    if not m:
        return None
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}[m.group(2)]
    return float(m.group(1)) * scale


def parse_size(v):
    """Bytes from a scenario size value ("50MB", "4MiB", 1200)."""
    if isinstance(v, int):
        return v
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMG]i?B|B)?\s*", v)
    if not m:
        return None
    scale = {None: 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9,
             "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[m.group(2)]
    return int(float(m.group(1)) * scale)


def parse_rate(v):
    """("bps", x) or ("pps", x) from a scenario rate value."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z/]+)\s*", str(v))
    if not m:
        return None
    x, unit = float(m.group(1)), m.group(2)
    if unit == "pps":
        return ("pps", x)
    scale = {"bit": 1, "bps": 1, "Kbit": 1e3, "Kbps": 1e3, "Mbit": 1e6, "Mbps": 1e6,
             "Gbit": 1e9, "Gbps": 1e9}.get(unit)
    return ("bps", x * scale) if scale else None


def unit_to_mbps(unit):
    """Factor converting a [published] unit to Mbit/s, or None if unknown."""
    if not unit:
        return 1.0
    u = unit.strip()
    if u.startswith("Mbit/s") or u.startswith("Mbps"):
        return 1.0
    if u.startswith("Gbit/s"):
        return 1000.0
    if u.startswith("MB/s"):
        return 8 * 2**20 / 1e6 if "2^20" in u else 8.0
    if u.startswith("KB/s") or u.startswith("kB/s"):
        return 8e-3
    return None


def varint_size(v):
    return 1 if v < 64 else 2 if v < 16384 else 4 if v < 2**30 else 8


def stream_overhead(total, mtu):
    """Mean STREAM frame overhead over a transfer of `total` bytes (wire.rs
    stream_frame_overhead: 1 + varint(offset) + varint(len))."""
    n = max(1, math.ceil(total / mtu))
    acc = 0
    for lo, hi, size in [(0, 64, 1), (64, 16384, 2), (16384, 2**30, 4), (2**30, 2**62, 8)]:
        # segments whose offset k*mtu lies in [lo, hi)
        first = math.ceil(lo / mtu)
        last = min(n - 1, math.ceil(hi / mtu) - 1)
        if last >= first:
            acc += (last - first + 1) * size
    return 1 + acc / n + varint_size(mtu)


def wire_bytes(mtu, total):
    return mtu + BRAID_HEADER + stream_overhead(total, mtu) + IP_UDP


def payload_ratio(mtu, total):
    return mtu / wire_bytes(mtu, total)


# ----------------------------------------------------------------- scenarios


class Row:
    def __init__(self, suite, path):
        self.suite = suite
        self.path = path
        self.name = os.path.splitext(os.path.basename(path))[0]
        with open(path, "rb") as f:
            self.sc = tomllib.load(f)
        self.pub = self.sc.get("published", {}) or {}
        self.paths = self.sc.get("path", [])
        self.flows = self.sc.get("flow", [])
        f0 = self.flows[0] if self.flows else {}
        self.mtu = int(f0.get("mtu", DEFAULT_MTU))
        self.bytes = parse_size(f0.get("bytes", 0)) or 0
        self.duplex = any(parse_size(f.get("reverse_bytes", 0)) for f in self.flows)
        self.multi_flow = len(self.flows) > 1
        self.pps = any((parse_rate(p.get("rate", "")) or ("", 0))[0] == "pps" for p in self.paths)
        self.needs_series = any(k in self.pub for k in
                                ("target_converge_within_s", "target_jain")) or self.multi_flow

    def used_paths(self):
        used = set()
        for f in self.flows:
            used.update(f.get("paths", range(len(self.paths))))
        return sorted(used)

    def path_capacity_mbps(self, i, with_loss=True):
        p = self.paths[i]
        r = parse_rate(p.get("rate", "")) if "rate" in p else None
        if r is None:
            return None
        kind, x = r
        mbps = x * self.mtu * 8 / 1e6 if kind == "pps" else x / 1e6
        if with_loss:
            mbps *= 1 - float(p.get("loss", 0.0))
        return mbps

    def ideal_mbps(self):
        """Capacity x (1 - loss) over the paths the flows use, before header overhead."""
        caps = [self.path_capacity_mbps(i) for i in self.used_paths()]
        return None if any(c is None for c in caps) else sum(caps)

    def params(self):
        out = []
        for i in self.used_paths():
            p = self.paths[i]
            bits = [str(p.get("rate", p.get("trace", "trace")))]
            d = parse_time(p.get("delay", 0)) or 0
            j = parse_time(p.get("jitter", 0)) or 0
            rtt = f"RTT {fmt_ms(2 * d)}"
            if j:
                rtt += f"±{fmt_ms(2 * j)}"
            bits.append(rtt)
            loss, rloss = float(p.get("loss", 0)), float(p.get("reverse_loss", 0))
            if loss or rloss:
                bits.append(f"loss {loss * 100:g}%" + (f"/{rloss * 100:g}% rev" if rloss else ""))
            if "queue" in p:
                bits.append(f"q {p['queue']}")
            if p.get("ecn", "off") != "off":
                bits.append(f"ecn {p['ecn']}")
            for e in p.get("events", []):
                bits.append(f"{e['do']} at {e['at']}" + (f" for {e['for']}" if "for" in e else ""))
            out.append(" ".join(bits))
        s = " + ".join(out)
        fl = []
        for f in self.flows:
            b = str(f.get("bytes", "0"))
            if parse_size(f.get("reverse_bytes", 0)):
                b += f" ⇄ {f['reverse_bytes']}"
            if parse_time(f.get("start", 0)):
                b += f" @{f['start']}"
            if "rto_k" in f:
                b += f" k={f['rto_k']:g}"
            fl.append(b)
        return s + "; " + ", ".join(fl)


def fmt_ms(s):
    ms = s * 1e3
    return f"{ms:g}ms" if ms >= 1 or ms == 0 else f"{ms * 1e3:g}us"


def natural_key(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


# Issue 3's order; other suites follow alphabetically.
SUITE_ORDER = ["nkp0024", "catchunks-delay", "catchunks-jitter", "catchunks-loss",
               "catchunks-mixed", "catchunks-queue", "catchunks-longrtt",
               "catchunks-cubic-aimd", "rapid", "rudp", "mbecn"]


def discover_suites():
    out = []
    for d in sorted(os.listdir(SCENARIOS)):
        full = os.path.join(SCENARIOS, d)
        if not os.path.isdir(full):
            continue
        for f in os.listdir(full):
            if f.endswith(".toml"):
                with open(os.path.join(full, f), "rb") as fh:
                    if "published" in tomllib.load(fh):
                        out.append(d)
                        break
    rank = {n: i for i, n in enumerate(SUITE_ORDER)}
    return sorted(out, key=lambda d: (rank.get(d, len(rank)), d))


def suite_rows(suite):
    d = os.path.join(SCENARIOS, suite)
    if not os.path.isdir(d):
        d = suite
    if not os.path.isdir(d):
        raise SystemExit(f"suite-report: no suite directory {suite!r} (looked in {SCENARIOS})")
    name = os.path.basename(os.path.normpath(d))
    files = sorted((f for f in os.listdir(d) if f.endswith(".toml")),
                   key=lambda f: natural_key(f[: -len(".toml")]))
    return name, [Row(name, os.path.join(d, f)) for f in files]


# ----------------------------------------------------------------- running


def run_braid(braid, path, cc, seed, series):
    cmd = [braid, "sim", path, "--cc", cc, "--seed", str(seed), "--json"]
    if series:
        cmd.append("--series")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 3600 s wall"}
    try:
        out = json.loads(p.stdout)
        out["_rc"] = p.returncode
        return out
    except json.JSONDecodeError:
        lines = [l.strip() for l in p.stderr.splitlines() if l.strip() and l.strip() != "|"]
        msg = " ".join(lines) or f"exit {p.returncode}, no output"
        return {"error": msg[:300], "_rc": p.returncode}


PROBE = """[[path]]
rate = "10Mbit"
delay = "1ms"
[[flow]]
bytes = 20000
"""


def probe_controllers(braid, ccs):
    """Splits ccs into (accepted, {rejected: message})."""
    accepted, rejected = [], {}
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(PROBE)
        probe = f.name
    try:
        for cc in ccs:
            p = subprocess.run([braid, "sim", probe, "--cc", cc, "--json"],
                               capture_output=True, text=True)
            if p.returncode == 2 and "--cc" in p.stderr:
                rejected[cc] = (p.stderr.strip().splitlines() or ["rejected"])[0]
            else:
                accepted.append(cc)
    finally:
        os.unlink(probe)
    return accepted, rejected


# ----------------------------------------------------------------- metrics


def flow_ok(f):
    ok = f.get("completed") and f.get("verified")
    r = f.get("reverse")
    if r:
        ok = ok and r.get("completed") and r.get("verified")
    return bool(ok)


class Result:
    """One (row, controller) over all seeds."""

    def __init__(self, row, cc, runs):
        self.row, self.cc, self.runs = row, cc, runs
        self.errors = [r["error"] for r in runs if "error" in r and "flows" not in r]
        good = [r for r in runs if "flows" in r]
        self.good = good
        self.complete = bool(good) and not self.errors and all(
            all(flow_ok(f) for f in r["flows"]) for r in good)
        self.flow_errors = sorted({f["error"] for r in good for f in r["flows"] if f.get("error")})
        if not good:
            self.goodput = None
            return
        self.goodput = mean(self.aggregate(r) for r in good)
        self.fwd = mean(r["flows"][0]["goodput_mbps"] for r in good)
        self.rev = mean(r["flows"][0]["reverse"]["goodput_mbps"] for r in good) if row.duplex else None
        self.per_flow = [mean(r["flows"][i]["goodput_mbps"] for r in good)
                         for i in range(len(good[0]["flows"]))]
        self.jain = mean(r.get("jain_fairness", float("nan")) for r in good)
        deliveries = [d for r in good for f in r["flows"] for d in (f, f.get("reverse")) if d]
        n = len(good)
        self.spurious = sum(d.get("spurious_retransmits", 0) for d in deliveries) / n
        self.decreases = sum(d.get("window_decreases", 0) for d in deliveries) / n
        self.segments = sum(d.get("segments", 0) for d in deliveries) / n
        self.spurious_max = max(sum(d.get("spurious_retransmits", 0)
                                    for f in r["flows"] for d in (f, f.get("reverse")) if d)
                                for r in good)
        self.rtt = [r["flows"][0].get("rtt_ms", {}) for r in good]
        self.wall = sum(r.get("wall_s", 0) for r in good)

    def aggregate(self, r):
        """Single flow: its goodput (duplex: both directions); several flows:
        all bytes over the span from the first start to the last end."""
        flows = r["flows"]
        if len(flows) == 1:
            f = flows[0]
            return f["goodput_mbps"] + (f["reverse"]["goodput_mbps"] if f.get("reverse") else 0)
        starts = [parse_time(spec.get("start", 0)) or 0 for spec in self.row.flows]
        ends = [s + f["duration_s"] for s, f in zip(starts, flows)]
        span = max(ends) - min(starts)
        total = sum(f["delivered"] + (f["reverse"]["delivered"] if f.get("reverse") else 0)
                    for f in flows)
        return total * 8 / 1e6 / span if span > 0 else float("nan")

    def cell(self):
        if self.goodput is None:
            return "ERR"
        if self.row.duplex:
            s = f"{self.fwd:.1f}⇄{self.rev:.1f}"
        else:
            s = f"{self.goodput:.1f}" if self.goodput < 100 else f"{self.goodput:.0f}"
        return s + ("" if self.complete else INCOMPLETE)


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def queue_estimate(row, res):
    """Mean standing queue in packets from (mean RTT - min RTT) x bottleneck rate."""
    rates = [parse_rate(row.paths[i].get("rate", "")) for i in row.used_paths()]
    if not rates or any(r is None or r[0] != "bps" for r in rates):
        return None
    bps = min(r[1] for r in rates)
    est = []
    for rtt in res.rtt:
        if "avg" in rtt and "min" in rtt:
            est.append((rtt["avg"] - rtt["min"]) / 1e3 * bps / 8 / wire_bytes(row.mtu, row.bytes))
    return mean(est) if est else None


def series_interval(row, runs_flows):
    """The sampling period actually used: the median gap between a run's
    sample times (the first sample may fall at the handshake, off the grid),
    else the file's sample_interval."""
    ts = sorted({round(e["t"], 9) for f in runs_flows for e in f.get("series", [])})
    gaps = sorted(b - a for a, b in zip(ts, ts[1:]) if b - a > 1e-9)
    if gaps:
        return gaps[len(gaps) // 2]
    return parse_time(row.sc.get("sample_interval", "100ms")) or 0.1


def series_by_time(flow, interval):
    """{sample index: {path: entry}} for one flow's series."""
    out = {}
    for e in flow.get("series", []):
        k = round(e["t"] / interval)
        out.setdefault(k, {})[e["path"]] = e
    return out


def convergence_time(row, run):
    """Seconds from converge_from_s until the window shares enter and stay
    within share_tolerance (relative) of the capacity shares; None = never."""
    pub = row.pub
    tol = float(pub.get("share_tolerance", 0.1))
    start = float(pub.get("converge_from_s", 0.0))
    caps = {i: row.path_capacity_mbps(p, with_loss=False) for i, p in enumerate(row.flows[0].get("paths", range(len(row.paths))))}
    total = sum(caps.values())
    shares = {i: c / total for i, c in caps.items()}
    interval = series_interval(row, run["flows"][:1])
    series = series_by_time(run["flows"][0], interval)
    samples = sorted(k for k in series if k * interval >= start - 1e-9)
    if not samples:
        return None
    ok = []
    for k in samples:
        ent = series[k]
        w = {p: ent[p]["window"] for p in ent}
        wt = sum(w.values())
        good = wt > 0 and all(p in w and abs(w[p] / wt - s) <= tol * s for p, s in shares.items())
        ok.append((k * interval, good))
    if not ok[-1][1]:
        return None
    t = ok[-1][0]
    for when, good in reversed(ok):
        if not good:
            break
        t = when
    return max(0.0, t - start)


def jain_time(row, run):
    """Seconds from jain_from_s until Jain's index of the flows' trailing
    100 ms mean throughputs reaches target_jain and stays there while all
    flows run; None = never. The trailing window is 100 ms or one sample
    period, whichever is longer, and never reaches back before jain_from_s."""
    target = float(row.pub.get("target_jain", 0.99))
    start = float(row.pub.get("jain_from_s", 0.0))
    interval = series_interval(row, run["flows"])
    per_flow = []
    for f in run["flows"]:
        s = series_by_time(f, interval)
        per_flow.append({k: sum(e.get("throughput_mbps", 0) for e in v.values()) for k, v in s.items()})
    if not per_flow or any(not s for s in per_flow):
        return None
    # the first flow to stop sampling ends the overlap; its last sample may
    # cover only part of an interval, so it is left out
    end = min(max(s) for s in per_flow) - 1
    k0 = math.ceil(start / interval - 1e-9)
    win = max(1, round(0.1 / interval))
    points = []
    for k in range(k0, end + 1):
        lo = max(k0, k - win + 1)
        xs = [mean(s.get(j, 0.0) for j in range(lo, k + 1)) for s in per_flow]
        sq = sum(x * x for x in xs)
        jain = (sum(xs) ** 2) / (len(xs) * sq) if sq > 0 else 0.0
        points.append((k * interval, jain))
    if not points or points[-1][1] < target:
        return None
    t = points[-1][0]
    for when, j in reversed(points):
        if j < target:
            break
        t = when
    return max(0.0, t - start)


# ----------------------------------------------------------------- report


def seed_value(row, key):
    v = row.pub.get(key)
    if not isinstance(v, (int, float)):
        return None
    f = unit_to_mbps(row.pub.get("unit"))
    return None if f is None else v * f


def fmt(v, digits=1):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}f}" if abs(v) < 100 else f"{v:.0f}"


def best_of(results):
    """The best result: highest goodput among complete runs, else among any."""
    cands = [r for r in results if r.goodput is not None and r.complete]
    if not cands:
        cands = [r for r in results if r.goodput is not None]
    return max(cands, key=lambda r: r.goodput) if cands else None


def check_targets(row, best, lookup):
    """[(met: bool|None, text)] for every target_* key of the row."""
    pub = row.pub
    out = []
    if best is None:
        return [(False, "no run")] if any(k.startswith("target_") for k in pub) else []
    if not best.complete and any(k.startswith("target_") for k in pub):
        out.append((False, "no controller completed every run"))
    ideal = row.ideal_mbps()
    ratio = 1.0 if row.pps else payload_ratio(row.mtu, row.bytes)
    # per-direction goodput for comparisons with one-way figures
    g = best.fwd if row.duplex else best.goodput
    if "target_fraction_of_ideal" in pub and ideal:
        f = float(pub["target_fraction_of_ideal"])
        if row.duplex:
            worst = min(best.fwd, best.rev) / ideal
            out.append((worst >= f, f"each way {worst:.0%} of ideal (≥{f:.0%})"))
        else:
            out.append((g / ideal >= f, f"{g / ideal:.0%} of ideal (≥{f:.0%})"))
    if "target_mbps" in pub:
        t = float(pub["target_mbps"])
        out.append((g >= t, f"{g:.1f} (≥{t:g})"))
    if pub.get("target_at_least_seed_tcp") and seed_value(row, "seed_tcp") is not None:
        tcp = seed_value(row, "seed_tcp")
        # compare fractions of each protocol's own ceiling (header overhead)
        eq = tcp * ratio / TCP_RATIO
        out.append((g >= eq, f"≥ seed TCP {tcp:.1f} (= {eq:.1f} at braid's overhead)"))
    if pub.get("target_at_least_linux"):
        lin = [pub[k] for k in ("linux_cubic", "linux_bbr") if k in pub]
        if lin:
            eq = max(lin) * ratio / TCP_RATIO
            out.append((g >= eq, f"≥ Linux {max(lin):.1f} (= {eq:.1f} at braid's overhead)"))
    if "target_spurious_max" in pub:
        t = pub["target_spurious_max"]
        out.append((best.spurious_max <= t, f"spurious {best.spurious_max} (≤{t})"))
    if "target_spurious_fraction_max" in pub:
        t = float(pub["target_spurious_fraction_max"])
        frac = best.spurious / best.segments if best.segments else 0.0
        out.append((frac < t, f"spurious {frac:.2%} of segments (<{t:.0%})"))
    if pub.get("target_complete"):
        out.append((best.complete, "completes" if best.complete else "incomplete"))
    if "target_fraction_of_alone" in pub and "alone_row" in pub:
        t = float(pub["target_fraction_of_alone"])
        alone = lookup(pub["alone_row"], best.cc)
        if alone is None or alone.goodput is None:
            out.append((None, f"alone row {pub['alone_row']} not run"))
        elif not alone.complete:
            out.append((None, f"alone row {pub['alone_row']} incomplete with {best.cc}"))
        else:
            worst = min(best.fwd, best.rev) / alone.goodput
            out.append((worst >= t, f"each way {worst:.0%} of alone {alone.goodput:.1f} (≥{t:.0%})"))
    if "target_queue_max_packets" in pub:
        q = queue_estimate(row, best)
        t = pub["target_queue_max_packets"]
        if q is None:
            out.append((None, "queue unknown"))
        else:
            out.append((q <= t, f"queue ≈{q:.0f} pkts from RTT (≤{t})"))
    if "target_converge_within_s" in pub:
        t = float(pub["target_converge_within_s"])
        times = [convergence_time(row, r) for r in best.good]
        if any(x is None for x in times):
            out.append((False, "window shares never settle in the band"))
        else:
            worst = max(times)
            out.append((worst <= t, f"shares converge in {worst:.2f} s (≤{t:g})"))
    if "target_jain" in pub:
        t = float(pub.get("target_jain_within_s", 0.1))
        times = [jain_time(row, r) for r in best.good]
        if any(x is None for x in times):
            out.append((False, f"Jain ≥{pub['target_jain']} never sustained"))
        else:
            worst = max(times)
            out.append((worst <= t, f"Jain ≥{pub['target_jain']} after {worst * 1e3:.0f} ms (≤{t * 1e3:.0f})"))
    if pub.get("missing_feature"):
        out.append((None, f"needs {pub['missing_feature']} (format lacks it)"))
    return out


def print_suite(name, rows, ccs, results, lookup):
    print(f"\n## {name}\n")
    other = sorted({r.mtu for r in rows if not r.pps} - {DEFAULT_MTU})
    for m in other:
        size = max(r.bytes for r in rows if r.mtu == m) or 50_000_000
        print(f"braid header overhead at mtu {m}: {m} B / {wire_bytes(m, size):.0f} B on the wire "
              f"= {payload_ratio(m, size):.2%}.")
    if any(r.pps for r in rows):
        print("pps rows: links count packets of any size, so header overhead costs nothing "
              "there; ideal = pps × mtu × 8 × (1 − loss).")
    if other or any(r.pps for r in rows):
        print()
    cols = list(ccs)
    for r in rows:
        rc = r.pub.get("report_cc")
        if rc and rc not in cols:
            cols.append(rc)
    head = (["row", "parameters", "seed TCP", "seed system", "Linux best"] + cols
            + ["best", "ideal", "best/ideal", "spur/decr (best)", "target"])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    notes = []
    for row in rows:
        pub = row.pub
        res = {cc: results.get((row.path, cc)) for cc in cols}
        cells = []
        for cc in cols:
            r = res[cc]
            cells.append("—" if r is None else r.cell())
            if r is not None:
                for e in r.errors:
                    notes.append(f"{row.name} / {cc}: error: {e}")
                for e in r.flow_errors:
                    notes.append(f"{row.name} / {cc}: flow error: {e}")
        best = best_of([r for r in res.values() if r is not None])
        ideal = row.ideal_mbps()
        seed_tcp = seed_value(row, "seed_tcp")
        seed_sys = seed_value(row, "seed_system")
        if pub.get("seed_system_note") and seed_sys is not None:
            notes.append(f"{row.name}: seed system: {pub['seed_system_note']}")
        lin = [pub[k] for k in ("linux_cubic", "linux_bbr") if k in pub]
        lin_s = "—" if not lin else (f"{max(lin):.1f} ("
                                     + ("cubic" if pub.get("linux_cubic", -1) >= pub.get("linux_bbr", -1) else "bbr")
                                     + ")")
        if best is None:
            best_s, frac_s, sd = "—", "—", "—"
        else:
            g = best.goodput
            best_s = (f"{fmt(best.fwd) + '⇄' + fmt(best.rev) if row.duplex else fmt(g)}"
                      f"{'' if best.complete else INCOMPLETE} {best.cc}")
            if row.duplex and ideal:
                frac_s = f"{min(best.fwd, best.rev) / ideal:.0%} each way"
            else:
                frac_s = f"{g / ideal:.0%}" if ideal else "—"
            sd = f"{best.spurious:.0f}/{best.decreases:.0f}"
            if "seed_spurious" in pub or "seed_window_decreases" in pub:
                sd += f" (seed {pub.get('seed_spurious', '—')}/{pub.get('seed_window_decreases', '—')})"
        tg = check_targets(row, best, lookup)
        if not tg:
            t_s = ""
        else:
            met = [m for m, _ in tg if m is not None]
            mark = "✓" if met and all(met) else "✗" if met else "?"
            t_s = mark + " " + "; ".join(("" if m is None else "✓" if m else "✗") + txt for m, txt in tg)
        print("| " + " | ".join([row.name, row.params(), fmt(seed_tcp), fmt(seed_sys), lin_s]
                                + cells + [best_s, fmt(ideal), frac_s, sd, t_s]) + " |")
        # multi-flow and multipath details
        for cc in cols:
            r = res[cc]
            if r is None or r.goodput is None:
                continue
            if row.multi_flow:
                pf = ", ".join(f"flow {i}: {g:.1f}" for i, g in enumerate(r.per_flow))
                extra = ""
                if "target_jain" in pub:
                    js = [jain_time(row, x) for x in r.good]
                    extra = "; Jain ≥{} reached {} after the second start".format(
                        pub["target_jain"],
                        "never (sustained)" if any(j is None for j in js)
                        else f"{max(js) * 1e3:.0f} ms")
                notes.append(f"{row.name} / {cc}: {pf} Mbit/s; Jain's index of whole-run goodputs {r.jain:.4f}{extra}")
            if "target_converge_within_s" in pub:
                ts = [convergence_time(row, x) for x in r.good]
                paths = r.good[0]["flows"][0]["paths"]
                pp = ", ".join(f"path {p['path']}: {p['goodput_mbps']:.2f} Mbit/s, "
                               f"final window {p['final_window']:.0f}" for p in paths)
                conv = ("never settle" if any(t is None for t in ts)
                        else f"settle {max(ts):.2f} s after {pub.get('converge_from_s', 0):g} s")
                notes.append(f"{row.name} / {cc}: window shares {conv}; {pp}")
            if "target_queue_max_packets" in pub:
                q = queue_estimate(row, r)
                if q is not None:
                    notes.append(f"{row.name} / {cc}: standing queue ≈{q:.1f} packets "
                                 "((mean RTT − min RTT) × rate)")
    if notes:
        print()
        for n in notes:
            print(f"- {n}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suites", nargs="*", help="suite directories under scenarios/ (default: all with [published])")
    ap.add_argument("--cc", default="aimd,cubic,bbr,mbecn,ncp",
                    help="comma-separated controllers (default: %(default)s)")
    ap.add_argument("--seeds", type=int, default=1, help="seeds 1..N per run (default 1)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="simulator runs at once (default: CPUs)")
    ap.add_argument("--series-dir", help="also write each run's JSON with --series here")
    ap.add_argument("--braid", default=os.path.join(ROOT, "target", "release", "braid"))
    args = ap.parse_args()

    if not os.access(args.braid, os.X_OK):
        raise SystemExit(f"suite-report: {args.braid} not found: run `cargo build --release` first")
    t0 = time.monotonic()
    suites = args.suites or discover_suites()
    loaded = [suite_rows(s) for s in suites]
    wanted = [c.strip() for c in args.cc.split(",") if c.strip()]
    fixed = {r.pub["report_cc"] for _, rows in loaded for r in rows if r.pub.get("report_cc")}
    accepted, rejected = probe_controllers(args.braid, list(dict.fromkeys(wanted + sorted(fixed))))
    ccs = [c for c in wanted if c in accepted]

    jobs = []
    for _, rows in loaded:
        for row in rows:
            rc = row.pub.get("report_cc")
            for cc in ([rc] if rc else ccs):
                if cc in accepted:
                    for seed in range(1, args.seeds + 1):
                        jobs.append((row, cc, seed))
    raw = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futs = {pool.submit(run_braid, args.braid, row.path, cc, seed,
                            row.needs_series or bool(args.series_dir)): (row, cc, seed)
                for row, cc, seed in jobs}
        for fut in concurrent.futures.as_completed(futs):
            row, cc, seed = futs[fut]
            out = fut.result()
            raw.setdefault((row.path, cc), []).append((seed, out))
            if args.series_dir:
                os.makedirs(args.series_dir, exist_ok=True)
                fn = f"{row.suite}--{row.name}--{cc}--seed{seed}.json"
                with open(os.path.join(args.series_dir, fn), "w") as f:
                    json.dump(out, f)
    by_row = {r.path: r for _, rows in loaded for r in rows}
    results = {}
    for (path, cc), runs in raw.items():
        runs = [o for _, o in sorted(runs, key=lambda x: x[0])]
        results[(path, cc)] = Result(by_row[path], cc, runs)

    def lookup(suite_dir_row, name, cc):
        return results.get((os.path.join(os.path.dirname(suite_dir_row.path), name + ".toml"), cc))

    shown = os.path.relpath(args.braid, ROOT)
    if shown.startswith(".."):
        shown = args.braid
    wb = wire_bytes(DEFAULT_MTU, 50_000_000)
    print("# braid benchmark suites (issue 3)\n")
    print(f"binary: {shown}; controllers: {', '.join(ccs) or 'none'}; seeds 1..{args.seeds}")
    for cc, msg in rejected.items():
        print(f"- controller `{cc}` skipped: {msg}")
    print(f"""
- Goodput in Mbit/s (application bytes), mean over seeds. {INCOMPLETE} = a run did not complete
  or verify; ERR = the run failed; A⇄B = forward⇄reverse goodput (full duplex); rows with
  several flows show the aggregate (all bytes over first start to last end).
- Seed figures are converted to Mbit/s from the row's `unit`; Linux best = max of the issue's
  Linux cubic/bbr. best = the highest goodput among controllers whose runs completed.
- ideal = capacity × (1 − forward loss), before header overhead. The simulator drops random
  loss at link entry, before the rate limit (like netem), so lost packets cost no capacity
  and a loss row's goodput can exceed its ideal.
- braid header overhead at mtu {DEFAULT_MTU}: {DEFAULT_MTU} B payload / {wb:.0f} B on the wire
  ({BRAID_HEADER}-byte header + {stream_overhead(50_000_000, DEFAULT_MTU):.0f}-byte STREAM frame + {IP_UDP} IP/UDP)
  = {DEFAULT_MTU / wb:.2%}, vs TCP 1448/1500 = {TCP_RATIO:.2%}: braid's ceiling on a 50 Mbit/s
  link is {50 * DEFAULT_MTU / wb:.2f} Mbit/s, TCP's {50 * TCP_RATIO:.2f}. "≥ seed TCP" and "≥ Linux" targets
  compare at equal overhead: the TCP figure × {DEFAULT_MTU / wb:.4f} / {TCP_RATIO:.4f}.
- spur/decr = spurious retransmissions / window decreases of the best controller (all flows
  and directions); target: ✓ when every target of the row is met, ✗ otherwise, each listed.""")
    for name, rows in loaded:
        print_suite(name, rows, ccs, results,
                    lambda n, cc, _rows=rows: lookup(_rows[0], n, cc))
    wall = time.monotonic() - t0
    sim_wall = sum(r.wall for r in results.values() if r.goodput is not None)
    print(f"\n{len(jobs)} runs, {wall:.1f} s wall with {args.jobs} job(s) "
          f"({sim_wall:.1f} s of simulator wall time summed over runs).")


if __name__ == "__main__":
    main()
