#!/bin/bash
# The braid CLI on loopback, next to quinn's perf tool: `braid send FILE`
# to `braid recv` file to file, to `braid recv -o -` (stdout, discarded),
# and the same through one unimpaired `braid emulate --listen --to`. Sealed
# (a key pair), BLAKE3 on both ends, files on /dev/shm so no disk is timed.
#
#   bench/loopback/cli.sh [--mib 512] [--rounds 3] [--mtu 1500] BRAID [LOOPBACK_BENCH]
#
# --mtu N runs everything in a network namespace of its own whose loopback
# has MTU N (in-mtu.sh; root), as on a path with that MTU: without it,
# braid finds 16 KiB datagrams on the host's loopback (MTU 65536).
#
# BRAID is the braid binary (target/release/braid). With LOOPBACK_BENCH
# (this crate's binary) and QUINN_PERF set, each round also runs the
# quinn-perf kind. Round r runs the kinds rotated by r. Goodput is the file
# size over the sender's wall time (process start to exit); CPU is user +
# system of each process (GNU time), per 10^9 bytes.
set -eu

MIB=512
ROUNDS=3
MTU=
ARGS=("$@")
. "$(dirname "$0")/common.sh"
read_options "mib rounds mtu" "$@"
set -- "${ARGV[@]}"
BRAID=${1:?usage: cli.sh [--mib N] [--rounds R] [--mtu N] BRAID [LOOPBACK_BENCH]}
if [ -n "$MTU" ] && [ -z "${BRAID_CLI_BENCH_NS:-}" ]; then
    # Once more, inside the namespace (removed when this ends).
    exec "$(dirname "$0")/in-mtu.sh" "$MTU" -- env BRAID_CLI_BENCH_NS=1 "$0" "${ARGS[@]}"
fi
BENCH=${2:-}
[ -x /usr/bin/time ] || { echo "needs GNU time (/usr/bin/time)" >&2; exit 2; }

DIR=$(mktemp -d /dev/shm/braid-cli-bench.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
BYTES=$((MIB << 20))
head -c "$BYTES" /dev/urandom > "$DIR/src"
"$BRAID" keygen -o "$DIR/key" > /dev/null 2>&1

# One run: prints "KIND MBIT_S SEND_CPU RECV_CPU RELAY_CPU" (CPU in s/GB).
run() {
    local kind=$1 port=$((20000 + RANDOM % 20000)) out="-o -" to relay_pid=""
    [ "$kind" = file ] && { rm -rf "$DIR/out"; mkdir "$DIR/out"; out="-o $DIR/out/"; }
    /usr/bin/time -f "%e %U %S" -o "$DIR/t.recv" \
        "$BRAID" recv --key "$DIR/key" --listen "127.0.0.1:$port" -q $out > /dev/null 2>&1 &
    local recv_pid=$!
    to=127.0.0.1:$port
    if [ "$kind" = relay ]; then
        /usr/bin/time -f "%e %U %S" -o "$DIR/t.relay" "$BRAID" emulate \
            --listen "127.0.0.1:$((port + 1))" --to "$to" > /dev/null 2>&1 &
        relay_pid=$!
        to=127.0.0.1:$((port + 1))
    fi
    sleep 0.3
    /usr/bin/time -f "%e %U %S" -o "$DIR/t.send" \
        "$BRAID" send --peer "$DIR/key.pub" --to "$to" -q "$DIR/src" > /dev/null 2>&1
    wait "$recv_pid"
    local relay_cpu=-
    if [ -n "$relay_pid" ]; then
        # Ctrl-C to the relay itself (time's child) stops it cleanly.
        pkill -INT -P "$relay_pid" || true
        wait "$relay_pid" || true
        relay_cpu=$(tail -1 "$DIR/t.relay" | awk -v b="$BYTES" '{ printf "%.2f", ($2 + $3) / (b / 1e9) }')
    fi
    # GNU time's last line: a failed command's status comes before it.
    { tail -1 "$DIR/t.send"; tail -1 "$DIR/t.recv"; } | awk -v b="$BYTES" -v k="$kind" -v r="$relay_cpu" '
        NR == 1 { w = $1; s = $2 + $3 }
        NR == 2 { c = $2 + $3 }
        END { printf "%s %.0f %.2f %.2f %s\n", k, b * 8 / w / 1e6, s / (b / 1e9), c / (b / 1e9), r }
    '
    rm -rf "$DIR/out"
}

quinn_perf() {
    "$BENCH" --mib "$MIB" --rounds 1 --only quinn-perf --no-perf --json "$DIR/q.json" > /dev/null
    python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["medians"][0]
print("quinn-perf %.0f %.2f %.2f -" % (m["mbit_s"], m["sender_cpu_s_per_gb"], m["receiver_cpu_s_per_gb"]))
' "$DIR/q.json"
}

KINDS=(file stdout relay)
[ -n "$BENCH" ] && [ -n "${QUINN_PERF:-}" ] && KINDS+=(quinn-perf)
echo "$MIB MiB per run, $ROUNDS rounds, kinds ${KINDS[*]}, loopback MTU $(cat /sys/class/net/lo/mtu)"
echo "kind Mbit/s CPU-s/GB-sender receiver relay"
: > "$DIR/runs"
for ((r = 0; r < ROUNDS; r++)); do
    n=${#KINDS[@]}
    for ((i = 0; i < n; i++)); do
        kind=${KINDS[$(((i + r) % n))]}
        if [ "$kind" = quinn-perf ]; then line=$(quinn_perf); else line=$(run "$kind"); fi
        echo "round $r $line"
        echo "$line" >> "$DIR/runs"
    done
done

echo
echo "| kind | goodput Mbit/s | CPU s/GB sender | CPU s/GB receiver | CPU s/GB relay |"
echo "|---|---|---|---|---|"
python3 -c '
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = lambda v: statistics.median(v) if v else None
out = {}
for kind in dict.fromkeys(r[0] for r in rows):
    mine = [r for r in rows if r[0] == kind]
    col = lambda i: med([float(r[i]) for r in mine if r[i] != "-"])
    out[kind] = [col(i) for i in range(1, 5)]
    cells = ["%.0f" % out[kind][0]] + ["n/a" if v is None else "%.2f" % v for v in out[kind][1:]]
    print("| %s | %s |" % (kind, " | ".join(cells)))
print()
for a, b in [("file", "quinn-perf"), ("stdout", "quinn-perf"), ("relay", "stdout")]:
    if a in out and b in out:
        print("%s / %s: goodput %.2fx" % (a, b, out[a][0] / out[b][0]))
' "$DIR/runs"
