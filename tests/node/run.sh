#!/usr/bin/env bash
# The Node.js package's tests: builds the addon (tests/node/build.sh: debug, in the workspace's
# target/, reusing what the Rust tests built), then runs `node --test tests/node/*.test.js`
# with the npm packages of the tool cache (scripts/tools.sh: .tools/node) against the server in
# MONGODB_URI, or a local one started (and stopped) here when it is unset. Arguments go to
# `node --test` (before the test files).
#   tests/node/run.sh                                   # every Node test
#   tests/node/run.sh --test-name-pattern=gap-free      # some of them
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. scripts/lib.sh
if [ ! -d .tools/node/node_modules/mongoose ]; then
  echo "tests/node/run.sh: .tools/node/node_modules is missing: run scripts/tools.sh" >&2
  exit 3
fi
tests/node/build.sh
export NODE_PATH="$PWD/.tools/node/node_modules"
with_local_server node-tests --backend memory -- node --test "$@" tests/node/*.test.js
