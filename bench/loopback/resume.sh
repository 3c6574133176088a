#!/bin/bash
# What resuming saves: one file through a rate-limited link emulator
# (`braid emulate --listen --to --rate`) into `braid recv --keep`, sent whole,
# then cut (the sender killed) about half way and sent again. Prints, per
# round, the whole transfer's time, the second send's time and how many
# bytes it found already there. Files on /dev/shm, so no disk is timed;
# sealed with a key pair as a user would.
#
#   bench/loopback/resume.sh [--mib 60] [--rate 100mbit] [--rounds 3] BRAID
#
# The receiver keeps what the cut transfer brought once it notices the
# sender is gone (a few seconds of silence); that wait is not counted.
set -eu

MIB=60
RATE=100mbit
ROUNDS=3
. "$(dirname "$0")/common.sh"
read_options "mib rate rounds" "$@"
set -- "${ARGV[@]}"
[ $# -eq 1 ] || { echo "usage: resume.sh [--mib N] [--rate R] [--rounds N] BRAID" >&2; exit 2; }
B=$(realpath "$1")

enter_scratch resume
head -c $((MIB << 20)) /dev/urandom > src.bin
mkdir out
(cd "$W" && "$B" keygen > /dev/null 2>&1)
"$B" recv --listen 127.0.0.1:0 --key braid.key --quiet --keep --json -o out/ \
    > records.json 2> recv.err &
PIDS+=($!)
for _ in $(seq 50); do grep -q 'listening on' recv.err && break; sleep 0.1; done
PORT=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' recv.err | head -1)
"$B" emulate --listen 127.0.0.1:0 --to "127.0.0.1:$PORT" --rate "$RATE" > relay.out 2> /dev/null &
PIDS+=($!)
for _ in $(seq 50); do [ -s relay.out ] && break; sleep 0.1; done
VIA=$(sed -n 's/^emulating \([0-9.:]*\) .*/\1/p' relay.out)
SEND=("$B" send src.bin --to "$VIA" --peer braid.key.pub --quiet)

now() { date +%s.%N; }
records() { wc -l < records.json; }
for round in $(seq "$ROUNDS"); do
    rm -f out/src.bin
    s=$(now); "${SEND[@]}" > /dev/null 2>&1; e=$(now)
    whole=$(echo "$e - $s" | bc)
    rm -f out/src.bin
    n=$(records)
    "${SEND[@]}" > /dev/null 2>&1 &
    sp=$!
    sleep "$(echo "$whole / 2" | bc -l)"
    kill -9 $sp; wait $sp 2> /dev/null || true
    for _ in $(seq 300); do [ "$(records)" -gt "$n" ] && break; sleep 0.1; done
    s=$(now); "${SEND[@]}" --json > send.json 2> /dev/null; e=$(now)
    again=$(echo "$e - $s" | bc)
    resumed=$(python3 -c "import json; print(json.load(open('send.json'))['resumed_bytes'])")
    cmp -s out/src.bin src.bin && same=identical || same=DIFFERENT
    printf 'round %d: whole %.2f s; cut half way, sent again %.2f s (%.0f %% of whole), %s bytes already there; %s\n' \
        "$round" "$whole" "$again" "$(echo "100 * $again / $whole" | bc -l)" "$resumed" "$same"
done
