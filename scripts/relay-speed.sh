#!/usr/bin/env bash
# Direct vs through one unimpaired `braid relay` on loopback:
# ROUNDS alternating pairs of 300 MB transfers, --insecure, to /dev/null;
# prints each run, then the medians, their ratio and the relay's CPU per GB.
#   cargo build --release && scripts/relay-speed.sh 5
set -euo pipefail
rounds=${1:-5}
B=${BRAID:-target/release/braid}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -c 300000000 /dev/urandom > "$work/in.bin"
port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
for _ in $(seq 1 "$rounds"); do
  for mode in direct relay; do
    rp=$(port); to=$rp
    $B recv --listen "127.0.0.1:$rp" --output - --insecure --quiet >/dev/null 2>&1 & r=$!
    if [ "$mode" = relay ]; then
      lp=$(port); to=$lp
      /usr/bin/time -f "%U %S" -o "$work/relay.cpu" $B relay --listen "127.0.0.1:$lp" --to "127.0.0.1:$rp" >/dev/null 2>&1 & rl=$!
    fi
    sleep 0.3
    mbps=$($B send "$work/in.bin" --to "127.0.0.1:$to" --insecure --json 2>/dev/null \
      | python3 -c "import json,sys; print(round(json.load(sys.stdin)['flows'][0]['goodput_mbps']))")
    wait $r
    if [ "$mode" = relay ]; then
      # The relay runs under time(1), which ignores SIGINT itself.
      pkill -INT -f "relay --listen 127.0.0.1:$lp"; wait $rl 2>/dev/null || true
      cpu=$(awk '{print ($1+$2)/0.3}' "$work/relay.cpu")
      echo "relay $mbps $cpu" | tee -a "$work/runs"
    else
      echo "direct $mbps" | tee -a "$work/runs"
    fi
  done
done
python3 - "$work/runs" <<'PY'
import statistics, sys
runs = [l.split() for l in open(sys.argv[1])]
d = statistics.median(float(r[1]) for r in runs if r[0] == "direct")
r = statistics.median(float(r[1]) for r in runs if r[0] == "relay")
c = statistics.median(float(r[2]) for r in runs if r[0] == "relay")
print(f"median direct {d:.0f} Mbit/s, relay {r:.0f} Mbit/s = {r / d:.2f}x; relay CPU {c:.2f} s/GB")
PY
