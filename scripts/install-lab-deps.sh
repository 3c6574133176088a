#!/bin/sh
# What the NAT lab (`braid bench lab`, `braid bench reach` and
# crates/braid-bench/tests/lab.rs) needs beyond `braid link`'s iproute2:
# nftables, for the NAT routers. Debian/Ubuntu, as root. Idempotent, and
# quiet when nft is already there.
#
# With --wormhole, also magic-wormhole and its two servers (the mailbox
# server and the transit relay) in a Python venv, for `braid bench reach
# --wormhole`: in $WORMHOLE_VENV, by default ~/.local/share/braid/wormhole-venv
# (then `--wormhole ~/.local/share/braid/wormhole-venv/bin/wormhole`).
set -e
if [ "$1" = --wormhole ]; then
    venv="${WORMHOLE_VENV:-$HOME/.local/share/braid/wormhole-venv}"
    if [ ! -x "$venv/bin/pip" ]; then
        mkdir -p "$(dirname "$venv")"
        if ! python3 -m venv "$venv" 2>/dev/null; then
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq
            apt-get install -y -qq python3-venv >/dev/null
            rm -rf "$venv"
            python3 -m venv "$venv"
        fi
    fi
    "$venv/bin/pip" install -q magic-wormhole==0.24.0 \
        magic-wormhole-mailbox-server==0.8.0 magic-wormhole-transit-relay==0.5.0
    echo "magic-wormhole: $venv/bin/wormhole"
fi
if command -v nft >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "install-lab-deps.sh: nft is missing; run as root to install nftables" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq nftables iproute2 >/dev/null
nft --version
