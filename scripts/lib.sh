# Shared by scripts/test.sh and scripts/demo.sh (source it; it defines functions only).

# require_cargo NAME: one clear message when Rust is missing.
require_cargo() {
  if ! command -v cargo >/dev/null 2>&1; then
    echo "$1: cargo not found: install Rust (stable) from https://rustup.rs" >&2
    exit 3
  fi
}

# with_local_server NAME [server.sh start options...] -- COMMAND...
# Runs COMMAND with MONGODB_URI set. When MONGODB_URI is already set, COMMAND runs against it;
# otherwise a local server is started with the given options and always stopped afterwards.
# Returns COMMAND's exit status.
with_local_server() {
  local name=$1
  shift
  local opts=()
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
    opts+=("$1")
    shift
  done
  shift
  if [ -n "${MONGODB_URI:-}" ]; then
    echo "$name: using the server in MONGODB_URI" >&2
    "$@"
    return
  fi
  local state line status=0
  state=$(mktemp -d "${TMPDIR:-/tmp}/dispenser-$name.XXXXXX")
  # shellcheck disable=SC2064 # expand $state now
  trap "scripts/server.sh stop --state '$state' >/dev/null 2>&1 || true; rm -rf '$state'" EXIT
  line=$(scripts/server.sh start "${opts[@]}" --state "$state")
  export MONGODB_URI="${line#MONGODB_URI=}"
  echo "$name: local server at $MONGODB_URI" >&2
  "$@" || status=$?
  return "$status"
}

# The tools the tests drive (mongosh, the Python venv, libfaketime, FerretDB, the test server's
# jars) are installed once per machine into a cache that every clone shares, one directory per
# tool and pinned versions: $DISPENSER_TOOLS_CACHE, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/dispenser-tools. A clone's .tools/NAME links into it, so a
# fresh clone installs nothing and a version bump installs beside the old one.
tools_cache_root() {
  printf '%s\n' "${DISPENSER_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dispenser-tools}"
}

# tools_cache_dir NAME KEY: the cache directory of tool NAME for KEY (its pinned versions).
tools_cache_dir() {
  local hash
  hash=$(printf '%s' "$2" | sha256sum | cut -c1-12)
  printf '%s/%s-%s\n' "$(tools_cache_root)" "$1" "$hash"
}

# tools_lock NAME: waits for, then holds, the cache's lock of NAME (until tools_unlock or the
# end of the shell), so clones installing the same tool at once take turns.
TOOLS_LOCK_FD=""
tools_lock() {
  local root
  root=$(tools_cache_root)
  mkdir -p "$root"
  if command -v flock >/dev/null 2>&1; then
    exec {TOOLS_LOCK_FD}>"$root/.lock-$1"
    flock "$TOOLS_LOCK_FD"
  fi
}
tools_unlock() {
  if [ -n "$TOOLS_LOCK_FD" ]; then
    exec {TOOLS_LOCK_FD}>&-
    TOOLS_LOCK_FD=""
  fi
}

# link_tool LINK DIR: makes LINK (.tools/NAME) a symbolic link to DIR, replacing what was there.
# The new link is renamed over the old one, so that a process using LINK meanwhile (another
# install of the same tool finishing at once) never finds it missing.
link_tool() {
  mkdir -p "$(dirname "$1")"
  if [ -e "$1" ] && [ ! -L "$1" ]; then
    rm -rf "$1"
  fi
  ln -sfn "$2" "$1.link.$$"
  mv -Tf "$1.link.$$" "$1"
}
