#!/usr/bin/env bash
# The Python binding's tests: stages the package (tests/python/stage.sh: a debug build of the
# extension in the workspace's target/, reusing what the Rust tests built), then runs pytest
# from the tools venv (scripts/tools.sh: .tools/pyvenv) against the server in MONGODB_URI,
# or against a local one started (and stopped) here when it is unset. Arguments go to pytest.
#   tests/python/run.sh                       # every Python test
#   tests/python/run.sh -k fork -x            # some of them
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. scripts/lib.sh
if [ ! -x .tools/pyvenv/bin/pytest ]; then
  echo "tests/python/run.sh: .tools/pyvenv/bin/pytest is missing: run scripts/tools.sh" >&2
  exit 3
fi
stage=$(tests/python/stage.sh)
export DISPENSER_PYTHON_STAGE="$stage"
with_local_server pytest --backend memory -- \
  .tools/pyvenv/bin/pytest -p no:cacheprovider --durations=5 tests/python "$@"
