#!/usr/bin/env bash
# Installs the non-Rust tools the tests drive into .tools/ (gitignored), once:
#   .tools/npm/node_modules/.bin/mongosh   (npm: mongosh)
#   .tools/venv/bin/python                 (PyPI: pymongo, openapi-spec-validator)
#   .tools/faketime/libfaketimeMT.so.1     (Debian: libfaketime; the gap-free tests run CLI
#                                           holders with a clock an hour off through LD_PRELOAD)
# Idempotent and cached: a stamp file records the pinned versions; when it matches, nothing is
# downloaded. Needs node/npm (>= 18), python3 (>= 3.9, with venv) and, unless libfaketime is
# installed already, apt-get and dpkg-deb (`apt-get download` needs no root: the package is
# unpacked into .tools/, never installed). Prints the time taken.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MONGOSH_VERSION=2.12.0
PYMONGO_VERSION=4.20.0
VALIDATOR_VERSION=0.9.0
FAKETIME_VERSION=0.9.10
STAMP="mongosh=$MONGOSH_VERSION pymongo=$PYMONGO_VERSION openapi-spec-validator=$VALIDATOR_VERSION"

tools=.tools
started=$(date +%s)

need() {
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "tools.sh: $1 not found: install $2" >&2
    exit 3
  fi
}

if [ "$(cat "$tools/npm/.stamp" 2>/dev/null)" != "$STAMP" ] \
  || [ ! -x "$tools/npm/node_modules/.bin/mongosh" ]; then
  need npm "Node.js 18 or newer (with npm)"
  echo "tools.sh: installing mongosh $MONGOSH_VERSION into $tools/npm" >&2
  mkdir -p "$tools/npm"
  npm install --prefix "$tools/npm" --no-audit --no-fund --loglevel=error \
    "mongosh@$MONGOSH_VERSION" >&2
  echo "$STAMP" >"$tools/npm/.stamp"
fi

if [ "$(cat "$tools/venv/.stamp" 2>/dev/null)" != "$STAMP" ] \
  || [ ! -x "$tools/venv/bin/python" ]; then
  need python3 "Python 3.9 or newer (with the venv module)"
  echo "tools.sh: creating $tools/venv with pymongo $PYMONGO_VERSION, openapi-spec-validator $VALIDATOR_VERSION" >&2
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "pymongo==$PYMONGO_VERSION" "openapi-spec-validator==$VALIDATOR_VERSION" >&2
  echo "$STAMP" >"$tools/venv/.stamp"
fi

# libfaketime: the system's if installed, else the Debian package unpacked into .tools/.
if [ "$(cat "$tools/faketime/.stamp" 2>/dev/null)" != "$FAKETIME_VERSION" ] \
  || [ ! -e "$tools/faketime/libfaketimeMT.so.1" ]; then
  mkdir -p "$tools/faketime"
  system_lib=$(find /usr/lib /usr/lib64 -name libfaketimeMT.so.1 2>/dev/null | head -n 1 || true)
  if [ -n "$system_lib" ]; then
    ln -sf "$system_lib" "$tools/faketime/libfaketimeMT.so.1"
  else
    need apt-get "libfaketime (Debian/Ubuntu package libfaketime), or apt-get to fetch it"
    need dpkg-deb "libfaketime (Debian/Ubuntu package libfaketime), or dpkg-deb to unpack it"
    echo "tools.sh: fetching libfaketime into $tools/faketime" >&2
    work=$(mktemp -d)
    chmod 777 "$work" # apt-get download writes there as the _apt user
    (cd "$work" && apt-get download libfaketime >&2) || {
      echo "tools.sh: apt-get download libfaketime failed (run apt-get update, or install libfaketime)" >&2
      rm -rf "$work"
      exit 3
    }
    dpkg-deb -x "$work"/libfaketime_*.deb "$work/x"
    cp "$(find "$work/x" -name libfaketimeMT.so.1 | head -n 1)" "$tools/faketime/libfaketimeMT.so.1"
    rm -rf "$work"
  fi
  echo "$FAKETIME_VERSION" >"$tools/faketime/.stamp"
fi

echo "tools.sh: tools ready in $tools/ ($(($(date +%s) - started)) s)" >&2
