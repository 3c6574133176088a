#!/bin/bash
# Several senders at once into one `braid recv --keep`: the receiver's CPU
# per GB and how many cores it keeps busy, one sender against N. Sealed (a
# key pair), BLAKE3 on both ends, files on /dev/shm so no disk is timed.
#
#   bench/loopback/keep.sh [--mib 256] [--rounds 3] [--senders 4] [--mtu 1500] BRAID
#
# Round r runs one sender, then N (the order swapped on odd rounds). The
# receiver's CPU is read from /proc before the first sender starts and
# after the last ends; "cores" is that CPU time over the same wall time.
# --mtu N runs in a network namespace whose loopback has MTU N (root).
set -eu

MIB=256
ROUNDS=3
SENDERS=4
MTU=
ARGS=("$@")
. "$(dirname "$0")/common.sh"
read_options "mib rounds senders mtu" "$@"
set -- "${ARGV[@]}"
BRAID=${1:?usage: keep.sh [--mib N] [--rounds R] [--senders N] [--mtu N] BRAID}
if [ -n "$MTU" ] && [ -z "${BRAID_KEEP_BENCH_NS:-}" ]; then
    exec "$(dirname "$0")/in-mtu.sh" "$MTU" -- env BRAID_KEEP_BENCH_NS=1 "$0" "${ARGS[@]}"
fi

DIR=$(mktemp -d /dev/shm/braid-keep-bench.XXXXXX)
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$DIR"' EXIT
BYTES=$((MIB << 20))
head -c "$BYTES" /dev/urandom > "$DIR/src"
for ((i = 1; i <= SENDERS; i++)); do ln "$DIR/src" "$DIR/src$i"; done
"$BRAID" keygen -o "$DIR/key" > /dev/null 2>&1
TICK=$(getconf CLK_TCK)

# CPU seconds (user + system) of a process and its threads so far.
cpu_of() { awk -v t="$TICK" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$1/stat"; }

# One run with N senders: prints "N MBIT_S RECV_CPU_S_PER_GB RECV_CORES".
run() {
    local n=$1 port=$((20000 + RANDOM % 20000))
    mkdir -p "$DIR/out"
    "$BRAID" recv --keep --key "$DIR/key" --listen "127.0.0.1:$port" -q -o "$DIR/out/" \
        > /dev/null 2>&1 &
    local recv=$!
    sleep 0.3
    local c0 t0 pids=()
    c0=$(cpu_of $recv)
    t0=$(date +%s.%N)
    for ((i = 1; i <= n; i++)); do
        "$BRAID" send --peer "$DIR/key.pub" --to "127.0.0.1:$port" -q "$DIR/src$i" \
            > /dev/null 2>&1 &
        pids+=($!)
    done
    wait "${pids[@]}"
    local c1 t1
    c1=$(cpu_of $recv)
    t1=$(date +%s.%N)
    kill -INT $recv
    wait $recv || true
    rm -rf "$DIR/out"
    awk -v n="$n" -v b="$BYTES" -v c="$(echo "$c1 - $c0" | bc)" -v w="$(echo "$t1 - $t0" | bc)" \
        'BEGIN { g = n * b / 1e9; printf "%d %.0f %.2f %.2f\n", n, g * 8e3 / w, c / g, c / w }'
}

echo "$MIB MiB per sender, $ROUNDS rounds, 1 and $SENDERS senders, $(nproc) cores, loopback MTU $(cat /sys/class/net/lo/mtu)"
echo "senders Mbit/s receiver-CPU-s/GB receiver-cores"
: > "$DIR/runs"
for ((r = 0; r < ROUNDS; r++)); do
    if ((r % 2)); then order=("$SENDERS" 1); else order=(1 "$SENDERS"); fi
    for n in "${order[@]}"; do
        line=$(run "$n")
        echo "round $r $line"
        echo "$line" >> "$DIR/runs"
    done
done
echo
echo "| senders | goodput Mbit/s (all) | receiver CPU s/GB | receiver cores busy |"
echo "|---|---|---|---|"
python3 -c '
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for n in dict.fromkeys(r[0] for r in rows):
    mine = [r for r in rows if r[0] == n]
    med[n] = [statistics.median(float(r[i]) for r in mine) for i in (1, 2, 3)]
    print("| %s | %.0f | %.2f | %.2f |" % (n, *med[n]))
ns = list(med)
if len(ns) == 2:
    print()
    print("receiver CPU per GB, %s senders / 1: %.2fx" % (ns[-1], med[ns[-1]][1] / med["1"][1]))
' "$DIR/runs"
