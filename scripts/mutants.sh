#!/usr/bin/env bash
# Puts known bugs back, one at a time, and counts how often the model test catches each: the
# sensitivity of `tests/integration/model/` (its docs keep the table). Each mutation is an
# exact text replacement in one source file; the file is restored afterwards, whatever
# happens. Runs against the local server (scripts/test.sh starts one per run).
#
#   scripts/mutants.sh [--seeds N] [NAME...]    # default: 20 seeds, every mutation
#   scripts/mutants.sh --baseline [--seeds N]   # no mutation: every run must pass
#   scripts/mutants.sh --list
#
# Prints one line per mutation: NAME caught K/N (and the seeds it missed). Exit 0 when every
# mutation was caught at least 19 times in 20 (scaled to N), else 1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

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
