//! The striped sequence "ids" and the daily scopes of "tickets": their draws racing their
//! admin operations, each operation drawn from its whole input space.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use dispenser::scope::DailySequence;
use dispenser::stripe::stripe_name;
use dispenser::{Dispenser, Error, Spec, block::BlockOptions, sequence::Alter};

use super::log::World;
use super::plain::tolerated;
use super::rng::Rng;

/// One round of the striped sequence: 20 draws (plain and through blocks) racing one admin
/// operation. Numbers must be unique within an era across all stripes.
pub async fn stripes(seed: u64, d: Dispenser, world: Arc<World>, era_changes: bool) {
    let mut rng = Rng(seed);
    let Ok(ids) = d.open_striped("ids").await else {
        return;
    };
    let Ok(fast) = ids.with_blocks(BlockOptions::default().with_size(rng.range(2, 20) as u64))
    else {
        return;
    };
    let fast_made = Instant::now();
    let admin = stripes_admin(rng.next_u64(), &d, &world, era_changes, ids.stripes());
    let draws = async {
        for k in 0..20 {
            let from = Instant::now();
            let (r, who, since) = if k % 2 == 0 {
                (ids.next().await, "striped", from)
            } else {
                (fast.next().await, "striped block", fast_made)
            };
            match r {
                Ok(n) => world.ids.record(&world, since, vec![n], who.into()),
                Err(e) if tolerated(&e) => {}
                Err(e) => panic!("striped draw failed: {e}"),
            }
        }
        let _ = fast.close().await;
    };
    tokio::join!(admin, draws);
}

async fn stripes_admin(seed: u64, d: &Dispenser, world: &World, era_changes: bool, count: u32) {
    let mut rng = Rng(seed);
    tokio::time::sleep(std::time::Duration::from_millis(rng.below(20))).await;
    let Ok(striped) = d.open_striped("ids").await else {
        return;
    };
    let Ok(states) = striped.peek().await else {
        return;
    };
    let top = states.iter().map(|s| s.value).max().unwrap_or(0);
    let low = states.iter().map(|s| s.value).min().unwrap_or(0);
    match rng.below(if era_changes { 6 } else { 5 }) {
        0 => {
            let n = rng.around(top);
            let r = striped.advance_to(n).await;
            assert!(
                r.is_ok() || matches!(r, Err(Error::InvalidArgument { .. })),
                "advance_to {n} of the stripes: {r:?}"
            );
            world.count("striped: advance");
        }
        1 => {
            let force = era_changes && rng.chance(50);
            let n = rng.around_any(&[top, low]);
            let from = Instant::now();
            let r = striped.reset(n).force(force).await;
            // Clearly behind: beyond what a block client's give-back (racing this) can move
            // a stripe back by.
            let margin = 1_000 * states[0].step.abs();
            let behind = if states[0].step > 0 {
                n <= low.saturating_sub(margin)
            } else {
                n >= top.saturating_add(margin)
            };
            if force {
                world.ids.era_change(from);
            } else if behind {
                assert!(
                    r.is_err(),
                    "reset of the stripes to {n}, behind every stripe ({low}..={top}), without \
                     force: {r:?}"
                );
            }
            world.count(if force {
                "striped: forced reset (new era)"
            } else {
                "striped: reset"
            });
        }
        2 => {
            // Alter one stripe: its step and cycle must stay; its bounds may move.
            let k = rng.below(u64::from(count)) as u32;
            let s = &states[k as usize];
            let mut change = Alter::default();
            let step = rng.step(s.step);
            let new_step = rng.chance(30) && step != s.step;
            if new_step {
                change = change.with_step(step);
            }
            let cycle = rng.chance(20);
            if cycle {
                change = change.with_cycle(true);
            }
            if rng.chance(60) {
                change = change.with_max(rng.around_any(&[s.value, s.max]));
            }
            if rng.chance(40) || change == Alter::default() {
                change = change.with_min(rng.around_any(&[s.value, s.min]));
            }
            let force = rng.chance(30);
            let r = async {
                d.open(&stripe_name("ids", k))
                    .await?
                    .alter(change.clone())
                    .force(force)
                    .await
            }
            .await;
            if new_step || cycle {
                assert!(
                    matches!(r, Err(Error::InvalidSpec { .. })),
                    "a stripe's step or cycle must not change: {change:?}: {r:?}"
                );
            } else {
                assert!(
                    r.is_ok() || matches!(r, Err(Error::InvalidSpec { .. })),
                    "{change:?}: {r:?}"
                );
            }
            world.count("striped: alter one stripe");
        }
        3 => {
            // Another layout over the same documents — one whose stripe 0 is the very same
            // document (same step per stripe, start and bounds: only the count differs) when
            // there is one — is a conflict, and nothing is written.
            let s0 = &states[0];
            let total = s0.step;
            let others: Vec<u32> = (1..=8u32)
                .filter(|c| *c != count && total % i64::from(*c) == 0)
                .collect();
            let (other, spec) = if others.is_empty() {
                (count % 5 + 1, Spec::default())
            } else {
                let c = rng.pick(&others);
                let spec = Spec::default()
                    .with_step(total / i64::from(c))
                    .with_min(s0.min)
                    .with_max(s0.max)
                    .with_start(s0.start.unwrap_or_else(|| s0.value.saturating_add(s0.step)));
                (c, spec)
            };
            let r = d.ensure_striped("ids", other, spec).await;
            assert!(
                matches!(
                    r,
                    Err(Error::SpecConflict { .. } | Error::InvalidSpec { .. })
                ),
                "a second layout ({other} stripes over {count}) must conflict: {:?}",
                r.as_ref().map(|s| s.stripes())
            );
            for k in count..other {
                let extra = d.peek(&stripe_name("ids", k)).await;
                assert!(
                    matches!(extra, Err(Error::NotFound { .. })),
                    "a refused layout wrote stripe {k}: {extra:?}"
                );
            }
            world.count("striped: another layout (conflict)");
        }
        4 => {
            let r = d.open_striped("ids").await;
            assert!(r.is_ok(), "{:?}", r.err());
            world.count("striped: open");
        }
        _ => {
            // Delete and create again with any layout and direction: a new era.
            let from = Instant::now();
            let _ = striped.delete().await;
            let stripes = rng.range(1, 5) as u32;
            let spec = if rng.chance(30) {
                Spec::default()
                    .with_step(-rng.range(1, 3))
                    .with_min(i64::MIN / 2)
                    .with_max(0)
                    .with_start(-rng.range(0, 100))
            } else {
                Spec::default()
                    .with_step(rng.range(1, 3))
                    .with_start(rng.range(1, 300))
            };
            d.ensure_striped("ids", stripes, spec).await.unwrap();
            world.ids.era_change(from);
            world.count("striped: delete + re-create with any layout (new era)");
        }
    }
}

/// One round of the daily scopes: draws today; the clock moves on by up to 30 hours; old days
/// are cleaned up while today draws (the live day is refused); the template or today's scope
/// is altered. Scoped numbers must be unique per scope.
pub async fn scopes(
    seed: u64,
    d: Dispenser,
    daily: DailySequence,
    clock: Arc<AtomicI64>,
    world: Arc<World>,
) {
    let mut rng = Rng(seed);
    let mut got = Vec::new();
    let draw = async |got: &mut Vec<(String, i64)>| match daily.next().await {
        Ok(t) => got.push((t.scope, t.number)),
        Err(e) if tolerated(&e) => {}
        Err(e) => panic!("daily draw failed: {e}"),
    };
    for _ in 0..10 {
        draw(&mut got).await;
    }
    clock.fetch_add(rng.range(0, 30) * 3600, Ordering::SeqCst);
    draw(&mut got).await;
    let day = daily.today();
    let today = day.to_string();
    // Today's scope exists now: a cut-off after it is refused.
    let refused = daily.delete_scopes_before(day.tomorrow().unwrap()).await;
    assert!(
        matches!(refused, Err(Error::InvalidArgument { .. })),
        "deleting the live scope must be refused: {refused:?}"
    );
    // Alter the template (future days) or today's scope: bounds, step of the same sign,
    // format; force or not. (No cycle: a scope's numbers are unique for the day.)
    let target = if rng.chance(50) {
        "tickets".to_owned()
    } else {
        format!("tickets@{today}")
    };
    if let Ok(s) = d.peek(&target).await {
        let mut change = Alter::default().with_max(rng.around_any(&[s.value, s.max]));
        let force = rng.chance(30);
        if rng.chance(40) {
            change = change.with_step(rng.range(1, 5));
        }
        let r = async {
            d.open(&target)
                .await?
                .alter(change.clone())
                .force(force)
                .await
        }
        .await;
        assert!(
            r.is_ok() || matches!(r, Err(Error::InvalidSpec { .. })),
            "{target}: {change:?}: {r:?}"
        );
        world.count("scope: alter the template or today's scope");
    }
    let old = day.yesterday().unwrap().yesterday().unwrap();
    let (r, ()) = tokio::join!(daily.delete_scopes_before(old), async {
        for _ in 0..5 {
            draw(&mut got).await;
        }
    });
    r.unwrap();
    let mut scopes = world.scopes.lock().unwrap();
    for (scope, n) in got {
        scopes.entry(scope).or_default().push(n);
    }
}
