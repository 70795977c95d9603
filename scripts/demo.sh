#!/usr/bin/env bash
# The main job: a cyclic ticket dispenser (1..99, 0, 1, ...) served to many concurrent
# counters. With MONGODB_URI unset it runs on a local MongoDB-compatible server with the H2
# file backend (data/dispenser.h2), so the tickets continue where the last run stopped.
# Extra arguments go to the demo (--counters N, --cycles N, --strategy inc|cas).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

require_cargo demo.sh
# Build first, with cargo's own progress on stderr: the first build takes a few minutes.
echo "demo: building the demo (the first build takes a few minutes; later ones are instant)..." >&2
cargo build --locked --example tickets
with_local_server demo --backend h2 --data data/dispenser.h2 -- \
  cargo run --locked --quiet --example tickets -- "$@"
