#!/usr/bin/env bash
# Builds the Python extension in the workspace's debug profile (reusing what the Rust tests
# built: see below) and stages the package `dispenser` (its Python sources and the extension) in
# target/python/, the directory the Python tests put on sys.path. Prints that directory.
#   tests/python/stage.sh            # debug build (the tests)
#   tests/python/stage.sh --release  # release build (tests/python/bench.py)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
profile=debug
if [ "${1:-}" = "--release" ]; then
  profile=release
  cargo build --locked --release -p dispenser-python >&2
else
  # The Rust crates' test targets (the workspace's default members) beside the extension:
  # cargo then resolves the dependencies'
  # features as for `cargo test` and reuses what the Rust tests built (built alone, the
  # extension's dependencies get other features, and the driver and the rest are compiled
  # again: 141 s of CPU in a fresh clone).
  cargo build --locked -p dispenser -p dispenser-server -p dispenser-cli -p dispenser-python --all-targets >&2
fi
target=${CARGO_TARGET_DIR:-target}
stage="$target/python-$profile"
rm -rf "$stage/dispenser"
mkdir -p "$stage/dispenser"
cp src/bindings/python/python/dispenser/*.py src/bindings/python/python/dispenser/*.pyi \
  src/bindings/python/python/dispenser/py.typed "$stage/dispenser/" 2>/dev/null || true
cp "$target/$profile/lib_dispenser.so" "$stage/dispenser/_dispenser.abi3.so"
(cd "$stage" && pwd)
