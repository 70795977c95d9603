#!/usr/bin/env bash
# The test command: runs every test (unit, integration, doc) against the server in
# MONGODB_URI, or, when it is unset, against a local MongoDB-compatible server (in-memory
# backend) that this script starts and always stops. Exit status: the tests'.
# Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "test.sh: cargo not found: install Rust (stable) from https://rustup.rs" >&2
  exit 3
fi

if [ -z "${MONGODB_URI:-}" ]; then
  state=$(mktemp -d "${TMPDIR:-/tmp}/dispenser-test.XXXXXX")
  cleanup() {
    scripts/server.sh stop --state "$state" >/dev/null 2>&1 || true
    rm -rf "$state"
  }
  trap cleanup EXIT
  line=$(scripts/server.sh start --backend memory --state "$state")
  export MONGODB_URI="${line#MONGODB_URI=}"
  echo "test.sh: local test server at $MONGODB_URI" >&2
else
  echo "test.sh: testing against the server in MONGODB_URI" >&2
fi

cargo test --locked "$@"
