#!/usr/bin/env bash
# Two kinds of mutation testing.
#
# 1. Known bugs put back, one at a time, and how often the model test catches each: the
#    sensitivity of `tests/integration/model/` (its docs keep the table). Each mutation is an
#    exact text replacement in one source file; the file is restored afterwards, whatever
#    happens. Runs against the local server (scripts/test.sh starts one per run).
#
#   scripts/mutants.sh [--seeds N] [NAME...]    # default: 20 seeds, every mutation
#   scripts/mutants.sh --baseline [--seeds N]   # no mutation: every run must pass
#   scripts/mutants.sh --list
#
#    Prints one line per mutation: NAME caught K/N (and the seeds it missed). Exit 0 when every
#    mutation was caught at least 19 times in 20 (scaled to N), else 1.
#
# 2. Generated mutants of the write path (cargo-mutants, from crates.io:
#    `cargo install --locked cargo-mutants`), per file, each against the tests that exercise
#    that file: first the library's unit tests (`--lib`: a small build per mutant), then, for
#    the mutants those missed, the integration tests named for the file (against a local
#    server it starts, or MONGODB_URI; the model tests soak 5 s).
#
#   scripts/mutants.sh --generated [--sample N] [--iterate] [FILE...]
#   scripts/mutants.sh --generated --list       # the files and their test filters
#
#    --sample N: test one in N of the file's mutants (cargo-mutants' shard 0/N, spread over
#    the file), in both stages, for an estimate a session can afford. --iterate: keep
#    the results of the previous run of each file and test only what it missed (after
#    adding a test); its timeouts stay counted as caught. Runs at nice 15, one job at a time, with build and test timeouts; results
#    in target/mutants/<file>/ (cargo-mutants' mutants.out, the unit-test stage's outcomes in
#    lib/, summary.txt). Prints per file: caught / missed / timeout / unviable, and the missed
#    mutants. Exit 0 when each file has at least 90 % of the viable mutants it tested caught (a
#    timeout counts as caught: the tests hung), else 1. The survivors that are equivalent, and
#    how long a run takes, are in .github/CONTRIBUTING.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# file | unit-test filter (empty: every unit test) | integration-test filters and skips
#   [| the variable holding a regular expression on cargo-mutants' names: the functions mutated
#      (none: every function)]
MODEL=model::random_interleavings_of_draws_and_admin_operations_never_duplicate_within_an_era
SLOW="--skip thirty_two_tasks"
# The functions of queue/state.rs that decide or make a write: take, call, recall, finish,
# cancel, alter (check, apply, check_remap, first_remapped), the daily roll and restart, the
# record of what is done (mark_done, absorb) and the spill filter. The rest read.
QUEUE_WRITES=' in (State::(check|apply|check_remap|roll|restart|mark_done|absorb)|first_remapped|SpillFilter::|filter_bits)\b'
GENERATED=$(cat <<EOF
src/arith.rs||core:: hardening:: $SLOW
src/document.rs||core:: hardening:: $SLOW
src/store.rs||core:: hardening:: coalesce:: blocks::a_tail_given_back history::the_historys_indexes $MODEL $SLOW
src/strategy.rs||core:: hardening:: coalesce:: $MODEL $SLOW
src/coalesce.rs||coalesce:: core:: $MODEL $SLOW
src/block/state.rs||blocks::
src/block/reservation.rs||blocks:: $MODEL
src/gapless/issue.rs||gapless:: gapless_model::
src/gapless/lease.rs||gapless:: gapless_model::
src/gapless/void.rs||gapless:: gapless_model::
src/queue/state.rs|queue::|queue:: queue_desks:: queue_edges:: queue_batch::|QUEUE_WRITES
src/queue/combine.rs|queue::|queue:: queue_desks:: queue_edges:: queue_batch::
src/queue/store.rs|queue::store::|queue:: queue_delete:: queue_edges:: queue_batch:: hardening::a_ticket_is_stamped_with_the_servers_time scale::queues_have_series_and_a_wait_histogram
EOF
)

if [ "${1:-}" = "--generated" ]; then
  shift
  sample="" iterate=0 files=()
  while [ "$#" -gt 0 ]; do
    case "$1" in
      --list)
        echo "$GENERATED" | awk -F'|' '{ printf "%-26s --lib %s, then --test integration %s%s\n", $1, ($2 == "" ? "(every unit test)" : $2), $3, ($4 == "" ? "" : "; only the functions in " $4) }'
        exit 0
        ;;
      --sample) sample=$2; shift 2 ;;
      --iterate) iterate=1; shift ;;
      *) files+=("$1"); shift ;;
    esac
  done
  . scripts/lib.sh
  command -v cargo-mutants >/dev/null 2>&1 || {
    echo "mutants.sh: cargo-mutants not found: cargo install --locked cargo-mutants" >&2
    exit 3
  }
  # Mutants are built in a copy of the tree (.tools, which the gap-free tests need, included),
  # in a target directory of their own that keeps the dependencies between runs; without debug
  # info (nothing reads it). The model tests soak 5 s.
  export CARGO_TARGET_DIR="${DISPENSER_MUTANTS_TARGET:-$PWD/target/mutants/target}"
  export CARGO_PROFILE_DEV_DEBUG=0 INSTA_UPDATE=no DISPENSER_SOAK_SECS=5
  # mutate OUT TIMEOUT CARGO_ARG [cargo-mutants options] -- [cargo test arguments]
  mutate() {
    local out=$1 timeout=$2 arg=$3
    shift 3
    nice -n 15 cargo mutants --file "$file" --output "$out" --jobs 1 --baseline skip \
      --gitignore false --timeout "$timeout" --build-timeout 1200 --cargo-arg="$arg" "$@" >&2 || true
  }
  count() { if [ -f "$1" ]; then grep -c . "$1" || true; else echo 0; fi; }
  run_generated() {
    local all_ok=1 file lib integration out started
    while IFS='|' read -r file lib integration only; do
      [ -n "$file" ] || continue
      if [ "${#files[@]}" -gt 0 ] && [[ ! " ${files[*]} " == *" $file "* ]]; then
        continue
      fi
      out=target/mutants/$(echo "${file#src/}" | tr '/' '_')
      started=$(date +%s)
      local again=() pick=()
      [ -z "$sample" ] || pick=(--shard "0/$sample")
      [ -z "$only" ] || pick+=(--re "${!only}")
      if [ "$iterate" = 1 ] && [ -d "$out/mutants.out" ]; then
        # Test again exactly what the last run missed. Its timeouts (the tests hung: caught)
        # are kept, not waited for again.
        again=(--iterate)
        cat "$out/mutants.out/timeout.txt" "$out/timeouts-kept.txt" 2>/dev/null | sort -u >"$out/kept.new" || true
        mv "$out/kept.new" "$out/timeouts-kept.txt"
        exactly pick "$out/mutants.out/missed.txt"
      else
        rm -rf "$out"
      fi
      mkdir -p "$out/lib"
      # The unit tests first: a mutant they catch needs no integration build.
      mutate "$out" 120 --lib "${again[@]}" "${pick[@]}" -- -- ${lib:+"$lib"}
      for f in caught missed timeout unviable previously_caught; do
        cp "$out/mutants.out/$f.txt" "$out/lib/$f.txt" 2>/dev/null || : >"$out/lib/$f.txt"
      done
      keep_unviable "$out"
      if [ -n "$integration" ] && [ $(($(count "$out/lib/missed.txt") + $(count "$out/lib/timeout.txt"))) -gt 0 ]; then
        # Then the integration tests, for exactly what the unit tests left.
        exactly pick "$out/lib/missed.txt" "$out/lib/timeout.txt"
        # shellcheck disable=SC2086 # the filters are words
        # (they are the command line's crate's: dispenser-cli runs them for the core's mutants).
        mutate "$out" 180 --test=integration --test-package=dispenser-cli --iterate "${pick[@]}" -- -- $integration
        touch "$out/integration-stage"
        keep_unviable "$out"
      else
        rm -f "$out/integration-stage"
      fi
      summarize "$file" "$out" "$(($(date +%s) - started))" | tee "$out/summary.txt"
      grep -q '^below' "$out/summary.txt" && all_ok=0
    done <<<"$GENERATED"
    [ "$all_ok" = 1 ]
  }
  # exactly ARRAY FILE...: sets ARRAY to cargo-mutants options selecting exactly the mutants
  # named in FILEs (none: a pattern nothing matches).
  exactly() {
    local -n into=$1
    shift
    into=()
    while read -r name; do
      [ -n "$name" ] || continue
      into+=(--re "$(python3 -c 'import re, sys; print("^" + re.escape(sys.argv[1]) + "$")' "$name")")
    done < <(cat "$@" 2>/dev/null)
    [ "${#into[@]}" -gt 0 ] || into=(--re '^$')
  }
  # keep_unviable OUT: the unviable mutants of every stage and run so far, in OUT/unviable.txt
  # (a later run with --iterate counts them among the "previously caught").
  keep_unviable() {
    cat "$1/unviable.txt" "$1/mutants.out/unviable.txt" 2>/dev/null | sort -u >"$1/unviable.new" || true
    mv "$1/unviable.new" "$1/unviable.txt"
  }
  # summarize FILE OUT SECONDS: the file's figures from both stages.
  summarize() {
    local file=$1 out=$2 secs=$3 m=$2/mutants.out l=$2/lib
    local unviable caught missed timeout tested viable left
    # Every mutant is in exactly one of these at the end: caught or unviable by a stage (or a
    # run before, with --iterate), or missed / timed out by the last stage that tested it.
    unviable=$(count "$out/unviable.txt")
    if [ -f "$out/integration-stage" ]; then
      # The integration stage ran: its missed and timeouts are what is left.
      left=$m/missed.txt
      missed=$(count "$m/missed.txt")
      timeout=$(count "$m/timeout.txt")
      tested=$(($(count "$m/caught.txt") + missed + timeout))
    else
      left=$l/missed.txt
      missed=$(count "$l/missed.txt")
      timeout=$(count "$l/timeout.txt")
      tested=0
    fi
    # Timeouts of the runs before an --iterate, not tested again.
    timeout=$((timeout + $(count "$out/timeouts-kept.txt")))
    caught=$(cat "$l/caught.txt" "$l/previously_caught.txt" "$m/caught.txt" 2>/dev/null \
      | sort -u | grep -v -x -F -f <(cat "$out/unviable.txt"; echo '§') | grep -c . || true)
    viable=$((caught + missed + timeout))
    local untested=$(($(count "$l/missed.txt") + $(count "$l/timeout.txt") - tested))
    [ "$tested" -gt 0 ] || untested=0
    printf '%s: caught %s, missed %s, timeout %s, unviable %s' "$file" "$caught" "$missed" "$timeout" "$unviable"
    if [ "$untested" -gt 0 ]; then
      printf ' (+ %s the unit tests missed, not in the sample)' "$untested"
    fi
    if [ "$viable" -gt 0 ]; then
      printf '; %s %% of %s viable caught or timed out' "$(((caught + timeout) * 100 / viable))" "$viable"
    fi
    printf '; %s s\n' "$secs"
    sed 's/^/    missed: /' "$left" 2>/dev/null || true
    if [ "$viable" -gt 0 ] && [ $(((caught + timeout) * 10)) -lt $((viable * 9)) ]; then
      echo "below 90 %"
    fi
  }
  with_local_server mutants --backend memory -- run_generated
  exit
fi

# name | file | text | replacement [| test]  (Python string literals; `|` inside them as \x7c;
# the test defaults to the model test below)
MUTANTS=$(cat <<'EOF'
incarnation|src/store.rs|"Some(t) => doc! { field::ID: name, field::VERSION: stamp.version, field::INCARNATION: t },"|"Some(_t) => doc! { field::ID: name, field::VERSION: stamp.version },"
sign|src/alter.rs|"if spec.step.signum() != old.step.signum() {"|"if false && spec.step.signum() != old.step.signum() {"
cycle|src/alter.rs|"if spec.cycle && !old.cycle && !change.force {"|"if false && spec.cycle && !old.cycle && !change.force {"
forced|src/alter.rs|"        value\n    };\n    debug_assert!"|"        if beyond { if spec.step > 0 { spec.max } else { spec.min } } else { value }\n    };\n    debug_assert!"
residue|src/arith.rs|"pub(crate) fn advance_value(step: i64, value: i64, n: i64) -> i64 {\n"|"pub(crate) fn advance_value(step: i64, value: i64, n: i64) -> i64 {\n    if step != 0 { return n; }\n"
layout|src/dispenser.rs|"(Some(have), Some(want)) => have != want,"|"(Some(_), Some(_)) => false,"
start|src/dispenser.rs|"let start_differs = check_start &&"|"let start_differs = false && check_start &&"
names|src/spec.rs|"if name.contains('~') {"|"if false && name.contains('~') {"
scope|src/scope.rs|"if is_date_key(key) && key >= today {"|"if false && is_date_key(key) && key >= today {"
desks|src/queue/state.rs|"            .chain(self.desks.iter().map(\x7cd\x7c d.serial))\n            .min()"|"            .chain(self.calls.iter().find(\x7cc\x7c !c.recall).map(\x7cc\x7c c.serial))\n            .min()"|queue_desks::seeded_model_of_desks_recalls_cancels_given_calls_alters_and_retried_takes
newday|src/queue/state.rs|"(self.oldest_held(), self.newest_held()) {"|"(self.oldest_held(), Some(self.taken)) {"|queue_edges::seeded_model_of_queues_across_days_zones_clocks_ranges_and_colliding_request_ids
caller|src/queue/state.rs|"k.key == id.id && k.caller == id.caller &&"|"k.key == id.id &&"|queue_edges::seeded_model_of_queues_across_days_zones_clocks_ranges_and_colliding_request_ids
qdelete|src/queue/history.rs|"if queues.delete_unchanged(name, &s).await? {"|"if queues.delete(name).await? {"|queue_delete::deletes_racing_takes_never_leave_a_ticket_held_into_a_queue_created_again
qmemory|src/queue/combine.rs|"            // Nothing to write: only a fresh read may refuse or answer.\n            if from_memory {\n                continue;\n            }\n"|"            // Nothing to write: only a fresh read may refuse or answer.\n"|queue_batch::seeded_model_of_coalesced_batches_with_repeated_ids_families_desks_and_lost_replies
qrequest|src/queue/state.rs|"            && let Some(k) = self.find_key(id, now)\n"|"            && let Some(k) = None::<&Key>\n"|queue_batch::seeded_model_of_coalesced_batches_with_repeated_ids_families_desks_and_lost_replies
EOF
)

# Exactly the model test (a `model::` filter would also run the gap-free model test).
TEST=model::random_interleavings_of_draws_and_admin_operations_never_duplicate_within_an_era
TEST_NOW=$TEST
seeds=20
names=()
baseline=0
while [ "$#" -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --baseline) baseline=1; shift ;;
    --list) echo "$MUTANTS" | cut -d'|' -f1,2; exit 0 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) names+=("$1"); shift ;;
  esac
done

backup=$(mktemp -d)
restore() {
  for f in "$backup"/*; do
    [ -e "$f" ] || continue
    cp "$f" "$(basename "$f" | tr '%' '/')"
  done
  rm -rf "$backup"
}
trap restore EXIT

# run_seeds: runs the model test $seeds times; sets caught, missed (seeds that passed) and
# reasons (the first line of each failure's panic message, counted).
run_seeds() {
  caught=0
  missed=()
  reasons=""
  for ((i = 0; i < seeds; i++)); do
    log=$(mktemp)
    if scripts/test.sh --test integration "$TEST_NOW" -- --exact --nocapture >"$log" 2>&1; then
      missed+=("$(grep -o 'DISPENSER_[A-Z]*_SEED=[0-9]*' "$log" | head -1 | cut -d= -f2 || true)")
    else
      caught=$((caught + 1))
      # The model test's own panic (other threads' panics, e.g. a draw task's, come first).
      reasons+="$(grep -A1 "^thread '$TEST_NOW" "$log" | sed -n 2p | cut -c1-90 || true)"$'\n'
    fi
    rm -f "$log"
  done
}

if [ "$baseline" = 1 ]; then
  cargo build --locked --tests --bins >/dev/null 2>&1
  run_seeds
  echo "baseline (no mutation): passed $((seeds - caught))/$seeds"
  [ -n "$reasons" ] && printf '%s' "$reasons" | sort | uniq -c
  [ "$caught" = 0 ]
  exit
fi

# apply FILE TEXT REPLACEMENT: exact, once; fails when the text is not there.
apply() {
  python3 - "$1" "$2" "$3" <<'PY'
import ast, sys
path, text, repl = sys.argv[1], ast.literal_eval(sys.argv[2]), ast.literal_eval(sys.argv[3])
src = open(path).read()
if src.count(text) != 1:
    sys.exit(f"mutants.sh: {path}: the text to mutate occurs {src.count(text)} times (want 1)")
open(path, "w").write(src.replace(text, repl))
PY
}

all_caught=1
while IFS='|' read -r name file text repl test; do
  [ -n "$name" ] || continue
  TEST_NOW=${test:-$TEST}
  if [ "${#names[@]}" -gt 0 ] && [[ ! " ${names[*]} " == *" $name "* ]]; then
    continue
  fi
  cp "$file" "$backup/$(echo "$file" | tr '/' '%')"
  apply "$file" "$text" "$repl"
  cargo build --locked --tests --bins >/dev/null 2>&1 || { echo "$name: does not build" >&2; exit 2; }
  run_seeds
  cp "$backup/$(echo "$file" | tr '/' '%')" "$file"
  echo "$name ($file): caught $caught/$seeds${missed:+; missed seeds ${missed[*]}}"
  printf '%s' "$reasons" | sort | uniq -c | sed 's/^/    /'
  # At least 19 in 20.
  if [ $((caught * 20)) -lt $((seeds * 19)) ]; then
    all_caught=0
  fi
done <<<"$MUTANTS"
cargo build --locked --tests --bins >/dev/null 2>&1 || true
[ "$all_caught" = 1 ]
