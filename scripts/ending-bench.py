#!/usr/bin/env python3
"""How transfers end through a lossy relay, repeated.

Runs RUNS transfers of SIZE bytes from `braid send` through one
`braid relay --loss LOSS` to `braid recv` on loopback, sealed with a pinned
key, and prints how many ended with the two sides disagreeing (one says
verified, the other failed, or a kept file on a side that reports failure),
the exit statuses, and the time from the receiver's outcome (its last byte
verified, printed at once) to both processes' exits.

    cargo build --release
    scripts/ending-bench.py --runs 200 --loss 5%
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def free_udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Watched:
    """A child process whose first stdout line and exit are timestamped."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.line = None
        self.line_at = None
        self.exit_at = None
        self.err = ""
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self):
        for line in self.proc.stdout:
            if self.line is None and line.strip():
                self.line, self.line_at = line, time.monotonic()
        self.err = self.proc.stderr.read()
        self.proc.wait()
        self.exit_at = time.monotonic()

    def wait(self, limit):
        self.thread.join(limit)
        if self.thread.is_alive():
            self.proc.kill()
            self.thread.join()
            return None
        return self.proc.returncode

    def json(self):
        try:
            return json.loads(self.line)
        except (TypeError, ValueError, KeyError, IndexError):
            return None


def percentile(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--loss", default="5%")
    ap.add_argument("--size", type=int, default=2_000_000)
    ap.add_argument("--braid", default="target/release/braid")
    ap.add_argument("--limit", type=float, default=60.0, help="seconds a run may take")
    a = ap.parse_args()
    braid = a.braid
    work = tempfile.mkdtemp(prefix="braid-ending-")
    data = os.urandom(a.size)
    src = os.path.join(work, "in.bin")
    with open(src, "wb") as f:
        f.write(data)
    key = os.path.join(work, "recv.key")
    subprocess.run([braid, "keygen", "-o", key], check=True, capture_output=True)
    peer = open(key + ".pub").read().strip()
    recv_port, relay_port = free_udp_port(), free_udp_port()
    relay = subprocess.Popen(
        [braid, "relay", "--listen", f"127.0.0.1:{relay_port}", "--to", f"127.0.0.1:{recv_port}", "--loss", a.loss],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    outcomes = {}
    disagreements = []
    to_both_exits = []
    try:
        for i in range(a.runs):
            out = os.path.join(work, f"out-{i}.bin")
            recv = Watched([braid, "recv", "--listen", f"127.0.0.1:{recv_port}", "--key", key,
                            "--output", out, "--json", "--quiet"])
            time.sleep(0.15)
            send = Watched([braid, "send", src, "--to", f"127.0.0.1:{relay_port}", "--peer", peer,
                            "--json", "--quiet"])
            s_code, r_code = send.wait(a.limit), recv.wait(a.limit)
            s, r = send.json(), recv.json()
            s_ok = s_code == 0 and s is not None and s.get("outcome") == "verified"
            r_ok = r_code == 0 and r is not None and r.get("outcome") == "verified"
            kept = os.path.exists(out) and open(out, "rb").read() == data
            key_ = f"send {'ok' if s_ok else 'failed'} ({s_code}), recv {'ok' if r_ok else 'failed'} ({r_code})"
            outcomes[key_] = outcomes.get(key_, 0) + 1
            if s_ok != r_ok or kept != r_ok:
                disagreements.append((i, key_, (s or {}).get("error"), (r or {}).get("error"), kept))
            if r_ok and recv.line_at and send.exit_at and recv.exit_at:
                to_both_exits.append(max(send.exit_at, recv.exit_at) - recv.line_at)
            if os.path.exists(out):
                os.remove(out)
            sys.stderr.write(f"\rrun {i + 1}/{a.runs}: {len(disagreements)} disagreements")
            sys.stderr.flush()
    finally:
        relay.terminate()
        relay.wait()
    sys.stderr.write("\n")
    print(f"{a.runs} transfers of {a.size} bytes through braid relay --loss {a.loss} (loopback, sealed)")
    for k, n in sorted(outcomes.items(), key=lambda kv: -kv[1]):
        print(f"  {n:4d}  {k}")
    print(f"disagreements: {len(disagreements)}")
    for d in disagreements[:10]:
        print(f"  run {d[0]}: {d[1]}; sender: {d[2]}; receiver: {d[3]}; file kept: {d[4]}")
    if to_both_exits:
        print("from the receiver's outcome to both exits: median %.2f s, p99 %.2f s, max %.2f s" % (
            statistics.median(to_both_exits), percentile(to_both_exits, 99), max(to_both_exits)))
    return 0 if not disagreements else 1


if __name__ == "__main__":
    sys.exit(main())
