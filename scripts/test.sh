#!/usr/bin/env bash
# The test command: runs every test (unit, integration, doc) against the server in
# MONGODB_URI, or, when it is unset, against a local MongoDB-compatible server (in-memory
# backend) that this script starts and always stops. First installs the tools the tests
# drive (scripts/tools.sh: mongosh, pymongo, Schemathesis, ... once per machine,
# linked into .tools/), and afterwards prints the slowest tests of the run.
# Exit status: the tests'.
# Extra arguments go to `cargo test`; without them the language bindings' suites run too
# (tests/node/run.sh, tests/python/run.sh): on the checkout's packages, or, with
# DISPENSER_PACKAGES=DIR (scripts/package.sh's output; .ci/run sets it), on the packages in DIR
# installed as a user installs them (the suites' --installed mode).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

require_cargo test.sh
# The tools the tests drive (mongosh, a Python venv, ...): linked into .tools/ from the machine's
# tool cache, installed there the first time (FerretDB by its test: scripts/ferretdb.sh install).
scripts/tools.sh
# Snapshot tests (insta) compare and never write: a mismatch fails. To accept new output:
# INSTA_UPDATE=always scripts/test.sh --test integration cli_ux::  (then review the diff).
export INSTA_UPDATE="${INSTA_UPDATE:-no}"
# Two test threads more than the cores (unless RUST_TEST_THREADS says): the integration tests
# spend much of their time waiting on the database, the service and timeouts (with 3 threads on
# 2 cores they used about one core on average); on 2 cores they took 308 s with 2 threads, 248 s
# with 3 and 192 s with 4.
if [ -z "${RUST_TEST_THREADS:-}" ]; then
  cores=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
  export RUST_TEST_THREADS=$((cores + 2))
fi
# Each test binary runs through scripts/test-times.sh, which has libtest time every test; the
# slowest of the run are printed at the end (DISPENSER_SLOWEST=N of them, default 20; 0: none),
# so that a test that grows slower is seen (awk reads all the sorted lines: `head` would close
# the pipe early and, under pipefail, fail the run with sort's SIGPIPE). A runner set by the
# caller is kept.
host=$(rustc -vV | sed -n 's/^host: //p')
runner="CARGO_TARGET_$(printf '%s' "$host" | tr 'a-z.-' 'A-Z__')_RUNNER"
times=$(mktemp "${TMPDIR:-/tmp}/dispenser-test-times.XXXXXX")
if [ -z "${!runner:-}" ]; then
  export "$runner=$PWD/scripts/test-times.sh" DISPENSER_TEST_TIMES="$times"
fi
status=0
# suites ARGS...: the Rust tests (cargo test ARGS) and, when no ARGS narrow the run, the
# language bindings' suites against the same server (beside the Rust tests on installed
# packages; after them on the checkout, whose bindings they build).
suites() {
  local failed=0
  if [ "$#" -eq 0 ] && [ -n "${DISPENSER_PACKAGES:-}" ]; then
    # The bindings' suites on the packages in DISPENSER_PACKAGES, each installed into a fresh
    # environment from those files only; the Python suite's cross-language test draws with
    # the installed Node.js package. They need no build, so they run beside the Rust tests
    # (which leave about half of the CPU unused), their output shown after them.
    local bindings_log
    bindings_log=$(mktemp "${TMPDIR:-/tmp}/dispenser-bindings.XXXXXX")
    (
      bound=0
      tests/node/run.sh --installed "$DISPENSER_PACKAGES" || bound=$?
      DISPENSER_NODE_PACKAGE="${CARGO_TARGET_DIR:-$PWD/target}/node-installed/node_modules/dispenser" \
        tests/python/run.sh --installed "$DISPENSER_PACKAGES" || bound=$?
      exit "$bound"
    ) >"$bindings_log" 2>&1 &
    local bindings_pid=$!
    cargo test --locked || failed=$?
    wait "$bindings_pid" || failed=$?
    cat "$bindings_log"
    rm -f "$bindings_log"
    return "$failed"
  fi
  cargo test --locked "$@" || failed=$?
  if [ "$#" -eq 0 ]; then
    # The Node.js binding (tests/node/run.sh: builds the addon in the debug profile in
    # target/, then node --test). First: the Python suite's cross-language test spawns
    # tests/node/draw.mjs, which loads that addon.
    tests/node/run.sh || failed=$?
    # The Python binding (tests/python/run.sh: builds the extension in the debug profile in
    # target/, then pytest).
    tests/python/run.sh || failed=$?
  fi
  return "$failed"
}
with_local_server test --backend memory -- suites "$@" || status=$?
slowest=${DISPENSER_SLOWEST:-20}
if [ "$slowest" -gt 0 ] && grep -q ' <[0-9.]*s>$' "$times"; then
  echo "test.sh: the $slowest slowest tests of this run (seconds):" >&2
  sed -n -E 's/^test (.*) \.\.\. ([A-Za-z]+) <([0-9.]+)s>$/\3 \1 (\2)/p' "$times" |
    sort -rn | awk -v n="$slowest" 'NR <= n { printf "  %8.2f  %s %s\n", $1, $2, $3 }' >&2
fi
rm -f "$times"
exit "$status"
