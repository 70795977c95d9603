#!/usr/bin/env bash
# Builds the Python extension in the workspace's debug profile (reusing what the Rust tests
# built) and stages the package `dispenser` (its Python sources and the extension) in
# target/python/, the directory the Python tests put on sys.path. Prints that directory.
#   tests/python/stage.sh            # debug build (the tests)
#   tests/python/stage.sh --release  # release build (tests/python/bench.py)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
profile=debug
flags=()
if [ "${1:-}" = "--release" ]; then
  profile=release
  flags=(--release)
fi
cargo build --locked -p dispenser-python "${flags[@]}" >&2
target=${CARGO_TARGET_DIR:-target}
stage="$target/python-$profile"
rm -rf "$stage/dispenser"
mkdir -p "$stage/dispenser"
cp src/bindings/python/python/dispenser/*.py src/bindings/python/python/dispenser/*.pyi \
  src/bindings/python/python/dispenser/py.typed "$stage/dispenser/" 2>/dev/null || true
cp "$target/$profile/lib_dispenser.so" "$stage/dispenser/_dispenser.abi3.so"
(cd "$stage" && pwd)
