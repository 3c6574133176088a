#!/bin/bash
# Compare braid and kernel TCP (cubic, bbr) through mahimahi (mm-delay/mm-link/mm-loss)
# and through braid's own emulator (braid link --scenario), per catchunks row.
#
# Usage: sudo scripts/mahimahi-compare.sh [ROWS...]
#   env: ROUNDS=3, SKIP_LOAD_WAIT=1, WORK=/tmp/braid-mahimahi (inputs, results.csv, runs/)
# Needs mahimahi's mm-delay/mm-link/mm-loss on PATH (not in Debian: build it from
# https://github.com/ravinet/mahimahi, ./autogen.sh && ./configure && make && make install;
# its configure wants protobuf, libssl, xcb/cairo/pango and apache2-dev), iperf3
# (scripts/install-bench-deps.sh) and a release build (cargo build --release).
# Must run as root: mahimahi's setuid shells refuse to run with real uid 0, so they
# are run as `nobody` via setpriv; braid link needs root.
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
D=${WORK:-/tmp/braid-mahimahi}
mkdir -p "$D"
cd "$D"
# A copy `nobody` can execute wherever the checkout lives.
cp "$REPO/target/release/braid" "$D/braid" && chmod 755 "$D/braid"
BRAID=$D/braid
INPUT=$D/input.bin           # 50 MB (50,000,000 bytes) of random data
TRACE=$D/50mbit.trace        # 50 opportunities / 12 ms = 4.1667/ms x 1504 B (1500-B IP pkt + 4-B tun header)
SCEN=$REPO/scenarios
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-$D/results.csv}
LOADLOG=$D/load.log
BPORT=47311
IPORT=47312
TMO=180
SIZE=50000000
RUNAS=(setpriv --reuid=nobody --regid=nogroup --clear-groups)

# row  scenario-file  one-way-delay-ms  queue-packets  uplink-loss
ALL_ROWS="
rtt-100   catchunks-longrtt/rtt-100ms 50  1000 0
rtt-200   catchunks-longrtt/rtt-200ms 100 1000 0
rtt-400   catchunks-longrtt/rtt-400ms 200 1000 0
queue-20  catchunks-queue/queue-20    20  20   0
queue-100 catchunks-queue/queue-100   20  100  0
loss-1pct catchunks-loss/loss-1pct    20  300  0.01
"
KINDS="mm-braid mm-cubic mm-bbr bl-braid bl-cubic bl-bbr"

[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
[ -f "$INPUT" ] || head -c $SIZE /dev/urandom > "$INPUT"
[ -f "$TRACE" ] || python3 -c "
import math
print('\n'.join(str(math.ceil((i+1)*12/50)) for i in range(50)))" > "$TRACE"
[ -f $D/recv.key ] || "$BRAID" keygen -o $D/recv.key >/dev/null
chmod 644 "$INPUT" "$TRACE" $D/recv.key.pub
PUB=$(cat $D/recv.key.pub)

# --- sysctls mahimahi / iperf3-as-nobody need; restored on exit -------------------------
ORIG_FWD=$(cat /proc/sys/net/ipv4/ip_forward)
ORIG_ALLOWED=$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)
BG=""
cleanup() {
    for p in $BG; do kill "$p" 2>/dev/null; done
    sysctl -qw net.ipv4.ip_forward="$ORIG_FWD"
    sysctl -qw net.ipv4.tcp_allowed_congestion_control="$ORIG_ALLOWED"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
sysctl -qw net.ipv4.ip_forward=1                      # mahimahi refuses to start otherwise
case " $ORIG_ALLOWED " in *" cubic "*) ;; *)          # unprivileged iperf3 -C cubic needs it
    sysctl -qw net.ipv4.tcp_allowed_congestion_control="$ORIG_ALLOWED cubic" ;; esac
case " $ORIG_ALLOWED " in *" bbr "*) ;; *)
    sysctl -qw net.ipv4.tcp_allowed_congestion_control="$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control) bbr" ;; esac
grep -qw bbr /proc/sys/net/ipv4/tcp_available_congestion_control || modprobe tcp_bbr 2>/dev/null

# --- wait for a quiet machine -------------------------------------------------------------
load1() { cut -d' ' -f1 /proc/loadavg; }
if [ -z "${SKIP_LOAD_WAIT:-}" ]; then
    for i in $(seq 1 20); do
        echo "$(date +%T) wait $i: $(uptime)" | tee -a "$LOADLOG"
        awk -v l="$(load1)" 'BEGIN{exit !(l < 1.0)}' && break
        [ "$i" = 20 ] && { echo "load never dropped below 1.0 in 20 min; running anyway" | tee -a "$LOADLOG"; break; }
        sleep 60
    done
fi

# --- one transfer ---------------------------------------------------------------------------
# mm_wrap DELAY QUEUE LOSS -> the mahimahi shell chain (loss innermost = at entry, before the queue,
# as braid's link model and netem do); uplink = inside -> outside = data direction.
mm_cmd() {
    local delay=$1 q=$2 loss=$3
    MM=("${RUNAS[@]}" mm-delay "$delay" mm-link "$TRACE" "$TRACE"
        --uplink-queue=droptail --uplink-queue-args="packets=$q"
        --downlink-queue=droptail --downlink-queue-args="packets=$q" --)
    if [ "$loss" != 0 ]; then MM+=(mm-loss uplink "$loss"); fi
}

run_one() {  # row scen delay q loss kind round
    local row=$1 scen=$2 delay=$3 q=$4 loss=$5 kind=$6 round=$7
    local json=$D/runs/$row.$kind.$round.json err=$D/runs/$row.$kind.$round.err
    local wrap=() hostvar cc="" mbps=NA rc
    mm_cmd "$delay" "$q" "$loss"
    case $kind in
        mm-*) wrap=("${MM[@]}"); hostvar='$MAHIMAHI_BASE' ;;
        bl-*) wrap=("$BRAID" link --scenario "$SCEN/$scen.toml" --quiet --); hostvar='$BRAID_LINK_HOST' ;;
    esac
    case $kind in *-cubic) cc=cubic ;; *-bbr) cc=bbr ;; esac
    local l0; l0=$(cut -d' ' -f1-3 /proc/loadavg)
    local t0; t0=$(date +%s.%N)
    if [ -z "$cc" ]; then
        "$BRAID" recv --listen 0.0.0.0:$BPORT --key $D/recv.key --output - --quiet >/dev/null 2>"$err.recv" &
        local sp=$!; BG="$sp"; sleep 0.3
        timeout $TMO "${wrap[@]}" sh -c "exec $BRAID send $INPUT --to $hostvar:$BPORT --peer $PUB --quiet --json" >"$json" 2>"$err"
        rc=$?
        for _ in $(seq 1 50); do kill -0 $sp 2>/dev/null || break; sleep 0.1; done
        kill $sp 2>/dev/null; wait $sp 2>/dev/null
        mbps=$(python3 -c "import json,sys; f=json.load(open('$json'))['flows'][0]; print('%.3f'%f['goodput_mbps'] if f['completed'] else 'NA')" 2>/dev/null || echo NA)
    else
        iperf3 -s -p $IPORT -1 >"$err.srv" 2>&1 &
        local sp=$!; BG="$sp"; sleep 0.3
        timeout $TMO "${wrap[@]}" sh -c "exec iperf3 -c $hostvar -p $IPORT -n $SIZE -C $cc --json" >"$json" 2>"$err"
        rc=$?
        for _ in $(seq 1 30); do kill -0 $sp 2>/dev/null || break; sleep 0.1; done
        kill $sp 2>/dev/null; wait $sp 2>/dev/null
        mbps=$(python3 -c "
import json; d=json.load(open('$json')); e=d['end']
assert e['sender_tcp_congestion']=='$cc', e.get('sender_tcp_congestion')
print('%.3f'%(e['sum_received']['bits_per_second']/1e6))" 2>/dev/null || echo NA)
    fi
    BG=""
    local secs; secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    local l1; l1=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "$row,$round,$kind,$mbps,$rc,$secs,$l0,$l1" | tee -a "$OUT"
    echo "$(date +%T) $row $kind r$round load before [$l0] after [$l1]" >> "$LOADLOG"
}

mkdir -p $D/runs
[ -f "$OUT" ] || echo "row,round,kind,mbps,rc,wall_s,load_before,load_after" > "$OUT"
SEL="${*:-}"
echo "$ALL_ROWS" | while read -r row scen delay q loss; do
    [ -n "$row" ] || continue
    if [ -n "$SEL" ] && ! [[ " $SEL " == *" $row "* ]]; then continue; fi
    for round in $(seq 1 "$ROUNDS"); do
        ks=$KINDS
        # alternate the order every round (forward, reverse, forward ...)
        [ $((round % 2)) = 0 ] && ks=$(echo $KINDS | tr ' ' '\n' | tac | tr '\n' ' ')
        for kind in $ks; do
            run_one "$row" "$scen" "$delay" "$q" "$loss" "$kind" "$round" </dev/null
        done
    done
done

python3 "$REPO/scripts/mahimahi-summarize.py" "$OUT"
