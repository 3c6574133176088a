#!/usr/bin/env bash
# What sealing costs end to end: `braid send` to `braid recv` on loopback,
# a file in and a file out with BLAKE3 verification, sealed (pinned key)
# and --insecure alternating for ROUNDS rounds; prints each run, then the
# medians and the sealed/insecure ratios (goodput, CPU seconds per GB).
# Usage: scripts/seal-cost.sh [MB] [ROUNDS]. Run from anywhere.
# SINK=null: the receiver writes to /dev/null (still BLAKE3-verified), to
# compare with the library's memory-to-memory figure without the disk.
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-500}
rounds=${2:-5}
cargo build --release -q -p braid-cli
B=target/release/braid
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
head -c "${mb}000000" /dev/urandom > "$work/in.bin"
$B keygen -o "$work/recv.key" >/dev/null 2>&1
peer=$(cat "$work/recv.key.pub")
port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run MODE: one transfer; appends "MODE GOODPUT SEND_CPU RECV_CPU" to runs.
run() {
    local mode=$1 p; p=$(port)
    local recv_auth=(--key "$work/recv.key") send_auth=(--peer "$peer")
    if [ "$mode" = insecure ]; then recv_auth=(--insecure); send_auth=(--insecure); fi
    local out=(--output "$work/out.bin" --overwrite)
    if [ "${SINK:-file}" = null ]; then out=(--output -); fi
    /usr/bin/time -f "%U %S" -o "$work/recv.cpu" \
        $B recv --listen "127.0.0.1:$p" "${out[@]}" "${recv_auth[@]}" --quiet 2>/dev/null >/dev/null &
    local recv=$!
    sleep 0.3
    /usr/bin/time -f "%U %S" -o "$work/send.cpu" \
        $B send "$work/in.bin" --to "127.0.0.1:$p" "${send_auth[@]}" --json 2>/dev/null > "$work/send.json"
    wait $recv
    if [ "${SINK:-file}" != null ]; then
        cmp -s "$work/in.bin" "$work/out.bin" || { echo "$mode: FILES DIFFER"; exit 1; }
    fi
    python3 - "$mode" "$work" >> "$work/runs" <<'PY'
import json, sys
mode, work = sys.argv[1], sys.argv[2]
f = json.load(open(f"{work}/send.json"))["flows"][0]
cpu = lambda p: sum(map(float, open(p).read().split()[-2:]))
gb = f["delivered"] / 1e9
print(mode, f["goodput_mbps"], cpu(f"{work}/send.cpu") / gb, cpu(f"{work}/recv.cpu") / gb)
PY
    tail -n 1 "$work/runs" | awk '{printf "%-9s %7.0f Mbit/s  CPU s/GB sender %.2f receiver %.2f\n", $1, $2, $3, $4}'
}

echo "$mb MB per run, $rounds rounds, sealed and --insecure alternating"
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) -eq 1 ]; then run sealed; run insecure; else run insecure; run sealed; fi
done
python3 - "$work/runs" <<'PY'
import statistics, sys
runs = [l.split() for l in open(sys.argv[1])]
med = lambda mode, i: statistics.median(float(r[i]) for r in runs if r[0] == mode)
s, n = [med("sealed", i) for i in (1, 2, 3)], [med("insecure", i) for i in (1, 2, 3)]
print()
print("| mode | goodput (median) | CPU s/GB sender | CPU s/GB receiver |")
print("|---|---|---|---|")
print(f"| sealed | {s[0]:.0f} Mbit/s | {s[1]:.2f} | {s[2]:.2f} |")
print(f"| --insecure | {n[0]:.0f} Mbit/s | {n[1]:.2f} | {n[2]:.2f} |")
print(f"| sealed / insecure | {s[0] / n[0]:.2f}x | {s[1] / n[1]:.2f}x | {s[2] / n[2]:.2f}x |")
PY
