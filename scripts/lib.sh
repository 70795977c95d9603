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
