#!/usr/bin/env bash
# The Node.js package's tests: `node --test tests/node/*.test.js` with the npm packages of the
# tool cache (scripts/tools.sh: .tools/node) against the server in MONGODB_URI, or a local one
# started (and stopped) here when it is unset. Arguments after the options go to `node --test`
# (before the test files).
#   tests/node/run.sh                                   # every Node test, on the checkout's
#                                                       # package: tests/node/build.sh builds
#                                                       # the addon (debug, in target/, reusing
#                                                       # what the Rust tests built)
#   tests/node/run.sh --test-name-pattern=gap-free      # some of them
#   tests/node/run.sh --installed DIR                   # on the package as a user installs it:
#                                                       # a fresh npm project
#                                                       # (target/node-installed) gets the main
#                                                       # package and this platform's from
#                                                       # DIR's tarballs only (npm --offline
#                                                       # --ignore-scripts) with cargo and rustc
#                                                       # off PATH, and the suite runs with them off
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. scripts/lib.sh
if [ ! -d .tools/node/node_modules/mongoose ]; then
  echo "tests/node/run.sh: .tools/node/node_modules is missing: run scripts/tools.sh" >&2
  exit 3
fi
installed=""
if [ "${1:-}" = "--installed" ]; then
  if [ "$#" -lt 2 ] || [ ! -d "$2" ]; then
    echo "usage: tests/node/run.sh --installed DIR [node --test args]  (DIR: scripts/package.sh's output)" >&2
    exit 2
  fi
  installed=$(cd "$2" && pwd)
  shift 2
fi
export NODE_PATH="$PWD/.tools/node/node_modules"
if [ -z "$installed" ]; then
  tests/node/build.sh
  with_local_server node-tests --backend memory -- node --test "$@" tests/node/*.test.js
  exit
fi

# PATH without the directories that hold cargo or rustc: nothing may build Rust.
no_rust=""
IFS=: read -r -a dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  if [ -n "$d" ] && [ ! -e "$d/cargo" ] && [ ! -e "$d/rustc" ]; then
    no_rust="${no_rust:+$no_rust:}$d"
  fi
done
version=$(node -p "require('./src/bindings/node/package.json').version")
platform=$(node -p "const r = process.report && process.report.getReport(); \`\${process.platform}-\${process.arch}\${process.platform === 'linux' ? (r && r.header.glibcVersionRuntime ? '-gnu' : '-musl') : ''}\`")
main=$installed/dispenser-$version.tgz
addon=$installed/dispenser-$platform-$version.tgz
for f in "$main" "$addon"; do
  if [ ! -f "$f" ]; then
    echo "tests/node/run.sh: $f is missing (scripts/package.sh builds it)" >&2
    exit 3
  fi
done
project=${CARGO_TARGET_DIR:-$PWD/target}/node-installed
rm -rf "$project"
mkdir -p "$project"
printf '{ "name": "dispenser-installed", "version": "1.0.0", "private": true }\n' >"$project/package.json"
t0=$(date +%s.%N)
# --offline: the two tarballs are all npm may read; the other platforms' optional packages are
# not fetched (npm skips an optional dependency it cannot get).
(cd "$project" && PATH=$no_rust npm install --offline --ignore-scripts --no-audit --no-fund \
  --loglevel=error "$main" "$addon" >&2)
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "tests/node/run.sh: npm install of the two tarballs %.1f s\n", b - a }' >&2
export DISPENSER_NODE_PACKAGE="$project/node_modules/dispenser"
where=$(cd "$project" && PATH=$no_rust node -p "require.resolve('dispenser') + ' ' + require('dispenser').Dispenser.name")
echo "tests/node/run.sh: testing the installed package $where" >&2
with_local_server node-tests --backend memory -- \
  env PATH="$no_rust" node --test "$@" tests/node/*.test.js
