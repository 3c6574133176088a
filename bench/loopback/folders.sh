#!/bin/bash
# A folder of many small files, three ways in turn, several rounds: `braid
# send DIR`, `tar c DIR | braid send -` into `braid recv -o - | tar x`, and
# croc (`croc send DIR` through a local `croc relay`) if given. Prints
# each run's wall time and how many files arrived. Files on /dev/shm, so
# no disk is timed; braid sealed with a key pair as a user would.
#
#   bench/loopback/folders.sh [--files 10000] [--kib 10] [--rounds 3] [--croc PATH] BRAID
#
# Run it inside bench/loopback/in-mtu.sh for Ethernet-sized datagrams.
set -eu

FILES=10000
KIB=10
ROUNDS=3
CROC=
. "$(dirname "$0")/common.sh"
read_options "files kib rounds croc" "$@"
set -- "${ARGV[@]}"
[ -z "$CROC" ] || CROC=$(realpath "$CROC")
[ $# -eq 1 ] || { echo "usage: folders.sh [--files N] [--kib K] [--rounds N] [--croc PATH] BRAID" >&2; exit 2; }
B=$(realpath "$1")

enter_scratch folders
python3 - "$FILES" "$KIB" << 'EOF'
import os, sys
files, kib = int(sys.argv[1]), int(sys.argv[2])
per_dir = 100
for i in range(files):
    d = f"tree/d{i // per_dir:05}"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/f{i % per_dir:03}.bin", "wb") as f:
        f.write(os.urandom(kib * 1024))
EOF
"$B" keygen > /dev/null 2>&1
if [ -n "$CROC" ]; then
    export CROC_CONFIG_DIR=$W/croc HOME=$W/croc
    mkdir -p "$CROC_CONFIG_DIR"
    "$CROC" --pass bench relay --host 127.0.0.1 --ports 9009,9010,9011,9012,9013 > /dev/null 2>&1 &
    PIDS+=($!)
    sleep 1
fi

now() { date +%s.%N; }
count() { find "$1" -type f | wc -l; }
# A receiver on a free port; its address in $ADDR, its pid in $RECV.
receiver() {
    "$B" recv --listen 127.0.0.1:0 --key braid.key --quiet -o "$@" 2> recv.err &
    RECV=$!
    PIDS+=($RECV)
    for _ in $(seq 50); do grep -q 'listening on' recv.err && break; sleep 0.1; done
    ADDR=$(sed -n 's/.*listening on \([0-9.:]*\).*/\1/p' recv.err | head -1)
}
for round in $(seq "$ROUNDS"); do
    rm -rf out; mkdir out
    receiver out/
    s=$(now); "$B" send tree --to "$ADDR" --peer braid.key.pub --quiet 2> /dev/null; wait $RECV; e=$(now)
    printf 'round %d: braid send DIR  %6.2f s, %d files\n' "$round" "$(echo "$e - $s" | bc)" "$(count out)"

    rm -rf out; mkdir out
    "$B" recv --listen 127.0.0.1:0 --key braid.key --quiet -o - 2> recv.err | tar x -C out &
    RECV=$!
    for _ in $(seq 50); do grep -q 'listening on' recv.err && break; sleep 0.1; done
    ADDR=$(sed -n 's/.*listening on \([0-9.:]*\).*/\1/p' recv.err | head -1)
    s=$(now); tar c tree | "$B" send - --to "$ADDR" --peer braid.key.pub --quiet 2> /dev/null; wait $RECV; e=$(now)
    printf 'round %d: tar | braid     %6.2f s, %d files\n' "$round" "$(echo "$e - $s" | bc)" "$(count out)"

    if [ -n "$CROC" ]; then
        rm -rf out; mkdir out
        export CROC_SECRET="$((1000 + round))-braid-folders-bench"
        "$CROC" --relay 127.0.0.1:9009 --pass bench --yes --ignore-stdin --disable-clipboard \
            send tree > /dev/null 2>&1 &
        sp=$!
        sleep 2 # croc's receiver fails unless the sender is in the room first
        s=$(now)
        "$CROC" --relay 127.0.0.1:9009 --pass bench --yes --overwrite --out out > /dev/null 2>&1 || true
        e=$(now)
        wait $sp || true
        printf 'round %d: croc send DIR   %6.2f s, %d files\n' "$round" "$(echo "$e - $s" | bc)" "$(count out)"
    fi
done
