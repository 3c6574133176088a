#!/bin/sh
# Builds quinn's own `perf` tool (quinn-rs/quinn, `perf` crate) at a pinned
# commit, outside braid's dependency tree, for the bench's quinn-perf kind.
#
#   bench/loopback/build-quinn-perf.sh [DIR]    # default DIR: ./quinn-src
#
# Prints the binary's path last; pass it as `--quinn-perf PATH` or export
# QUINN_PERF=PATH. Needs git and cargo; ring is the crypto provider, so no
# C toolchain beyond cc.
set -eu

COMMIT=a1931ab8c37e09d915ad1dcb846624ccd72e04a9
DIR=${1:-quinn-src}

if [ ! -d "$DIR/.git" ]; then
    git clone --quiet https://github.com/quinn-rs/quinn.git "$DIR"
fi
cd "$DIR"
git fetch --quiet origin "$COMMIT" 2>/dev/null || true
git checkout --quiet "$COMMIT"
# json-output only: qlog is not needed and costs build time.
cargo build --release --locked -p perf --no-default-features --features json-output >&2
echo "$(pwd)/target/release/quinn-perf"
