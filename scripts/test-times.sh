#!/usr/bin/env bash
# The cargo runner scripts/test.sh runs every test binary through: BIN runs with libtest's time
# of each test (`--report-time`, an unstable libtest option that RUSTC_BOOTSTRAP=1 lets a test
# binary of stable Rust take; it is set for the test binary only, never for the compiler, so it
# changes no build), and what BIN prints on stdout (its results) is also appended to
# $DISPENSER_TEST_TIMES, from which scripts/test.sh prints the slowest tests of the run.
#
#   scripts/test-times.sh BIN [ARGS...]      (as CARGO_TARGET_<triple>_RUNNER)
#
# Exit: BIN's.
set -uo pipefail
bin=$1
shift
# A listing, or a caller that chose libtest's options itself: BIN as asked.
case " $* " in
  *" --list "* | *" -Z "* | *" --format"* | *" --report-time "*) exec "$bin" "$@" ;;
esac
if [ -z "${DISPENSER_TEST_TIMES:-}" ]; then
  exec env RUSTC_BOOTSTRAP=1 "$bin" "$@" -Z unstable-options --report-time
fi
RUSTC_BOOTSTRAP=1 "$bin" "$@" -Z unstable-options --report-time | tee -a "$DISPENSER_TEST_TIMES"
exit "${PIPESTATUS[0]}"
