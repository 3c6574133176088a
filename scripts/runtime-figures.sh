#!/usr/bin/env bash
# Real-transfer figures on this machine, with the real CLI on loopback:
# one relay at 50 Mbit/s with 20 ms one-way delay and 1 % loss (each way),
# one relay at 50 Mbit/s with 200 ms RTT, plain loopback (goodput and CPU
# seconds per GB), and the demo. Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
B=target/release/braid
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
head -c 100000000 /dev/urandom > "$work/100MB.bin"
# Sealed, as users run it: the receiver's key, pinned by the sender.
$B keygen -o "$work/recv.key" >/dev/null 2>&1
peer=$(cat "$work/recv.key.pub")

port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# transfer LABEL CAPACITY_MBIT [RELAY FLAGS...]: one file through one relay (or none).
transfer() {
    local label=$1 capacity=$2; shift 2
    local rport; rport=$(port)
    local to=127.0.0.1:$rport
    /usr/bin/time -f "%U %S" -o "$work/recv.cpu" \
        $B recv --listen "127.0.0.1:$rport" --output "$work/out.bin" --overwrite --key "$work/recv.key" --quiet 2>"$work/recv.log" &
    local recv=$!
    if [ $# -gt 0 ]; then
        local lport; lport=$(port)
        $B relay --listen "127.0.0.1:$lport" --to "127.0.0.1:$rport" "$@" >/dev/null 2>&1 &
        local relay=$!
        to=127.0.0.1:$lport
    fi
    sleep 0.3
    /usr/bin/time -f "%U %S" -o "$work/send.cpu" \
        $B send "$work/100MB.bin" --to "$to" --peer "$peer" --json > "$work/send.json"
    wait $recv
    [ -n "${relay:-}" ] && kill -INT $relay && wait $relay 2>/dev/null || true
    cmp -s "$work/100MB.bin" "$work/out.bin" || { echo "$label: FILES DIFFER"; exit 1; }
    python3 - "$label" "$capacity" "$work/send.json" "$work/send.cpu" "$work/recv.cpu" <<'PY'
import json, sys
label, capacity, path, scpu, rcpu = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
f = json.load(open(path))["flows"][0]
cpu = lambda p: sum(map(float, open(p).read().split()[-2:]))
gb = f["delivered"] / 1e9
line = f"{label}: {f['goodput_mbps']:.1f} Mbit/s goodput in {f['duration_s']:.2f} s, verified={f['verified']}, retransmitted {f['retransmitted']}"
if capacity > 0:
    line += f", {100 * f['goodput_mbps'] / capacity:.1f} % of {capacity:g} Mbit/s"
line += f"; CPU per GB: sender {cpu(scpu) / gb:.2f} s, receiver {cpu(rcpu) / gb:.2f} s"
print(line)
PY
}

transfer "relay 50 Mbit/s, 20 ms one-way, 1 % loss" 49.5 --rate 50mbit --delay 20ms --loss 1%
transfer "relay 50 Mbit/s, 200 ms RTT, no loss" 50 --rate 50mbit --delay 100ms
transfer "plain loopback, one path" 0
$B demo --quiet 2>/dev/null
