#!/usr/bin/env bash
# Local MongoDB wire-protocol server for dispenser's tests and demos.
#
# It is mongo-java-server (from Maven Central), started by a small Java launcher
# (scripts/server/DispenserTestServer.java). It listens on 127.0.0.1 only.
# Needs Java 17+ (JDK) and Maven. Its jars and compiled launcher are made once per machine, in
# the tool cache every clone shares ($DISPENSER_TOOLS_CACHE, else ~/.cache/dispenser-tools:
# server-<hash of pom.xml and the launcher>/); a running server's files stay in scripts/.server/run.
#
#   export "$(scripts/server.sh start)"      # exports MONGODB_URI=mongodb://127.0.0.1:PORT/?directConnection=true
#   (`eval "$(scripts/server.sh start)"` would set it without exporting it: `dispenser` would not see it)
#   scripts/server.sh status
#   scripts/server.sh stop
#
# Only the URI line ever goes to stdout; all messages go to stderr.
set -euo pipefail

usage() {
    cat >&2 <<'EOF'
usage: scripts/server.sh COMMAND [OPTIONS]

commands:
  start   [--port N] [--backend memory|h2] [--data FILE] [--state DIR]
          start a server in the background; prints one line on stdout:
          MONGODB_URI=mongodb://127.0.0.1:PORT/?directConnection=true
  run     [--port N] [--backend memory|h2] [--data FILE] [--port-file FILE] [--state DIR]
          run the server in the foreground (exec java); it prints
          "listening 127.0.0.1:PORT" and writes PORT to --port-file when ready.
          With --state DIR its pid and port are recorded there (for stop/status).
  stop    [--state DIR]   SIGTERM the recorded server (SIGKILL after 15 s)
  status  [--state DIR]   print the URI line and exit 0 if running, else exit 1
  prepare                 only download the jars and compile the launcher

options:
  --port N          TCP port on 127.0.0.1; 0 picks a free port (default 0)
  --backend NAME    memory (default) or h2 (persistent MVStore file)
  --data FILE       H2 data file (default: <repo>/data/dispenser.h2)
  --port-file FILE  (run) file to write the bound port to, atomically
  --state DIR       pid/port/log files (default: $DISPENSER_SERVER_STATE,
                    else scripts/.server/run)

environment:
  DISPENSER_SERVER_STATE      default state dir
  DISPENSER_TOOLS_CACHE       where the jars and the launcher are kept (default
                              ${XDG_CACHE_HOME:-~/.cache}/dispenser-tools)
  DISPENSER_SERVER_JAVA_OPTS  JVM options (default: -Xms32m -Xmx1g -XX:+UseSerialGC -XX:TieredStopAtLevel=1)
  JAVA_HOME                   JDK to use (else java/javac from PATH)

exit codes: 0 ok (start: also when already running; it prints that one's URI),
            1 failure / still starting / not running (status),
            2 bad usage, 3 missing Java 17+ JDK or Maven
EOF
}

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd -P)"
SRC_DIR="$SCRIPT_DIR/server"
POM="$SRC_DIR/pom.xml"
JAVA_SRC="$SRC_DIR/DispenserTestServer.java"
MAIN_CLASS="DispenserTestServer"
# The jars and the launcher: one directory per version of pom.xml and the launcher's source,
# in the machine's tool cache, so that a fresh clone downloads and compiles nothing.
TOOLS_CACHE="${DISPENSER_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dispenser-tools}"
WORK_DIR="$TOOLS_CACHE/server-$(cat "$POM" "$JAVA_SRC" | sha256sum | cut -c1-12)"
RUN_DIR="$SCRIPT_DIR/.server/run"       # git-ignored
LIB_DIR="$WORK_DIR/lib"
CLASSES_DIR="$WORK_DIR/classes"
LIB_STAMP="$LIB_DIR/.complete"
CLASS_FILE="$CLASSES_DIR/$MAIN_CLASS.class"
DEFAULT_H2_FILE="$REPO_ROOT/data/dispenser.h2"
URI_PREFIX="mongodb://127.0.0.1:"
URI_SUFFIX="/?directConnection=true"
START_TIMEOUT=60
STOP_TIMEOUT=15

say() { printf 'server.sh: %s\n' "$*" >&2; }
die() { local code="$1"; shift; say "$*"; exit "$code"; }
bad_usage() { say "$*"; usage; exit 2; }

# ---------------------------------------------------------------- tools

JAVA="" JAVAC="" MVN=""

find_tool() { # name -> path or empty
    local name="$1"
    if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/$name" ]]; then
        printf '%s\n' "$JAVA_HOME/bin/$name"
    else
        command -v "$name" 2>/dev/null || true
    fi
}

# Prints the major version from `java -version` / `javac -version` output.
major_version() {
    local out ver
    out="$("$@" -version 2>&1 || true)"
    ver="$(printf '%s\n' "$out" | sed -n -E 's/.*(version "|javac )([0-9][0-9._]*).*/\2/p' | head -n 1)"
    case "$ver" in
        1.*) ver="${ver#1.}" ;;
    esac
    ver="${ver%%[._]*}"
    [[ "$ver" =~ ^[0-9]+$ ]] && printf '%s\n' "$ver" || printf '0\n'
}

# require_tools java [javac] [mvn]: one message and exit 3 if any is missing or too old.
require_tools() {
    local problems=() tool path v
    for tool in "$@"; do
        path="$(find_tool "$tool")"
        case "$tool" in
            java | javac)
                if [[ -z "$path" ]]; then
                    problems+=("$tool not found")
                else
                    v="$(major_version "$path")"
                    if ((v < 17)); then
                        problems+=("$tool at $path is version ${v/#0/unknown}, need 17+")
                    fi
                fi
                ;;
            mvn)
                [[ -n "$path" ]] || problems+=("mvn not found")
                ;;
        esac
        case "$tool" in
            java) JAVA="$path" ;;
            javac) JAVAC="$path" ;;
            mvn) MVN="$path" ;;
        esac
    done
    if ((${#problems[@]} > 0)); then
        local joined
        joined="$(printf '%s; ' "${problems[@]}")"
        die 3 "Java 17+ (JDK) and Maven are needed for the local test server (${joined%; }): apt-get install openjdk-17-jdk-headless maven"
    fi
}

# ---------------------------------------------------------------- prepare

pom_hash() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum <"$POM" | cut -d' ' -f1
    else
        cksum <"$POM" | tr ' ' '-'
    fi
}

libs_ok() { [[ -f "$LIB_STAMP" && "$(cat "$LIB_STAMP")" == "$(pom_hash)" ]]; }

# (WORK_DIR is named after the launcher's source: a class file there was compiled from it.)
classes_ok() {
    [[ -f "$CLASS_FILE" && ! "$LIB_STAMP" -nt "$CLASS_FILE" ]]
}

LOCK_FD=""
lock_work_dir() {
    mkdir -p "$WORK_DIR"
    if command -v flock >/dev/null 2>&1; then
        exec {LOCK_FD}>"$WORK_DIR/.lock"
        if ! flock -n "$LOCK_FD"; then
            say "waiting for another server.sh to finish preparing..."
            flock "$LOCK_FD"
        fi
    fi
}
unlock_work_dir() {
    # must be closed before starting java, or the server would hold the lock
    if [[ -n "$LOCK_FD" ]]; then
        exec {LOCK_FD}>&-
        LOCK_FD=""
    fi
}

# install_dir NEW LINK: point the symlink LINK at directory NEW atomically, then
# delete LINK's older targets. Servers being started by another server.sh at the
# same moment thus always see a complete lib/ and classes/ (running ones keep
# their jars open, and have loaded all their classes once listening).
install_dir() {
    local new="$1" link="$2" old
    if [[ -e "$link" && ! -L "$link" ]]; then
        rm -rf "$link" # a plain directory from an older version of this script
    fi
    ln -s "$(basename "$new")" "$link.new.$$"
    mv -T "$link.new.$$" "$link"
    for old in "$link".*; do
        [[ "$old" == "$new" || ! -d "$old" || -L "$old" ]] || rm -rf "$old"
    done
}

download_libs() {
    local tmp
    tmp="$WORK_DIR/lib.$(date +%s).$$"
    rm -rf "$tmp"
    say "downloading the mongo-java-server jars with Maven into $WORK_DIR..."
    # The project itself is never built: pom packaging, only the dependency plugin runs.
    # (Debian's Maven 3.8 prints stray ANSI codes even with -B: strip them.)
    local rc=0
    (cd "$SRC_DIR" && "$MVN" -q -B -Dstyle.color=never -f "$POM" \
        dependency:copy-dependencies -DoutputDirectory="$tmp" 2>&1) |
        sed -e $'s/\x1b\\[[0-9;]*m//g' -e '/^[[:space:]]*$/d' >&2 || rc=$?
    if ((rc != 0)); then
        rm -rf "$tmp"
        die 1 "Maven could not download the server jars (is Maven Central reachable? see the output above)"
    fi
    if ! compgen -G "$tmp/mongo-java-server-core-*.jar" >/dev/null; then
        rm -rf "$tmp"
        die 1 "Maven finished but mongo-java-server-core is missing from $tmp"
    fi
    pom_hash >"$tmp/.complete"
    install_dir "$tmp" "$LIB_DIR"
}

compile_launcher() {
    local tmp
    tmp="$WORK_DIR/classes.$(date +%s).$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    say "compiling $MAIN_CLASS..."
    if ! "$JAVAC" --release 17 -encoding UTF-8 -nowarn -cp "$LIB_DIR/*" -d "$tmp" "$JAVA_SRC" >&2; then
        rm -rf "$tmp"
        die 1 "javac failed on $JAVA_SRC"
    fi
    install_dir "$tmp" "$CLASSES_DIR"
}

# Make sure the jars are downloaded and the launcher is compiled.
prepare() {
    # only what is needed now: java to run; mvn/javac only to download/compile
    local needed=(java)
    libs_ok || needed+=(mvn)
    if ! libs_ok || ! classes_ok; then needed+=(javac); fi
    require_tools "${needed[@]}"
    if ! libs_ok || ! classes_ok; then
        lock_work_dir
        # re-check under the lock: another server.sh may have done it meanwhile
        libs_ok || download_libs
        classes_ok || compile_launcher
        unlock_work_dir
    fi
}

java_command() { # -> JAVA_CMD array (without the launcher's own arguments)
    local opts=()
    # split on whitespace (no globbing); set DISPENSER_SERVER_JAVA_OPTS="" for none
    read -r -a opts <<<"${DISPENSER_SERVER_JAVA_OPTS--Xms32m -Xmx1g -XX:+UseSerialGC -XX:TieredStopAtLevel=1}"
    JAVA_CMD=("$JAVA" ${opts[@]+"${opts[@]}"} -cp "$CLASSES_DIR:$LIB_DIR/*" "$MAIN_CLASS")
}

# ---------------------------------------------------------------- state

abs_path() { # make a path absolute (without requiring it to exist)
    local p="$1"
    [[ "$p" == /* ]] || p="$PWD/$p"
    if [[ -d "$p" ]]; then
        (cd "$p" && pwd -P)
    elif [[ -d "$(dirname "$p")" ]]; then
        printf '%s/%s\n' "$(cd "$(dirname "$p")" && pwd -P)" "$(basename "$p")"
    else
        printf '%s\n' "$p"
    fi
}

set_state_files() {
    STATE="$(abs_path "$STATE")"
    PID_FILE="$STATE/server.pid"
    STATE_PORT_FILE="$STATE/server.port"
    LOG_FILE="$STATE/server.log"
}

# Is PID a live DispenserTestServer started for this state dir?
is_our_server() {
    local pid="$1" cmdline
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    if [[ -r "/proc/$pid/cmdline" ]]; then
        cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
    else
        cmdline="$(ps -p "$pid" -o args= 2>/dev/null || true)"
    fi
    [[ "$cmdline" == *"$MAIN_CLASS"* && "$cmdline" == *"$STATE_PORT_FILE"* ]]
}

is_zombie() { # pid -> 0 if that process has exited but not been reaped
    [[ -r "/proc/$1/stat" ]] || return 1
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null || true)"
    stat="${stat##*) }"
    [[ "${stat%% *}" == Z ]]
}

recorded_pid() { # prints the recorded pid if that server is running
    local pid
    [[ -f "$PID_FILE" ]] || return 1
    pid="$(tr -dc '0-9' <"$PID_FILE" 2>/dev/null || true)"
    is_our_server "$pid" || return 1
    printf '%s\n' "$pid"
}

recorded_port() {
    local port
    [[ -f "$STATE_PORT_FILE" ]] || return 1
    port="$(tr -dc '0-9' <"$STATE_PORT_FILE" 2>/dev/null || true)"
    [[ -n "$port" ]] || return 1
    printf '%s\n' "$port"
}

write_atomically() { # file content
    local tmp="$1.tmp.$$"
    printf '%s\n' "$2" >"$tmp"
    mv -f "$tmp" "$1"
}

tcp_open() { # port -> 0 if something accepts connections on 127.0.0.1:port
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

print_uri() { printf 'MONGODB_URI=%s%s%s\n' "$URI_PREFIX" "$1" "$URI_SUFFIX"; }

# ---------------------------------------------------------------- options

PORT=0 BACKEND=memory DATA="" STATE="${DISPENSER_SERVER_STATE:-$RUN_DIR}" STATE_GIVEN=0 PORT_FILE=""

# parse_options "allowed option names" args...
parse_options() {
    local allowed="$1"
    shift
    local opt value
    while (($# > 0)); do
        opt="$1"
        value=""
        local has_value=0
        if [[ "$opt" == --*=* ]]; then
            value="${opt#*=}"
            opt="${opt%%=*}"
            has_value=1
        fi
        case "$opt" in
            -h | --help) usage; exit 0 ;;
        esac
        if [[ " $allowed " != *" $opt "* ]]; then
            bad_usage "unknown option for $COMMAND: $1"
        fi
        if ((!has_value)); then
            (($# >= 2)) || bad_usage "option $opt needs a value"
            value="$2"
            shift
        fi
        shift
        [[ -n "$value" ]] || bad_usage "option $opt needs a non-empty value"
        case "$opt" in
            --port)
                if ! [[ "$value" =~ ^[0-9]{1,5}$ ]] || ((10#$value > 65535)); then
                    bad_usage "--port must be a number from 0 to 65535, got: $value"
                fi
                PORT="$((10#$value))"
                ;;
            --backend)
                [[ "$value" == memory || "$value" == h2 ]] ||
                    bad_usage "--backend must be memory or h2, got: $value"
                BACKEND="$value"
                ;;
            --data) DATA="$value" ;;
            --state) STATE="$value" STATE_GIVEN=1 ;;
            --port-file) PORT_FILE="$value" ;;
        esac
    done
    if [[ -n "$DATA" && "$BACKEND" != h2 ]]; then
        bad_usage "--data only applies to --backend h2"
    fi
    if [[ "$BACKEND" == h2 ]]; then
        DATA="$(abs_path "${DATA:-$DEFAULT_H2_FILE}")"
        mkdir -p "$(dirname "$DATA")"
    fi
}

server_args() { # -> SERVER_ARGS array
    SERVER_ARGS=(--port "$PORT" --backend "$BACKEND")
    [[ "$BACKEND" != h2 ]] || SERVER_ARGS+=(--data "$DATA")
}

# ---------------------------------------------------------------- commands

cmd_prepare() {
    prepare
    say "ready: jars in $LIB_DIR, launcher in $CLASSES_DIR"
}

cmd_start() {
    parse_options "--port --backend --data --state" "$@"
    prepare
    set_state_files
    mkdir -p "$STATE"
    set_state_files # canonical path now that the dir exists
    local pid
    if pid="$(recorded_pid)"; then
        local port
        if port="$(recorded_port)" && tcp_open "$port"; then
            # Already running: say so, and print its URI so that `export "$(... start)"`
            # still sets MONGODB_URI.
            say "already running: pid $pid on 127.0.0.1:$port, state $STATE (stop: $0 stop --state $STATE)"
            print_uri "$port"
            return 0
        fi
        die 1 "a server is starting for state dir $STATE (pid $pid) but not listening yet; run: $0 status --state $STATE"
    fi
    rm -f "$PID_FILE" "$STATE_PORT_FILE"

    java_command
    server_args
    cd "$STATE" # do not keep the caller's directory busy
    printf '=== %s: starting %s backend%s\n' "$(date '+%Y-%m-%dT%H:%M:%S%z')" "$BACKEND" \
        "${DATA:+ ($DATA)}" >>"$LOG_FILE"
    local log_offset
    log_offset="$(wc -c <"$LOG_FILE")"
    nohup "${JAVA_CMD[@]}" "${SERVER_ARGS[@]}" --port-file "$STATE_PORT_FILE" \
        >>"$LOG_FILE" 2>&1 </dev/null &
    pid=$!
    write_atomically "$PID_FILE" "$pid"

    # If we are interrupted while waiting, do not leave a half-started server behind.
    trap 'kill -TERM "$pid" 2>/dev/null || true; rm -f "$PID_FILE"; exit 130' INT TERM HUP

    local deadline=$((SECONDS + START_TIMEOUT)) port=""
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$PID_FILE"
            say "the server exited during startup; output in $LOG_FILE:"
            tail -c +"$((log_offset + 1))" "$LOG_FILE" | tail -n 20 >&2 || true
            exit 1
        fi
        if port="$(recorded_port)" && tcp_open "$port"; then
            break
        fi
        if ((SECONDS >= deadline)); then
            kill -TERM "$pid" 2>/dev/null || true
            rm -f "$PID_FILE"
            say "the server did not start listening within ${START_TIMEOUT}s; output in $LOG_FILE:"
            tail -c +"$((log_offset + 1))" "$LOG_FILE" | tail -n 20 >&2 || true
            exit 1
        fi
        sleep 0.2
    done
    trap - INT TERM HUP
    say "started $BACKEND server (pid $pid) on 127.0.0.1:$port${DATA:+, data $DATA}; log: $LOG_FILE"
    print_uri "$port"
}

cmd_run() {
    parse_options "--port --backend --data --state --port-file" "$@"
    prepare
    java_command
    server_args
    if ((STATE_GIVEN)); then
        # the launcher takes one port file, and with --state it is the state dir's
        [[ -z "$PORT_FILE" ]] || bad_usage "run: use either --state or --port-file, not both"
        # record this process (exec keeps the pid) so that stop/status work
        set_state_files
        mkdir -p "$STATE"
        set_state_files
        local pid
        if pid="$(recorded_pid)"; then
            die 1 "a server is already running for state dir $STATE (pid $pid)"
        fi
        rm -f "$STATE_PORT_FILE"
        write_atomically "$PID_FILE" "$$"
        SERVER_ARGS+=(--port-file "$STATE_PORT_FILE")
    elif [[ -n "$PORT_FILE" ]]; then
        PORT_FILE="$(abs_path "$PORT_FILE")"
        SERVER_ARGS+=(--port-file "$PORT_FILE")
    fi
    exec "${JAVA_CMD[@]}" "${SERVER_ARGS[@]}"
}

cmd_stop() {
    parse_options "--state" "$@"
    set_state_files
    local pid
    if ! pid="$(recorded_pid)"; then
        if [[ -f "$PID_FILE" ]]; then
            rm -f "$PID_FILE" "$STATE_PORT_FILE"
            say "not running (removed stale pid file in $STATE)"
        else
            say "not running (no server recorded in $STATE)"
        fi
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while is_our_server "$pid"; do
        if ((SECONDS >= deadline)); then
            say "pid $pid did not exit within ${STOP_TIMEOUT}s after SIGTERM; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            local _
            for _ in 1 2 3 4 5 6 7 8 9 10; do
                is_our_server "$pid" || break
                sleep 0.2
            done
            break
        fi
        sleep 0.1
    done
    # The server was orphaned when `start` returned, so its parent is init; it stays a zombie
    # until init reaps it. Return only once it is gone, so no <defunct> java is left behind.
    local _
    for _ in $(seq 50); do
        is_zombie "$pid" || break
        sleep 0.1
    done
    is_zombie "$pid" && say "pid $pid exited but its parent (pid 1) has not reaped it yet"
    rm -f "$PID_FILE" "$STATE_PORT_FILE"
    say "stopped server (pid $pid)"
}

cmd_status() {
    parse_options "--state" "$@"
    set_state_files
    local pid port
    if pid="$(recorded_pid)" && port="$(recorded_port)"; then
        say "running: pid $pid, 127.0.0.1:$port, state $STATE"
        print_uri "$port"
        return 0
    fi
    if [[ -n "${pid:-}" ]]; then
        say "not running (pid $pid is starting but not listening yet)"
    else
        say "not running"
    fi
    return 1
}

COMMAND="${1:-}"
(($# > 0)) && shift
case "$COMMAND" in
    start) cmd_start "$@" ;;
    run) cmd_run "$@" ;;
    stop) cmd_stop "$@" ;;
    status) cmd_status "$@" ;;
    prepare)
        (($# == 0)) || bad_usage "prepare takes no options"
        cmd_prepare
        ;;
    -h | --help | help) usage ;;
    "") bad_usage "missing command" ;;
    *) bad_usage "unknown command: $COMMAND" ;;
esac
