//! The plain sequence "orders": draw tasks of every kind, and admin operations generated over
//! their whole input space, each checked against what the library promises for it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dispenser::mongodb::Collection;
use dispenser::mongodb::bson::{Document, doc};
use dispenser::{
    Dispenser, Error, Format, Spec,
    block::BlockOptions,
    sequence::{Alter, SequenceState},
};
use futures::future::join_all;

use super::log::World;
use super::rng::Rng;
use crate::common::{self, DB};

/// Errors a draw may meet while admin operations run: the sequence deleted for a moment, a
/// reset racing a block client's close, a bound reached (bounds move all the time here).
pub fn tolerated(e: &Error) -> bool {
    matches!(
        e,
        Error::NotFound { .. }
            | Error::Closed { .. }
            | Error::WouldGoBackwards { .. }
            | Error::Exhausted { .. }
    )
}

/// Draw tasks of one round against "orders".
pub async fn draws(
    seed: u64,
    handles: Vec<dispenser::Sequence>,
    d: Dispenser,
    collection: String,
    world: Arc<World>,
) {
    let mut rng = Rng(seed);
    let mut tasks = Vec::new();
    for t in 0..rng.range(3, 7) {
        let calls = rng.range(5, 30) as usize;
        let tseed = rng.next_u64();
        let world = world.clone();
        match rng.below(5) {
            // A long-lived handle (it outlives deletes, resets and alters); runs sometimes.
            0 | 1 => {
                let h = handles[rng.below(handles.len() as u64) as usize].clone();
                tasks.push(tokio::spawn(async move {
                    let mut r = Rng(tseed);
                    for _ in 0..calls {
                        let from = Instant::now();
                        let n = if r.chance(30) {
                            r.range(2, 6) as u64
                        } else {
                            1
                        };
                        let got = match h.next_n(n).await {
                            Ok(run) => run.into_iter().collect(),
                            Err(e) if tolerated(&e) => vec![],
                            Err(e) => panic!("draw failed: {e}"),
                        };
                        world
                            .orders
                            .record(&world, from, got, format!("handle {t}"));
                    }
                }));
            }
            // A fresh handle per call.
            2 => {
                let d = d.clone();
                tasks.push(tokio::spawn(async move {
                    for _ in 0..calls {
                        let from = Instant::now();
                        let got = match open_and_draw(&d, "orders").await {
                            Ok(n) => vec![n],
                            Err(e) if tolerated(&e) => vec![],
                            Err(e) => panic!("draw failed: {e}"),
                        };
                        world.orders.record(&world, from, got, format!("fresh {t}"));
                    }
                }));
            }
            // A CLI process (another OS process), either strategy, sometimes with blocks.
            3 => {
                let mut args: Vec<String> = [
                    "--db",
                    DB,
                    "--collection",
                    collection.as_str(),
                    "next",
                    "orders",
                    "--count",
                ]
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
                args.push(calls.to_string());
                args.push("--strategy".into());
                args.push(
                    if tseed.is_multiple_of(2) {
                        "cas"
                    } else {
                        "inc"
                    }
                    .into(),
                );
                if tseed.is_multiple_of(3) {
                    args.extend(["--block".to_owned(), "4".to_owned()]);
                }
                tasks.push(tokio::spawn(async move {
                    let from = Instant::now();
                    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
                        .env("MONGODB_URI", common::uri())
                        .args(&args)
                        .output()
                        .await
                        .expect("run the CLI");
                    let numbers: Vec<i64> = String::from_utf8_lossy(&out.stdout)
                        .lines()
                        .map(|l| l.trim().parse().expect("a number per line"))
                        .collect();
                    let code = out.status.code();
                    // 0, 3 (deleted meanwhile), 4 (a bound reached), 6 (a reset raced a
                    // give-back).
                    assert!(
                        matches!(code, Some(0 | 3 | 4 | 6)),
                        "cli {args:?} exited {code:?}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    world
                        .orders
                        .record(&world, from, numbers, format!("cli {t}"));
                }));
            }
            // A block client with prefetch, created and closed in this round.
            _ => {
                let size = rng.range(3, 40) as u64;
                let d = d.clone();
                tasks.push(tokio::spawn(async move {
                    let created = Instant::now();
                    let Ok(b) = d
                        .open_blocks("orders")
                        .options(BlockOptions::default().with_size(size))
                        .await
                    else {
                        return;
                    };
                    for _ in 0..calls {
                        match b.next().await {
                            // A block's numbers may have been reserved when it was made.
                            Ok(n) => {
                                world
                                    .orders
                                    .record(&world, created, vec![n], format!("block {t}"))
                            }
                            Err(e) if tolerated(&e) => break,
                            Err(e) => panic!("block draw failed: {e}"),
                        }
                    }
                    let _ = b.close().await;
                }));
            }
        }
    }
    for t in join_all(tasks).await {
        t.expect("draw task");
    }
}

async fn open_and_draw(d: &Dispenser, name: &str) -> dispenser::Result<i64> {
    d.open(name).await?.next().await
}

/// A format or none.
fn any_format(rng: &mut Rng) -> Option<Format> {
    rng.chance(80)
        .then(|| Format::parse(&format!("O-{{n:0{}}}", rng.range(1, 9))).expect("a valid format"))
}

/// Asserts that `r` failed with a refusal (`InvalidSpec`), saying `why`.
fn refused<T: std::fmt::Debug>(r: &dispenser::Result<T>, why: &str) {
    assert!(
        matches!(r, Err(Error::InvalidSpec { .. })),
        "{why} must be refused with InvalidSpec: {r:?}"
    );
}

/// A whole alter, drawn from the whole space of each field.
fn any_alter(rng: &mut Rng, s: &SequenceState, era_changes: bool) -> (Alter, bool) {
    let anchor = |rng: &mut Rng| {
        let a = rng.pick(&[s.value, s.min, s.max]);
        rng.around(a)
    };
    let mut change = Alter::default();
    if rng.chance(40) {
        change = change.with_step(rng.step(s.step));
    }
    if rng.chance(40) {
        change = change.with_min(anchor(rng));
    }
    if rng.chance(50) {
        change = change.with_max(anchor(rng));
    }
    if rng.chance(30) {
        change = change.with_cycle(rng.chance(50));
    }
    if rng.chance(15) {
        change = change.with_format(any_format(rng));
    }
    if change == Alter::default() {
        change = change.with_max(anchor(rng));
    }
    // Force: what repeats numbers on purpose (cycle on) is an era change for the oracle only
    // through the wraps it allows; a forced lower bound repeats nothing.
    (change, rng.chance(if era_changes { 40 } else { 20 }))
}

/// Alters "orders" with `change` and checks the refusals the contract names.
async fn alter(d: &Dispenser, world: &World, s: &SequenceState, change: Alter, force: bool) {
    let step = change.step.unwrap_or(s.step);
    let cycle = change.cycle.unwrap_or(s.cycle);
    let turns_cyclic = cycle && !s.cycle;
    if turns_cyclic && force {
        // Wraps are allowed from the moment the change may be written.
        world.orders.allow_wraps(true);
    }
    let r = async {
        d.open("orders")
            .await?
            .alter(change.clone())
            .force(force)
            .await
    }
    .await;
    world.note(format!(
        "alter {change:?} on value {} {}..={} step {} cycle {}: {}",
        s.value,
        s.min,
        s.max,
        s.step,
        s.cycle,
        match &r {
            Ok(a) => format!(
                "ok, value {} {}..={} step {} cycle {}",
                a.value, a.min, a.max, a.step, a.cycle
            ),
            Err(e) => format!("{e}"),
        }
    ));
    let kind = if step == 0 {
        refused(&r, "step 0");
        "alter: step 0 (refused)"
    } else if step.signum() != s.step.signum() {
        refused(
            &r,
            &format!("a step of the other sign ({} -> {step})", s.step),
        );
        "alter: step of the other sign (refused)"
    } else if turns_cyclic && !force {
        refused(&r, "cycle on without force");
        "alter: cycle on without force (refused)"
    } else {
        assert!(
            r.is_ok() || matches!(r, Err(Error::InvalidSpec { .. } | Error::NotFound { .. })),
            "alter {change:?} on {s:?}: {r:?}"
        );
        match &r {
            Ok(after) if !after.cycle => world.orders.allow_wraps(false),
            _ => {}
        }
        match (&r, force) {
            (Ok(_), true) => "alter: forced, accepted",
            (Ok(_), false) => "alter: accepted",
            (Err(_), _) => "alter: refused",
        }
    };
    world.count(kind);
}

/// Admin operations of one round against "orders", one after another. Era-changing ones only
/// when `era_changes`.
pub async fn admin(
    seed: u64,
    d: Dispenser,
    raw: Collection<Document>,
    world: Arc<World>,
    era_changes: bool,
) {
    let mut rng = Rng(seed);
    let mut raise_next = false;
    let ops = rng.range(1, 3);
    let mut done = 0;
    while done < ops || raise_next {
        done += 1;
        tokio::time::sleep(Duration::from_millis(rng.below(40))).await;
        let s = match d.peek("orders").await {
            Ok(s) => s,
            Err(e) if tolerated(&e) => {
                raise_next = false;
                continue;
            }
            Err(e) => panic!("peek failed: {e}"),
        };
        let ascending = s.step > 0;
        let op = if raise_next {
            99
        } else {
            rng.below(if era_changes { 10 } else { 7 })
        };
        raise_next = false;
        match op {
            0 | 1 => {
                // Reset anywhere; backwards needs force (an era change), and in rounds without
                // era changes is refused.
                let force = era_changes && rng.chance(50);
                let target = rng.around_any(&[s.value, s.min, s.max]);
                let from = Instant::now();
                let r = async { d.open("orders").await?.reset(target).force(force).await }.await;
                world.note(format!(
                    "reset to {target} (force {force}) from {}: {:?}",
                    s.value,
                    r.as_ref().map(|a| a.value)
                ));
                // Clearly backwards: beyond what a block client's give-back (racing this) can
                // move the value back by.
                let margin = 1_000 * i128::from(s.step.abs());
                let backwards = if ascending {
                    i128::from(target) - i128::from(s.step) < i128::from(s.value) - margin
                } else {
                    i128::from(target) - i128::from(s.step) > i128::from(s.value) + margin
                };
                let inside = (s.min..=s.max).contains(&target);
                if force {
                    world.orders.era_change(from);
                } else if backwards && inside && !s.cycle {
                    // (A cyclic one may wrap between the peek and the reset: not judged.)
                    assert!(
                        matches!(
                            r,
                            Err(Error::WouldGoBackwards { .. } | Error::InvalidArgument { .. })
                        ),
                        "reset to {target} behind {} without force: {r:?}",
                        s.value
                    );
                }
                if !inside {
                    assert!(
                        matches!(r, Err(Error::InvalidArgument { .. })),
                        "reset to {target} outside {}..={}: {r:?}",
                        s.min,
                        s.max
                    );
                }
                world.count(match (force, r.is_ok()) {
                    (true, _) => "reset: forced (new era)",
                    (false, true) => "reset: forward",
                    (false, false) => "reset: refused",
                });
            }
            2 => {
                let target = rng.around(s.value);
                let r = async { d.open("orders").await?.advance_to(target).await }.await;
                world.note(format!(
                    "advance-to {target}: {:?}",
                    r.as_ref().map(|a| a.value)
                ));
                assert!(
                    r.is_ok() || matches!(r, Err(Error::InvalidArgument { .. })),
                    "advance-to {target}: {r:?}"
                );
                world.count("advance-to");
            }
            3 => {
                d.open("orders")
                    .await
                    .unwrap()
                    .alter(dispenser::sequence::Alter::default().with_format(any_format(&mut rng)))
                    .await
                    .unwrap();
                world.count("alter: format only");
            }
            4 | 5 => {
                let (change, force) = any_alter(&mut rng, &s, era_changes);
                let lowers = force
                    && if ascending {
                        change.max.is_some_and(|m| m < s.value)
                    } else {
                        change.min.is_some_and(|m| m > s.value)
                    };
                alter(&d, &world, &s, change, force).await;
                // Steer: a bound forced below the last number, then raised again, must carry
                // on after it.
                raise_next = lowers;
            }
            99 => {
                let change = if ascending {
                    Alter::default().with_max(s.value.saturating_add(rng.range(1, 1000)))
                } else {
                    Alter::default().with_min(s.value.saturating_sub(rng.range(1, 1000)))
                };
                alter(&d, &world, &s, change, false).await;
                world.count("alter: bound raised again after a forced lower one");
            }
            6 => ensure(&mut rng, &d, &world, &s).await,
            7 => recreate_ahead(&mut rng, &d, &raw, &world).await,
            8 => {
                // Forced reset backwards: a new era.
                let from = Instant::now();
                let target = if ascending {
                    rng.range(s.min, s.value.clamp(s.min, s.max))
                } else {
                    rng.range(s.value.clamp(s.min, s.max), s.max)
                };
                let r = async { d.open("orders").await?.reset(target).force(true).await }.await;
                world.note(format!("forced reset to {target} from {}: {r:?}", s.value));
                assert!(
                    r.is_ok() || matches!(r, Err(Error::InvalidArgument { .. })),
                    "forced reset to {target}: {r:?}"
                );
                world.orders.era_change(from);
                world.count("reset: forced backwards (new era)");
            }
            _ => recreate_anywhere(&mut rng, &d, &raw, &world).await,
        }
    }
}

/// `ensure` with the same shape opens it; with another start it is a conflict; with another
/// bound (what an alter changes) it opens, keeps the stored bound and tells it, writing
/// nothing; a plain name with a stripe's or a scope's separator is refused.
async fn ensure(rng: &mut Rng, d: &Dispenser, world: &World, s: &SequenceState) {
    let same = Spec::default()
        .with_step(s.step)
        .with_min(s.min)
        .with_max(s.max)
        .with_cycle(s.cycle);
    let same = match s.start {
        Some(start) => same.with_start(start),
        None => same,
    };
    match rng.below(3) {
        0 => {
            let r = d.ensure("orders", same).await;
            assert!(
                r.is_ok()
                    || matches!(
                        r,
                        Err(Error::SpecConflict { .. } | Error::InvalidSpec { .. })
                    ),
                "{r:?}"
            );
            world.count("ensure: same shape");
        }
        1 => {
            let start = rng.below(2) == 0;
            let other = if start {
                same.with_start(same.start.saturating_add(s.step.signum()))
            } else {
                same.with_max(same.max.saturating_sub(1).max(same.min.saturating_add(1)))
            };
            if other != same {
                let r = d.ensure("orders", other).await;
                match (start, &r) {
                    (_, Err(Error::SpecConflict { .. } | Error::InvalidSpec { .. })) => {}
                    // Another bound: kept as stored and told (unless a concurrent writer
                    // changed the stored one meanwhile).
                    (false, Ok(h)) => assert!(
                        h.altered().iter().any(|a| a.setting == "max") || h.altered().is_empty(),
                        "ensure with another bound: {:?}",
                        h.altered()
                    ),
                    _ => panic!("ensure with another start (start: {start}): {r:?}"),
                }
            }
            world.count("ensure: another start (conflict) or bound (kept)");
        }
        _ => {
            let name = rng.pick(&["orders~0", "ids~1", "orders@x", "tickets@2026-01-01"]);
            let r = d.ensure(name, Spec::default()).await;
            assert!(
                matches!(r, Err(Error::InvalidName { .. })),
                "a plain name with a separator: {name}: {r:?}"
            );
            world.count("ensure: name with a separator (refused)");
        }
    }
}

/// Deletes "orders" and creates it again beyond every number issued (the same era), with the
/// same shape; sometimes writes the new document until it reaches the version the old one
/// had, so handles that remember the old one must not take it for it.
async fn recreate_ahead(rng: &mut Rng, d: &Dispenser, raw: &Collection<Document>, world: &World) {
    let from = Instant::now();
    let Some(old) = raw
        .find_one_and_delete(doc! { "_id": "orders" })
        .await
        .unwrap()
    else {
        return;
    };
    world.deleted_orders(&old);
    let int = |k: &str| match old.get(k) {
        Some(dispenser::mongodb::bson::Bson::Int64(v)) => *v,
        Some(dispenser::mongodb::bson::Bson::Int32(v)) => i64::from(*v),
        other => panic!("{k}: {other:?}"),
    };
    let (value, version, step, min, max) = (
        int("value"),
        int("version"),
        int("step"),
        int("min"),
        int("max"),
    );
    let cycle = old.get_bool("cycle").unwrap();
    world.note(format!(
        "deleted (to re-create ahead): value {value} version {version} step {step} {min}..={max} cycle {cycle}"
    ));
    // Strictly beyond every issued number, in the sequence's direction.
    let start = rng
        .range(1, 50)
        .checked_mul(step)
        .and_then(|gap| value.checked_add(gap));
    let spec = start.map(|start| {
        let spec = Spec::default()
            .with_step(step)
            .with_min(min.min(start))
            .with_max(max.max(start))
            .with_cycle(cycle)
            .with_start(start);
        if spec.min >= spec.max {
            spec.with_max(spec.min.saturating_add(1_000))
        } else {
            spec
        }
    });
    let created = match spec {
        Some(spec) => d.create("orders", spec).await.is_ok(),
        None => false,
    };
    world.note(format!("created ahead: {created} {spec:?}"));
    if !created {
        // No room ahead in 64 bits: start over anywhere, a new era.
        world.orders.allow_wraps(false);
        d.create("orders", Spec::default()).await.unwrap();
        world.orders.era_change(from);
        world.count("delete + re-create: no room ahead (new era)");
        return;
    }
    if rng.chance(50) {
        let f = Format::parse("O-{n}").unwrap();
        let mut v = 0;
        while v < version && v < 300 {
            d.open("orders")
                .await
                .unwrap()
                .alter(dispenser::sequence::Alter::default().with_format(Some(f.clone())))
                .await
                .unwrap();
            v = d.peek("orders").await.unwrap().version;
        }
    }
    world.note(format!("re-created ahead of {value}: {spec:?}"));
    world.count("delete + re-create ahead (same era)");
}

/// Deletes "orders" and creates it with any shape: any sign, bounds, cycle, start. A new era.
async fn recreate_anywhere(
    rng: &mut Rng,
    d: &Dispenser,
    raw: &Collection<Document>,
    world: &World,
) {
    let from = Instant::now();
    let old = raw
        .find_one_and_delete(doc! { "_id": "orders" })
        .await
        .unwrap()
        .expect("orders exists");
    world.deleted_orders(&old);
    tokio::time::sleep(Duration::from_millis(rng.below(20))).await;
    let step = match rng.step(1) {
        0 => 1,
        s => s,
    };
    let a = rng.around(0);
    let b = rng.around(a);
    let (min, max) = if a < b { (a, b) } else { (b, a) };
    let max = if min == max {
        max.saturating_add(1)
    } else {
        max
    };
    let min = if min == max { min - 1 } else { min };
    let span = (i128::from(max) - i128::from(min)).min(1_000) as i64;
    let start = if step > 0 {
        min.saturating_add(rng.range(0, span))
    } else {
        max.saturating_sub(rng.range(0, span))
    };
    let cycle = rng.chance(30);
    let spec = Spec::default()
        .with_step(step)
        .with_min(min)
        .with_max(max)
        .with_start(start)
        .with_cycle(cycle);
    world.orders.allow_wraps(cycle);
    if let Err(e) = d.create("orders", spec).await {
        assert!(
            matches!(e, Error::InvalidSpec { .. }),
            "create {spec:?}: {e}"
        );
        world.orders.allow_wraps(false);
        d.create("orders", Spec::default().with_start(rng.range(1, 300)))
            .await
            .unwrap();
    }
    world.orders.era_change(from);
    world.note(format!("re-created anywhere (new era): {spec:?}"));
    world.count(if cycle {
        "delete + re-create with any shape, cyclic (new era)"
    } else {
        "delete + re-create with any shape (new era)"
    });
}

/// Watches "orders" for wraps while a round runs: a wrap of a sequence allowed to wrap is an
/// era change (its window: between the last poll that saw the old cycle count and the first
/// that saw the new one). A wrap the sequence was never allowed is not: the oracle sees its
/// repeats.
pub async fn watch_wraps(
    d: Dispenser,
    world: Arc<World>,
    until: tokio::sync::watch::Receiver<bool>,
) {
    let mut last: Option<(
        Option<dispenser::mongodb::bson::oid::ObjectId>,
        i64,
        Instant,
    )> = None;
    loop {
        // Once told to stop, one more look: wraps made by the last draws are seen too.
        let stopping = *until.borrow();
        let at = Instant::now();
        if let Ok(s) = d.peek("orders").await {
            // A document created since the last poll started at 0 wraps: its first wraps may
            // come before this poll saw it.
            let before = last
                .map(|(inc, cycles, seen)| (if inc == s.incarnation { cycles } else { 0 }, seen));
            if let Some((cycles, seen)) = before
                && s.cycles > cycles
                && world.orders.wraps_allowed_since(seen)
            {
                // One era change per wrap: several wraps between two polls are several eras.
                let now = Instant::now();
                let mut changes = world.orders.era_changes.lock().unwrap();
                for _ in cycles..s.cycles {
                    changes.push((seen, now));
                }
                drop(changes);
                world.count("wrap (era change)");
                world.note(format!(
                    "wrap: cycles {cycles} -> {} (incarnation {:?}, value {}, polled at {:?})",
                    s.cycles,
                    s.incarnation.map(|i| i.to_hex()),
                    s.value,
                    at.duration_since(seen)
                ));
            }
            last = Some((s.incarnation, s.cycles, at));
            *world.cycles_seen.lock().unwrap() = last;
        }
        if stopping {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
