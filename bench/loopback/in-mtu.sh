#!/bin/sh
# Runs a command in a network namespace of its own whose loopback has MTU
# N (default 1500, as on Ethernet), so that what it measures on 127.0.0.1
# has a real path's datagram size instead of the host loopback's 64 KiB.
# The namespace is removed when the command ends (or on Ctrl-C).
#
#   sudo bench/loopback/in-mtu.sh [MTU] -- COMMAND [ARGS...]
#
# Needs root (a network namespace) and iproute2's `ip`. The command sees
# the same files; only its network is the namespace's.
set -eu

MTU=1500
if [ "${1:-}" != "--" ] && [ $# -gt 0 ]; then MTU=$1; shift; fi
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "usage: in-mtu.sh [MTU] -- COMMAND [ARGS...]" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
    echo "in-mtu.sh needs root to create a network namespace; run it with sudo" >&2
    exit 2
fi
command -v ip > /dev/null || { echo "in-mtu.sh needs iproute2's ip" >&2; exit 2; }

NS=braid-mtu-sh-$$
ip netns add "$NS"
trap 'ip netns del "$NS" 2> /dev/null || true' EXIT
trap 'exit 130' INT TERM
ip -n "$NS" link set dev lo up mtu "$MTU"
status=0
ip netns exec "$NS" "$@" || status=$?
exit "$status"
