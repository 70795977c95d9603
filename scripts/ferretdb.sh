#!/usr/bin/env bash
# FerretDB 1.24.2 with its SQLite backend: a MongoDB-compatible server that LOSES CONCURRENT
# UPDATES (FerretDB issue #3040). The suite runs `dispenser doctor` against it and asserts that it
# is refused, naming the lost updates; the README's compatibility table quotes what doctor measured.
#
#   scripts/ferretdb.sh install            build it once per machine into the tool cache and
#                                          link it as .tools/ferretdb/bin/ferretdb
#   scripts/ferretdb.sh run --port N --dir DIR
#                                          run it in the foreground (exec) on 127.0.0.1:N,
#                                          its SQLite files and state in DIR
#   export "$(scripts/ferretdb.sh start)"  start one in the background on a free port; prints
#                                          MONGODB_URI=mongodb://127.0.0.1:PORT/
#   scripts/ferretdb.sh stop               stop it (state in .tools/ferretdb-run, or --state DIR)
#
# The build comes from the Go module proxy (needs Go 1.24+ on PATH): in a scratch module,
# `go get -tool github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.2`; the served module lacks
# build/version/version.txt (the binary panics at start without it), so ./cmd/ferretdb is built
# from a writable copy of the module directory with that file holding the version. About 45 s
# cold on 2 cores (most of it compiling the pure-Go SQLite), once per machine: the binary goes to
# the tool cache shared by every clone (scripts/lib.sh: ~/.cache/dispenser-tools), with a stamp
# holding the version and the build flags, and .tools/ferretdb links to it, so a fresh clone builds nothing.
# Only the URI line goes to stdout. Exit: 0 ok, 1 failure, 2 usage, 3 Go missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
. scripts/lib.sh

VERSION=v1.24.2
# Only the SQLite backend (the tag leaves PostgreSQL's driver out), compiled without inlining:
# 80 s of CPU on a brand-new machine instead of 143 s; doctor's three runs in its test then
# take about 4 s more of FerretDB's CPU. STAMP names both, so a build made otherwise is redone.
BUILD_FLAGS=(-tags ferretdb_no_postgresql -gcflags=all=-l)
STAMP="ferretdb=$VERSION ${BUILD_FLAGS[*]}"
MODULE=github.com/FerretDB/FerretDB
home=$repo/.tools/ferretdb
bin=$home/bin/ferretdb

say() { printf 'ferretdb.sh: %s\n' "$*" >&2; }
die() {
  local code=$1
  shift
  say "$*"
  exit "$code"
}

# built_in DIR: DIR holds this version's binary.
built_in() { [ -x "$1/bin/ferretdb" ] && [ "$(cat "$1/.stamp" 2>/dev/null)" = "$STAMP" ]; }
installed() { built_in "$home"; }

install() {
  installed && return 0
  local cache
  cache=$(tools_cache_dir ferretdb "$STAMP")
  tools_lock ferretdb
  built_in "$cache" || build "$cache"
  tools_unlock
  link_tool "$home" "$cache"
}

# build DIR: builds this version into DIR/bin/ferretdb and stamps DIR.
build() {
  command -v go >/dev/null 2>&1 || die 3 "go not found: install Go 1.24 or newer (https://go.dev/dl/)"
  local started work dir home=$1
  local bin=$home/bin/ferretdb
  started=$(date +%s)
  say "building FerretDB $VERSION from the Go module proxy into $bin (about a minute the first time)"
  work=$(mktemp -d "${TMPDIR:-/tmp}/dispenser-ferretdb.XXXXXX")
  # shellcheck disable=SC2064 # expand $work now
  trap "chmod -R u+w '$work' 2>/dev/null; rm -rf '$work'" EXIT
  # Go's defaults for its caches (shared, so a fresh clone rebuilds in seconds); local
  # toolchain only (no toolchain download); module files writable so they can be copied.
  export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -modcacherw"
  (
    cd "$work"
    go mod init dispenser.invalid/ferretdb-build >/dev/null 2>&1
    go get -tool "$MODULE/cmd/ferretdb@$VERSION" >&2
    dir=$(go list -m -f '{{.Dir}}' "$MODULE")
    cp -R "$dir" "$work/src"
    chmod -R u+w "$work/src"
    echo "$VERSION" >"$work/src/build/version/version.txt"
    cd "$work/src"
    mkdir -p "$home/bin"
    go build "${BUILD_FLAGS[@]}" -trimpath -ldflags='-s -w' -o "$bin.tmp" ./cmd/ferretdb >&2
  ) || die 1 "building FerretDB $VERSION failed (see above; is the Go module proxy reachable?)"
  mv -f "$bin.tmp" "$bin"
  echo "$STAMP" >"$home/.stamp"
  say "FerretDB $VERSION ready in $(($(date +%s) - started)) s"
}

# run PORT DIR: exec the server in the foreground.
run() {
  local port=$1 dir=$2
  mkdir -p "$dir/data" "$dir/state"
  exec "$bin" --handler=sqlite --sqlite-url="file:$dir/data/" \
    --listen-addr="127.0.0.1:$port" --debug-addr=- --state-dir="$dir/state" \
    --telemetry=disable --log-level=error
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

usage() {
  sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

command=${1:-}
[ -n "$command" ] || usage
shift
port="" dir="" state=$repo/.tools/ferretdb-run
while [ "$#" -gt 0 ]; do
  case "$1" in
    --port) port=${2:-} && shift 2 || usage ;;
    --dir) dir=${2:-} && shift 2 || usage ;;
    --state) state=${2:-} && shift 2 || usage ;;
    *) say "unknown option: $1" && usage ;;
  esac
done

case "$command" in
  install) install ;;
  run)
    [[ "$port" =~ ^[0-9]+$ ]] || die 2 "run needs --port N"
    [ -n "$dir" ] || die 2 "run needs --dir DIR"
    installed || die 1 "FerretDB is not built: run scripts/ferretdb.sh install (or scripts/tools.sh)"
    run "$port" "$dir"
    ;;
  start)
    install
    mkdir -p "$state"
    if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
      say "already running (pid $(cat "$state/pid")); stop: $0 stop --state $state"
      echo "MONGODB_URI=mongodb://127.0.0.1:$(cat "$state/port")/"
      exit 0
    fi
    port=${port:-$(free_port)}
    "$0" run --port "$port" --dir "$state" >"$state/log" 2>&1 &
    echo $! >"$state/pid"
    echo "$port" >"$state/port"
    for _ in $(seq 1 100); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        say "FerretDB $VERSION (SQLite) on 127.0.0.1:$port, pid $(cat "$state/pid"); stop: $0 stop --state $state"
        echo "MONGODB_URI=mongodb://127.0.0.1:$port/"
        exit 0
      fi
      kill -0 "$(cat "$state/pid")" 2>/dev/null || die 1 "FerretDB exited at start: $(tail -n 3 "$state/log")"
      sleep 0.1
    done
    die 1 "FerretDB did not listen on 127.0.0.1:$port within 10 s (log: $state/log)"
    ;;
  stop)
    if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
      kill "$(cat "$state/pid")"
      say "stopped pid $(cat "$state/pid")"
    else
      say "not running"
    fi
    rm -f "$state/pid" "$state/port"
    ;;
  *) say "unknown command: $command" && usage ;;
esac
