//! What the model saw: every call's numbers with the window they were fixed in, the windows
//! of era changes, per subject (plain, striped, each scope), and the oracle that checks them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One call's numbers and the window they were fixed in.
#[derive(Clone, Debug)]
pub struct Obs {
    pub from: Instant,
    pub to: Instant,
    pub numbers: Vec<i64>,
    pub who: String,
}

/// One sequence (or striped sequence) under test: its calls and its era changes.
#[derive(Default)]
pub struct Subject {
    pub obs: Mutex<Vec<Obs>>,
    /// The windows of era-changing operations (and of wraps, where allowed), in order.
    pub era_changes: Mutex<Vec<(Instant, Instant)>>,
    /// Whether the sequence may wrap — created cyclic, or turned cyclic with `force` — and
    /// when that last stopped. A wrap is an era change only then; a wrap of a sequence that
    /// was never allowed to (cycle turned on without force) is a bug the oracle must see.
    pub wraps_allowed: Mutex<(bool, Option<Instant>)>,
}

impl Subject {
    pub fn record(&self, world: &World, from: Instant, numbers: Vec<i64>, who: String) {
        let to = Instant::now();
        world.timed(to - from, &who);
        if !numbers.is_empty() {
            self.obs.lock().unwrap().push(Obs {
                from,
                to,
                numbers,
                who,
            });
        }
    }

    pub fn era_change(&self, from: Instant) {
        self.era_changes
            .lock()
            .unwrap()
            .push((from, Instant::now()));
    }

    pub fn allow_wraps(&self, allowed: bool) {
        let mut w = self.wraps_allowed.lock().unwrap();
        if w.0 && !allowed {
            w.1 = Some(Instant::now());
        }
        w.0 = allowed;
    }

    /// Whether wraps were allowed at some moment after `since`.
    pub fn wraps_allowed_since(&self, since: Instant) -> bool {
        let w = self.wraps_allowed.lock().unwrap();
        w.0 || w.1.is_some_and(|stopped| stopped > since)
    }

    /// Checks uniqueness within eras (see the module docs of `model`); returns (eras,
    /// definite numbers, ambiguous numbers). On a failure prints the calls involved and the
    /// admin operations around them (`timeline`).
    pub fn check(&self, what: &str, timeline: &[(Instant, String)]) -> (usize, usize, usize) {
        let mut changes = self.era_changes.lock().unwrap().clone();
        changes.sort_by_key(|(s, _)| *s);
        let obs = self.obs.lock().unwrap();
        let t0 = obs.iter().map(|o| o.from).min();
        // Era k lies between the end of change k-1 and the start of change k. A window that
        // lies inside one era is definite; one that overlaps changes may belong to any era it
        // touches.
        let era_of = |at: Instant, lean_late: bool| -> usize {
            changes
                .iter()
                .filter(|(s, e)| if lean_late { *s <= at } else { *e <= at })
                .count()
        };
        let report = |n: i64, calls: &[&Obs]| {
            let lo = calls.iter().map(|o| o.from).min().expect("calls");
            let hi = calls.iter().map(|o| o.to).max().expect("calls");
            let rel = |t: Instant| {
                if t >= lo {
                    format!("+{:?}", t - lo)
                } else {
                    format!("-{:?}", lo - t)
                }
            };
            eprintln!(
                "{what}: number {n}, {:?} into the run:",
                lo - t0.unwrap_or(lo)
            );
            for (at, note) in timeline {
                if *at + Duration::from_millis(300) >= lo && *at <= hi + Duration::from_millis(50) {
                    eprintln!("  {} {note}", rel(*at));
                }
            }
            for (s, e) in &changes {
                if *e + Duration::from_millis(300) >= lo && *s <= hi {
                    eprintln!("  era change {}..{}", rel(*s), rel(*e));
                }
            }
            for o in calls {
                eprintln!("  {} {}..{} {:?}", o.who, rel(o.from), rel(o.to), o.numbers);
            }
        };
        let mut definite: HashMap<usize, HashMap<i64, &Obs>> = HashMap::new();
        let mut ambiguous: Vec<(usize, usize, i64, &Obs)> = Vec::new();
        for o in obs.iter() {
            let first = era_of(o.from, false);
            let last = era_of(o.to, true).max(first);
            for &n in &o.numbers {
                if first == last {
                    if let Some(prev) = definite.entry(first).or_default().insert(n, o) {
                        report(n, &[prev, o]);
                        panic!(
                            "{what}: number {n} issued twice in era {first}: by {} and by {}",
                            prev.who, o.who
                        );
                    }
                } else {
                    ambiguous.push((first, last, n, o));
                }
            }
        }
        // Each ambiguous number takes the earliest era it fits; taken in the order of their
        // last era, that finds an assignment whenever one exists.
        ambiguous.sort_by_key(|(first, last, _, _)| (*last, *first));
        let mut taken: HashMap<(usize, i64), &Obs> = HashMap::new();
        for (first, last, n, o) in &ambiguous {
            let free = |e: &usize| {
                !definite.get(e).is_some_and(|m| m.contains_key(n))
                    && !taken.contains_key(&(*e, *n))
            };
            let Some(e) = (*first..=*last).find(free) else {
                let mut calls: Vec<&Obs> = vec![o];
                for e in *first..=*last {
                    calls.extend(definite.get(&e).and_then(|m| m.get(n)));
                    calls.extend(taken.get(&(e, *n)));
                }
                report(*n, &calls);
                panic!(
                    "{what}: number {n} (by {}, eras {first}..={last}) repeats a number of every \
                     era it may belong to",
                    o.who
                );
            };
            taken.insert((e, *n), o);
        }
        let total_definite = definite.values().map(HashMap::len).sum();
        (changes.len() + 1, total_definite, ambiguous.len())
    }

    /// Every number of the last era (calls that began after its last change).
    pub fn last_era_numbers(&self) -> Vec<(i64, String)> {
        let last = self
            .era_changes
            .lock()
            .unwrap()
            .iter()
            .map(|(_, e)| *e)
            .max();
        self.obs
            .lock()
            .unwrap()
            .iter()
            .filter(|o| last.is_none_or(|s| o.from >= s))
            .flat_map(|o| o.numbers.iter().map(|&n| (n, o.who.clone())))
            .collect()
    }
}

/// Everything the tasks of a run share.
#[derive(Default)]
pub struct World {
    pub orders: Subject,
    pub ids: Subject,
    /// Daily scopes: one subject per scope key (no era changes: scopes are never reset).
    pub scopes: Mutex<BTreeMap<String, Vec<i64>>>,
    /// Each scripted round's own sequence.
    pub scripted: Mutex<Vec<(String, Arc<Subject>)>>,
    pub ops: Mutex<BTreeMap<String, u64>>,
    /// The wrap watcher's latest look at "orders": incarnation, cycle count, when it looked.
    pub cycles_seen: Mutex<
        Option<(
            Option<dispenser::mongodb::bson::oid::ObjectId>,
            i64,
            Instant,
        )>,
    >,
    /// What the admin operations did, and when (printed when the oracle fails).
    pub timeline: Mutex<Vec<(Instant, String)>>,
    /// The slowest call that has a bound (not block clients or CLI processes), and what it was.
    pub slowest: Mutex<(Duration, String)>,
}

impl World {
    pub fn count(&self, op: impl Into<String>) {
        *self.ops.lock().unwrap().entry(op.into()).or_default() += 1;
    }

    /// "orders" was just deleted, standing at `cycles` wraps: the wraps it made since the
    /// watcher last looked are era changes too (when it was allowed to wrap).
    pub fn deleted_orders(&self, old: &dispenser::mongodb::bson::Document) {
        let incarnation = old.get_object_id("incarnation").ok();
        let cycles = match old.get("cycles") {
            Some(dispenser::mongodb::bson::Bson::Int64(c)) => *c,
            Some(dispenser::mongodb::bson::Bson::Int32(c)) => i64::from(*c),
            _ => return,
        };
        let Some((inc, seen_cycles, at)) = *self.cycles_seen.lock().unwrap() else {
            return;
        };
        if inc == incarnation && cycles > seen_cycles && self.orders.wraps_allowed_since(at) {
            let now = Instant::now();
            let mut changes = self.orders.era_changes.lock().unwrap();
            for _ in seen_cycles..cycles {
                changes.push((at, now));
            }
        }
    }

    /// Notes what an admin operation did, for the failure report.
    pub fn note(&self, what: impl Into<String>) {
        self.timeline
            .lock()
            .unwrap()
            .push((Instant::now(), what.into()));
    }

    fn timed(&self, took: Duration, who: &str) {
        if who.starts_with("block") || who.starts_with("cli") {
            return;
        }
        let mut s = self.slowest.lock().unwrap();
        if took > s.0 {
            *s = (took, who.to_owned());
        }
    }
}
