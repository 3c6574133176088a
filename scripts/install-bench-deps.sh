#!/bin/sh
# What `braid bench real` and `braid link` need beyond Rust: iperf3 (kernel
# TCP as the comparison peer) and iproute2 (`ip`, network namespaces).
# Debian/Ubuntu, as root.
set -e
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq iperf3 iproute2 >/dev/null
iperf3 --version | head -1
ip -V
