#!/usr/bin/env bash
# Installs the non-Rust tools the tests drive into .tools/ (gitignored), once:
#   .tools/npm/node_modules/.bin/mongosh   (npm: mongosh)
#   .tools/venv/bin/python                 (PyPI: pymongo, openapi-spec-validator, prometheus_client)
#   .tools/venv/bin/st                     (PyPI: schemathesis, which tests `serve` from its OpenAPI)
#   .tools/faketime/libfaketimeMT.so.1     (Debian: libfaketime; the gap-free tests run CLI
#                                           holders with a clock an hour off through LD_PRELOAD)
#   .tools/ferretdb/bin/ferretdb           (Go module proxy: FerretDB 1.24.2, scripts/ferretdb.sh)
#   chromium + chromedriver                (Debian: chromium, chromium-driver) and Selenium (PyPI,
#                                           into .tools/venv): the browser tests of serve's pages
# Idempotent and cached: a stamp file in each directory records its pinned versions; when it
# matches, nothing is downloaded. Needs node/npm (>= 18), python3 (>= 3.9, with venv), Go (>= 1.24),
# apt-get (Chromium, when missing: as root, else through sudo) and, unless libfaketime is installed
# already, dpkg-deb (`apt-get download` needs no root: the package is unpacked into .tools/, never
# installed). Prints the time taken.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MONGOSH_VERSION=2.12.0
PYMONGO_VERSION=4.20.0
VALIDATOR_VERSION=0.9.0
PROMETHEUS_CLIENT_VERSION=0.26.0
SCHEMATHESIS_VERSION=4.32.5
# One stamp per directory, so that bumping a Python package does not reinstall mongosh.
NPM_STAMP="mongosh=$MONGOSH_VERSION"
VENV_STAMP="pymongo=$PYMONGO_VERSION openapi-spec-validator=$VALIDATOR_VERSION prometheus_client=$PROMETHEUS_CLIENT_VERSION schemathesis=$SCHEMATHESIS_VERSION"
FAKETIME_VERSION=0.9.10

tools=.tools
started=$(date +%s)

need() {
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "tools.sh: $1 not found: install $2" >&2
    exit 3
  fi
}

if [ "$(cat "$tools/npm/.stamp" 2>/dev/null)" != "$NPM_STAMP" ] \
  || [ ! -x "$tools/npm/node_modules/.bin/mongosh" ]; then
  need npm "Node.js 18 or newer (with npm)"
  echo "tools.sh: installing mongosh $MONGOSH_VERSION into $tools/npm" >&2
  mkdir -p "$tools/npm"
  npm install --prefix "$tools/npm" --no-audit --no-fund --loglevel=error \
    "mongosh@$MONGOSH_VERSION" >&2
  echo "$NPM_STAMP" >"$tools/npm/.stamp"
fi

if [ "$(cat "$tools/venv/.stamp" 2>/dev/null)" != "$VENV_STAMP" ] \
  || [ ! -x "$tools/venv/bin/python" ]; then
  need python3 "Python 3.9 or newer (with the venv module)"
  echo "tools.sh: creating $tools/venv with pymongo $PYMONGO_VERSION, openapi-spec-validator $VALIDATOR_VERSION, prometheus_client $PROMETHEUS_CLIENT_VERSION, schemathesis $SCHEMATHESIS_VERSION" >&2
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "pymongo==$PYMONGO_VERSION" "openapi-spec-validator==$VALIDATOR_VERSION" \
    "prometheus_client==$PROMETHEUS_CLIENT_VERSION" "schemathesis==$SCHEMATHESIS_VERSION" >&2
  echo "$VENV_STAMP" >"$tools/venv/.stamp"
fi

# --- FerretDB 1.24.2 (SQLite), a server that loses concurrent updates: the suite asserts that
# `dispenser doctor` refuses it. Built from the Go module proxy by scripts/ferretdb.sh into
# .tools/ferretdb/bin/ferretdb (needs Go 1.24+; about 1.5-3 minutes cold, cached after).
scripts/ferretdb.sh install
# --- end of FerretDB

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

# --- Chromium and Selenium: the browser tests of the pages `dispenser serve` serves
# (tests/integration/ui.rs). Debian's chromium and chromium-driver from apt when missing (about
# 20 s; as root, else through sudo), and Selenium from PyPI into the venv, with a stamp of its own.
SELENIUM_VERSION=4.51.0
SELENIUM_STAMP="selenium=$SELENIUM_VERSION"
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  need apt-get "Chromium and its WebDriver (Debian/Ubuntu: apt-get install chromium chromium-driver)"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    need sudo "root rights to apt-get install chromium chromium-driver"
    sudo="sudo"
  fi
  echo "tools.sh: installing chromium and chromium-driver (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! $sudo apt-get install -y -q chromium chromium-driver >&2; then
    $sudo apt-get update -q >&2
    $sudo apt-get install -y -q chromium chromium-driver >&2
  fi
fi
if [ "$(cat "$tools/venv/.selenium-stamp" 2>/dev/null)" != "$SELENIUM_STAMP" ]; then
  echo "tools.sh: installing selenium $SELENIUM_VERSION into $tools/venv" >&2
  "$tools/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "selenium==$SELENIUM_VERSION" >&2
  echo "$SELENIUM_STAMP" >"$tools/venv/.selenium-stamp"
fi
# --- end of Chromium and Selenium

echo "tools.sh: tools ready in $tools/ ($(($(date +%s) - started)) s)" >&2
