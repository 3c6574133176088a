#!/bin/sh
# What the NAT lab (`braid bench lab`, `braid bench reach` and
# crates/braid-cli/tests/lab.rs) needs beyond `braid link`'s iproute2:
# nftables, for the NAT routers. Debian/Ubuntu, as root. Idempotent, and
# quiet when nft is already there.
set -e
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
