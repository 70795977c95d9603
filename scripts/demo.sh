#!/usr/bin/env bash
# The main job: a cyclic ticket dispenser (1..99, 0, 1, ...) served to many concurrent
# counters. With MONGODB_URI unset it runs on a local MongoDB-compatible server with the H2
# file backend (data/dispenser.h2), so the tickets continue where the last run stopped.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "demo.sh: cargo not found: install Rust (stable) from https://rustup.rs" >&2
  exit 3
fi

if [ -z "${MONGODB_URI:-}" ]; then
  state=$(mktemp -d "${TMPDIR:-/tmp}/dispenser-demo.XXXXXX")
  cleanup() {
    scripts/server.sh stop --state "$state" >/dev/null 2>&1 || true
    rm -rf "$state"
  }
  trap cleanup EXIT
  line=$(scripts/server.sh start --backend h2 --data data/dispenser.h2 --state "$state")
  export MONGODB_URI="${line#MONGODB_URI=}"
  echo "demo.sh: local server (H2 file data/dispenser.h2) at $MONGODB_URI" >&2
fi

cargo run --locked --quiet --example tickets -- "$@"
