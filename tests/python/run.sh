#!/usr/bin/env bash
# The Python binding's tests, against the server in MONGODB_URI, or against a local one started
# (and stopped) here when it is unset. Arguments after the options go to pytest.
#   tests/python/run.sh                       # every Python test, on the checkout's package:
#                                             # tests/python/stage.sh builds the extension (debug,
#                                             # in target/, reusing what the Rust tests built)
#                                             # and the tools venv (.tools/pyvenv) runs pytest
#   tests/python/run.sh -k fork -x            # some of them
#   tests/python/run.sh --installed DIR       # on the package as a user installs it: a fresh
#                                             # venv (target/python-installed) gets
#                                             # dispenser-mongodb from DIR's wheel only (pip
#                                             # --no-index --find-links DIR) with cargo and
#                                             # rustc off PATH, and runs the suite with them off
# In the installed mode the tests' own dependencies (pytest, pymongo, Motor, uvloop) come from
# the tools venv (a .pth file in the fresh venv names its site-packages, after the venv's own).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. scripts/lib.sh
if [ ! -x .tools/pyvenv/bin/pytest ]; then
  echo "tests/python/run.sh: .tools/pyvenv/bin/pytest is missing: run scripts/tools.sh" >&2
  exit 3
fi
installed=""
if [ "${1:-}" = "--installed" ]; then
  if [ "$#" -lt 2 ] || [ ! -d "$2" ]; then
    echo "usage: tests/python/run.sh --installed DIR [pytest args]  (DIR: scripts/package.sh's output)" >&2
    exit 2
  fi
  installed=$(cd "$2" && pwd)
  shift 2
fi
if [ -z "$installed" ]; then
  stage=$(tests/python/stage.sh)
  export DISPENSER_PYTHON_STAGE="$stage"
  with_local_server pytest --backend memory -- \
    .tools/pyvenv/bin/pytest -p no:cacheprovider --durations=5 tests/python "$@"
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
venv=${CARGO_TARGET_DIR:-$PWD/target}/python-installed
rm -rf "$venv"
t0=$(date +%s.%N)
# The venv from the tools venv's interpreter (the Python its site-packages were installed for),
# without a pip of its own: the tools venv's pip installs into it (`pip --python`), 3 s sooner.
.tools/pyvenv/bin/python -m venv --without-pip "$venv"
t1=$(date +%s.%N)
PATH=$no_rust .tools/pyvenv/bin/python -m pip --python "$venv/bin/python" install --quiet \
  --disable-pip-version-check --no-index --find-links "$installed" dispenser-mongodb >&2
t2=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "tests/python/run.sh: venv %.1f s, pip install of the wheel %.1f s\n", b - a, c - b }' >&2
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
tools_site=$(.tools/pyvenv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$tools_site" >"$site/dispenser-tests-tools.pth"
where=$(cd / && PATH=$no_rust "$venv/bin/python" -c 'import dispenser; print(dispenser.__file__)')
case "$where" in
  "$site"/*) echo "tests/python/run.sh: testing the installed package $where" >&2 ;;
  *)
    echo "tests/python/run.sh: dispenser was imported from $where, not from $site" >&2
    exit 1
    ;;
esac
# An empty DISPENSER_PYTHON_STAGE: the suite imports the installed package, not a staged one.
export DISPENSER_PYTHON_STAGE="" DISPENSER_PYTHON_INSTALLED="$installed"
with_local_server pytest --backend memory -- \
  env PATH="$no_rust" "$venv/bin/python" -m pytest -p no:cacheprovider --durations=5 tests/python "$@"
