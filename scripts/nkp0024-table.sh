#!/usr/bin/env bash
# Prints the NKP-0024 speed table (seed 000) beside braid's simulated figures.
# Usage: scripts/nkp0024-table.sh   (builds the release binary first)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
braid=target/release/braid
echo "| row | published prev (MB/s) | published current (MB/s) | ideal (MiB/s) | braid ncp (MiB/s) | braid aimd (MiB/s) | ncp / ideal | aimd / ideal |"
echo "|---|---|---|---|---|---|---|---|"
for f in scenarios/nkp0024/[1-7]-*.toml; do
  ncp=$($braid sim "$f" --cc ncp --json || true)
  aimd=$($braid sim "$f" --cc aimd --json || true)
  python3 - "$f" "$ncp" "$aimd" <<'PY'
import json, sys, tomllib
path, ncp, aimd = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
sc = tomllib.load(open(path, "rb"))
mtu = sc["flow"][0].get("mtu", 1380)
ideal = 0.0
for p in sc["path"]:
    pps = float(p["rate"].removesuffix("pps"))
    ideal += pps * mtu * (1 - p.get("loss", 0.0)) / 2**20
def rate(r):
    f = r["flows"][0]
    return f["delivered"] / f["duration_s"] / 2**20 if f["completed"] else float("nan")
pub = sc["published"]
n, a = rate(ncp), rate(aimd)
print(f"| {sc['name'].split('/')[1]} | {pub['prev']} | {pub['current']} | {ideal:.3f} | {n:.3f} | {a:.3f} | {n/ideal:.0%} | {a/ideal:.0%} |")
PY
done
