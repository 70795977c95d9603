#!/usr/bin/env bash
# Builds the Node.js addon into src/bindings/node/ as dispenser.<platform>.node, the file the
# loader (native.js) looks for.
#   tests/node/build.sh                 # the tests' build: debug, in the workspace's target/
#   tests/node/build.sh --release       # release (tests/node/bench.mjs), with @napi-rs/cli
#   tests/node/build.sh --declarations  # debug with @napi-rs/cli, which also regenerates
#                                       # native.js and native.d.ts from the Rust sources
# The tests' build selects the Rust crates' test targets (the default members: the core, the
# service, the command line) beside the addon, so cargo resolves the
# dependencies' features as for `cargo test` and reuses what the Rust tests built (built alone,
# the addon's dependencies get other features, and cargo would compile the driver and the rest
# again). @napi-rs/cli always passes --target, which builds everything again in its own tree:
# it is for releases and the declarations only. Both come from scripts/tools.sh's cache.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$PWD
target=${CARGO_TARGET_DIR:-$root/target}
napi() {
  local cli=.tools/node/node_modules/.bin/napi
  if [ ! -x "$cli" ]; then
    echo "tests/node/build.sh: $cli is missing: run scripts/tools.sh" >&2
    exit 3
  fi
  (cd src/bindings/node && "$root/$cli" build --platform --js native.js --dts native.d.ts \
    --target-dir "$target" "$@" >&2)
}
case "${1:-}" in
  --release) napi --release ;;
  --declarations) napi ;;
  "")
    cargo build --locked -p dispenser -p dispenser-server -p dispenser-cli -p dispenser-node --all-targets >&2
    platform=$(node -p "const r = process.report && process.report.getReport(); \`\${process.platform}-\${process.arch}\${process.platform === 'linux' ? (r && r.header.glibcVersionRuntime ? '-gnu' : '-musl') : ''}\`")
    case "$(uname -s)" in
      Darwin) lib=libdispenser_node.dylib ;;
      *) lib=libdispenser_node.so ;;
    esac
    cp "$target/debug/$lib" "src/bindings/node/dispenser.$platform.node"
    ;;
  *)
    echo "usage: tests/node/build.sh [--release | --declarations]" >&2
    exit 2
    ;;
esac
