#!/usr/bin/env bash
# Installs the non-Rust tools the tests drive, once per machine, and links them into .tools/
# (gitignored):
#   .tools/npm/node_modules/.bin/mongosh   (npm: mongosh)
#   .tools/venv/bin/python                 (PyPI: pymongo, openapi-spec-validator, prometheus_client)
#   .tools/venv/bin/st                     (PyPI: schemathesis, which tests `serve` from its OpenAPI)
#   .tools/faketime/libfaketimeMT.so.1     (Debian: libfaketime; the gap-free tests run CLI
#                                           holders with a clock an hour off through LD_PRELOAD)
#   chromium + chromedriver                (Debian: chromium, chromium-driver) and Selenium (PyPI,
#                                           into .tools/venv): the browser tests of serve's pages;
#   zbarimg                                (Debian: zbar-tools) reads their QR codes
#                                           into .tools/venv): the browser tests of serve's pages
#   .tools/pyvenv/bin/pytest               (PyPI: pytest, pymongo, uvloop, motor, mongoengine, beanie,
#                                           mypy): tests/python
#   .tools/node/node_modules               (npm: @napi-rs/cli, mongodb, mongoose 8, mongoose 9 (as
#                                           mongoose9), mongoose-sequence, express, typescript):
#                                           tests/node and the Node package's builds
#   .tools/buildvenv/bin/maturin           (PyPI: maturin, ziglang, auditwheel): only with
#                                           --packaging, for scripts/package.sh's release builds
# Each .tools/NAME is a link into the machine's tool cache (scripts/lib.sh: $DISPENSER_TOOLS_CACHE,
# else ~/.cache/dispenser-tools), one directory per tool and pinned versions, shared by every
# clone: a fresh clone links what an earlier clone installed and downloads nothing. (A real
# .tools/NAME directory whose stamps match, from an older tools.sh, is used as it is.)
# Idempotent: a stamp file in each directory records its pinned versions; when it matches,
# nothing is downloaded. Needs node/npm (>= 18), python3 (>= 3.9, with venv),
# apt-get (Chromium and zbar-tools, when missing: as root, else through sudo) and, unless libfaketime is installed
# already, dpkg-deb (`apt-get download` needs no root: the package is unpacked into the cache, never
# installed). Prints the time taken. (FerretDB, which one test runs, is built by that test on first
# use: scripts/ferretdb.sh install, into the same cache; .ci/run starts that build early.)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

MONGOSH_VERSION=2.12.0
PYMONGO_VERSION=4.20.0
VALIDATOR_VERSION=0.9.0
PROMETHEUS_CLIENT_VERSION=0.26.0
SCHEMATHESIS_VERSION=4.32.5
# One stamp per directory, so that bumping a Python package does not reinstall mongosh.
NPM_STAMP="mongosh=$MONGOSH_VERSION"
VENV_STAMP="pymongo=$PYMONGO_VERSION openapi-spec-validator=$VALIDATOR_VERSION prometheus_client=$PROMETHEUS_CLIENT_VERSION schemathesis=$SCHEMATHESIS_VERSION"
FAKETIME_VERSION=0.9.10
SELENIUM_VERSION=4.51.0
SELENIUM_STAMP="selenium=$SELENIUM_VERSION"

tools=.tools
started=$(date +%s)
# `scripts/tools.sh --packaging` installs only the packaging tools (below: maturin, ziglang,
# auditwheel), which scripts/package.sh's release builds use and the tests do not;
# `scripts/tools.sh --bindings` only what the bindings' suites use (.tools/pyvenv, .tools/node:
# the release workflow's test legs, which run nothing else).
packaging_only=""
bindings_only=""
case "${1:-}" in
  --packaging) packaging_only=1 ;;
  --bindings) bindings_only=1 ;;
  "") ;;
  *)
    echo "usage: scripts/tools.sh [--packaging | --bindings]" >&2
    exit 2
    ;;
esac

need() {
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "tools.sh: $1 not found: install $2" >&2
    exit 3
  fi
}

# stamped DIR STAMP [FILE]: DIR's stamp file (.stamp, or FILE) holds STAMP.
stamped() { [ "$(cat "$1/${3:-.stamp}" 2>/dev/null)" = "$2" ]; }

# --- The packaging tools (scripts/package.sh, release profile): maturin builds the Python wheel
# and the sdist, ziglang (Zig as a linker) links it against the glibc of manylinux2014 whatever
# this machine's glibc is, auditwheel checks the wheel's manylinux tag. A venv of their own, made
# only on request (`--packaging`): the tests never need them.
MATURIN_VERSION=1.16.0
ZIGLANG_VERSION=0.17.1
AUDITWHEEL_VERSION=6.8.2
BUILDVENV_STAMP="maturin=$MATURIN_VERSION ziglang=$ZIGLANG_VERSION auditwheel=$AUDITWHEEL_VERSION"
buildvenv_ok() { stamped "$1" "$BUILDVENV_STAMP" && "$1/bin/maturin" --version >/dev/null 2>&1; }
if [ -n "$packaging_only" ]; then
  if ! buildvenv_ok "$tools/buildvenv"; then
    dir=$(tools_cache_dir buildvenv "$BUILDVENV_STAMP")
    tools_lock buildvenv
    if ! buildvenv_ok "$dir"; then
      need python3 "Python 3.9 or newer (with the venv module)"
      echo "tools.sh: creating $dir with $BUILDVENV_STAMP" >&2
      rm -rf "$dir"
      python3 -m venv "$dir"
      "$dir/bin/python" -m pip install --quiet --disable-pip-version-check \
        "maturin==$MATURIN_VERSION" "ziglang==$ZIGLANG_VERSION" "auditwheel==$AUDITWHEEL_VERSION" >&2
      echo "$BUILDVENV_STAMP" >"$dir/.stamp"
    fi
    tools_unlock
    link_tool "$tools/buildvenv" "$dir"
  fi
  echo "tools.sh: packaging tools ready in $tools/buildvenv ($(($(date +%s) - started)) s)" >&2
  exit 0
fi
# --- end of the packaging tools

# The tools of the Rust suite (up to Chromium), left out with --bindings.
if [ -z "$bindings_only" ]; then
# --- mongosh (npm), installed into a scratch directory and moved into the cache whole.
npm_ok() { stamped "$1" "$NPM_STAMP" && [ -x "$1/node_modules/.bin/mongosh" ]; }
if ! npm_ok "$tools/npm"; then
  dir=$(tools_cache_dir npm "$NPM_STAMP")
  tools_lock npm
  if ! npm_ok "$dir"; then
    need npm "Node.js 18 or newer (with npm)"
    echo "tools.sh: installing mongosh $MONGOSH_VERSION into $dir" >&2
    rm -rf "$dir" "$dir.tmp"
    mkdir -p "$dir.tmp"
    npm install --prefix "$dir.tmp" --no-audit --no-fund --loglevel=error \
      "mongosh@$MONGOSH_VERSION" >&2
    echo "$NPM_STAMP" >"$dir.tmp/.stamp"
    mv "$dir.tmp" "$dir"
  fi
  tools_unlock
  link_tool "$tools/npm" "$dir"
fi

# --- The Python venv: pymongo, openapi-spec-validator, prometheus_client, Schemathesis and
# Selenium. A venv cannot move, so it is made in place (under the lock); its stamps come last.
venv_ok() {
  stamped "$1" "$VENV_STAMP" && stamped "$1" "$SELENIUM_STAMP" .selenium-stamp \
    && "$1/bin/python" -c '' 2>/dev/null
}
if ! venv_ok "$tools/venv"; then
  dir=$(tools_cache_dir venv "$VENV_STAMP $SELENIUM_STAMP")
  tools_lock venv
  if ! venv_ok "$dir"; then
    need python3 "Python 3.9 or newer (with the venv module)"
    echo "tools.sh: creating $dir with pymongo $PYMONGO_VERSION, openapi-spec-validator $VALIDATOR_VERSION, prometheus_client $PROMETHEUS_CLIENT_VERSION, schemathesis $SCHEMATHESIS_VERSION, selenium $SELENIUM_VERSION" >&2
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check \
      "pymongo==$PYMONGO_VERSION" "openapi-spec-validator==$VALIDATOR_VERSION" \
      "prometheus_client==$PROMETHEUS_CLIENT_VERSION" "schemathesis==$SCHEMATHESIS_VERSION" \
      "selenium==$SELENIUM_VERSION" >&2
    echo "$VENV_STAMP" >"$dir/.stamp"
    echo "$SELENIUM_STAMP" >"$dir/.selenium-stamp"
  fi
  tools_unlock
  link_tool "$tools/venv" "$dir"
fi


# --- libfaketime: the system's if installed, else the Debian package unpacked into the cache.
faketime_ok() { stamped "$1" "$FAKETIME_VERSION" && [ -e "$1/libfaketimeMT.so.1" ]; }
if ! faketime_ok "$tools/faketime"; then
  dir=$(tools_cache_dir faketime "$FAKETIME_VERSION")
  tools_lock faketime
  if ! faketime_ok "$dir"; then
    rm -rf "$dir"
    mkdir -p "$dir"
    system_lib=$(find /usr/lib /usr/lib64 -name libfaketimeMT.so.1 2>/dev/null | head -n 1 || true)
    if [ -n "$system_lib" ]; then
      ln -sf "$system_lib" "$dir/libfaketimeMT.so.1"
    else
      need apt-get "libfaketime (Debian/Ubuntu package libfaketime), or apt-get to fetch it"
      need dpkg-deb "libfaketime (Debian/Ubuntu package libfaketime), or dpkg-deb to unpack it"
      echo "tools.sh: fetching libfaketime into $dir" >&2
      work=$(mktemp -d)
      chmod 777 "$work" # apt-get download writes there as the _apt user
      (cd "$work" && apt-get download libfaketime >&2) || {
        echo "tools.sh: apt-get download libfaketime failed (run apt-get update, or install libfaketime)" >&2
        rm -rf "$work"
        exit 3
      }
      dpkg-deb -x "$work"/libfaketime_*.deb "$work/x"
      cp "$(find "$work/x" -name libfaketimeMT.so.1 | head -n 1)" "$dir/libfaketimeMT.so.1"
      rm -rf "$work"
    fi
    echo "$FAKETIME_VERSION" >"$dir/.stamp"
  fi
  tools_unlock
  link_tool "$tools/faketime" "$dir"
fi

# --- Chromium: the browser tests of the pages `dispenser serve` serves (tests/integration/ui.rs).
# Debian's chromium and chromium-driver from apt when missing (about 20 s; as root, else through
# sudo), and zbar-tools (zbarimg: the test reads the QR codes of the ticket link off the page's
# screenshot, as a phone's camera would); Selenium is in the venv above.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1 \
  || ! command -v zbarimg >/dev/null 2>&1; then
  need apt-get "Chromium, its WebDriver and zbarimg (Debian/Ubuntu: apt-get install chromium chromium-driver zbar-tools)"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    need sudo "root rights to apt-get install chromium chromium-driver zbar-tools"
    sudo="sudo"
  fi
  echo "tools.sh: installing chromium, chromium-driver and zbar-tools (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! $sudo apt-get install -y -q chromium chromium-driver zbar-tools >&2; then
    $sudo apt-get update -q >&2
    $sudo apt-get install -y -q chromium chromium-driver zbar-tools >&2
  fi
fi
# --- end of Chromium
fi

# --- The Python binding's tests (tests/python): pytest, with pymongo (the apps' own driver
# in the gap-free tests, its AsyncMongoClient for asyncio), Motor (still works beside it) and
# uvloop (the asyncio flavour under both loops), mongoengine and Beanie (the ODM fields beside
# mongoengine's own SequenceField), mypy (the type stubs checked on a typed usage file), in a
# venv of their own so that bumping them reinstalls nothing else.
PYTEST_VERSION=9.2.0
UVLOOP_VERSION=0.23.0
MOTOR_VERSION=3.7.1
MONGOENGINE_VERSION=0.29.3
BEANIE_VERSION=2.2.0
MYPY_VERSION=2.4.1
PYVENV_STAMP="pytest=$PYTEST_VERSION pymongo=$PYMONGO_VERSION uvloop=$UVLOOP_VERSION motor=$MOTOR_VERSION mongoengine=$MONGOENGINE_VERSION beanie=$BEANIE_VERSION mypy=$MYPY_VERSION"
pyvenv_ok() { stamped "$1" "$PYVENV_STAMP" && "$1/bin/python" -c '' 2>/dev/null; }
if ! pyvenv_ok "$tools/pyvenv"; then
  dir=$(tools_cache_dir pyvenv "$PYVENV_STAMP")
  tools_lock pyvenv
  if ! pyvenv_ok "$dir"; then
    need python3 "Python 3.9 or newer (with the venv module)"
    echo "tools.sh: creating $dir with $PYVENV_STAMP" >&2
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check \
      "pytest==$PYTEST_VERSION" "pymongo==$PYMONGO_VERSION" "uvloop==$UVLOOP_VERSION" \
      "motor==$MOTOR_VERSION" "mongoengine==$MONGOENGINE_VERSION" "beanie==$BEANIE_VERSION" \
      "mypy==$MYPY_VERSION" >&2
    echo "$PYVENV_STAMP" >"$dir/.stamp"
  fi
  tools_unlock
  link_tool "$tools/pyvenv" "$dir"
fi
# --- end of the Python binding's tests

# --- The Node.js binding's tests (tests/node): @napi-rs/cli (the addon's release builds and
# its TypeScript declarations), the official driver (the apps' own inserts in the gap-free
# tests, the hand-written counter of bench.mjs), Mongoose 8 and mongoose-sequence 6.0.1 (the
# plugin beside the one it replaces, and the switch-over from it), Mongoose 9 under the name
# mongoose9 (the plugin on both majors; mongoose-sequence works with 8 only), Express 5 (the
# answers through res.json), TypeScript (the declarations compiled), installed into a scratch
# directory and moved into the cache whole. mongodb is the version Mongoose 8 pins.
NAPI_CLI_VERSION=3.10.12
NODE_MONGODB_VERSION=6.20.0
MONGOOSE_VERSION=8.24.10
MONGOOSE9_VERSION=9.12.1
MONGOOSE_SEQUENCE_VERSION=6.0.1
EXPRESS_VERSION=5.3.0
TYPESCRIPT_VERSION=6.0.3
NODE_STAMP="@napi-rs/cli=$NAPI_CLI_VERSION mongodb=$NODE_MONGODB_VERSION mongoose=$MONGOOSE_VERSION mongoose9=$MONGOOSE9_VERSION mongoose-sequence=$MONGOOSE_SEQUENCE_VERSION express=$EXPRESS_VERSION typescript=$TYPESCRIPT_VERSION"
node_ok() { stamped "$1" "$NODE_STAMP" && [ -x "$1/node_modules/.bin/napi" ]; }
if ! node_ok "$tools/node"; then
  dir=$(tools_cache_dir node "$NODE_STAMP")
  tools_lock node
  if ! node_ok "$dir"; then
    need npm "Node.js 18 or newer (with npm)"
    echo "tools.sh: installing $NODE_STAMP into $dir" >&2
    rm -rf "$dir" "$dir.tmp"
    mkdir -p "$dir.tmp"
    npm install --prefix "$dir.tmp" --no-audit --no-fund --loglevel=error \
      "@napi-rs/cli@$NAPI_CLI_VERSION" "mongodb@$NODE_MONGODB_VERSION" "mongoose@$MONGOOSE_VERSION" \
      "mongoose9@npm:mongoose@$MONGOOSE9_VERSION" "mongoose-sequence@$MONGOOSE_SEQUENCE_VERSION" \
      "express@$EXPRESS_VERSION" "typescript@$TYPESCRIPT_VERSION" >&2
    echo "$NODE_STAMP" >"$dir.tmp/.stamp"
    mv "$dir.tmp" "$dir"
  fi
  tools_unlock
  link_tool "$tools/node" "$dir"
fi
# --- end of the Node.js binding's tests

echo "tools.sh: tools ready in $tools/ ($(($(date +%s) - started)) s)" >&2
