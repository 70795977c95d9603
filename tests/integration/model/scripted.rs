//! Scripted rounds: the interleavings a random schedule reaches too rarely, with random
//! parameters, each on a fresh sequence of its own (so versions stay small and the catch-up
//! is exact) and with nothing else running. A handle or a block client remembers a state of
//! a sequence that is then deleted and created again; the new document is written until it
//! stands at exactly the version remembered; then the stale one writes.
//!
//! * **stale compare-and-set** and **stale pinned write**: a handle draws (compare-and-set,
//!   optimistic; or the conditional increment's pinned write), *another client draws after
//!   it* (so the number after the stale state was issued), the sequence is re-created ahead
//!   (the same era) and caught up to the stale handle's version; its next write must not
//!   match the new document, or it returns a number the other client already has.
//! * **stale give-back**: a block client reserves a block; the sequence is re-created at its
//!   old start (a new era) and drawn to the very state the block's write left (same version,
//!   same value); closing the client must not give its tail back into the new document, or
//!   the new era issues those numbers twice.
//! * **forced bound raised again**: a bound is forced below the last issued number (the
//!   sequence is exhausted), then raised past it again; the next numbers must follow the last
//!   one issued, never the numbers between the two bounds again.

use std::sync::Arc;
use std::time::Instant;

use dispenser::mongodb::Collection;
use dispenser::mongodb::bson::{Document, doc};
use dispenser::{
    Dispenser, Format, Spec,
    block::BlockOptions,
    sequence::{CasMode, Strategy},
};

use super::log::{Subject, World};
use super::rng::Rng;

/// Which interleaving a scripted round sets up.
#[derive(Clone, Copy, Debug)]
pub enum Stale {
    CompareAndSet,
    PinnedWrite,
    GiveBack,
    /// Not a stale writer: a bound forced below the last number, then raised again; the
    /// numbers after it must carry on past the last one issued, never below it.
    ForcedBoundRaised,
}

/// The dispensers a scripted round uses.
pub struct Dispensers {
    pub inc: Dispenser,
    pub cas: Dispenser,
    /// Compare-and-set, always from the remembered state.
    pub cas_optimistic: Dispenser,
    /// The conditional increment, always trying the pinned write first.
    pub inc_optimistic: Dispenser,
}

impl Dispensers {
    pub fn new(base: &dispenser::Options, client: &dispenser::mongodb::Client) -> Self {
        let make = |strategy, mode| {
            Dispenser::new(
                client,
                base.clone().with_strategy(strategy).with_cas_mode(mode),
            )
            .expect("valid options")
        };
        Dispensers {
            inc: make(Strategy::ConditionalIncrement, CasMode::Adaptive),
            cas: make(Strategy::Cas, CasMode::Adaptive),
            cas_optimistic: make(Strategy::Cas, CasMode::Optimistic),
            inc_optimistic: make(Strategy::ConditionalIncrement, CasMode::Optimistic),
        }
    }
}

pub async fn round(
    seed: u64,
    kind: Stale,
    ds: &Dispensers,
    raw: &Collection<Document>,
    world: &Arc<World>,
) {
    let mut rng = Rng(seed);
    let name = format!("stale-{seed:x}");
    let subject = Arc::new(Subject::default());
    world
        .scripted
        .lock()
        .unwrap()
        .push((name.clone(), subject.clone()));
    match kind {
        Stale::CompareAndSet | Stale::PinnedWrite => {
            stale_handle(&mut rng, kind, &name, ds, raw, world, &subject).await
        }
        Stale::GiveBack => stale_give_back(&mut rng, &name, ds, raw, world, &subject).await,
        Stale::ForcedBoundRaised => forced_bound_raised(&mut rng, &name, ds, world, &subject).await,
    }
    world.count(format!("scripted: {kind:?}"));
}

fn other(rng: &mut Rng, ds: &Dispensers) -> Dispenser {
    if rng.chance(50) {
        ds.inc.clone()
    } else {
        ds.cas.clone()
    }
}

/// Writes `name` (a format-only alter, one write each) until it stands at `version`.
async fn catch_up(d: &Dispenser, name: &str, version: i64) {
    let f = Format::parse("S-{n}").expect("a valid format");
    loop {
        let v = d.peek(name).await.unwrap().version;
        assert!(v <= version, "caught up past {version}: {v}");
        if v == version {
            return;
        }
        d.open(name)
            .await
            .unwrap()
            .alter(dispenser::sequence::Alter::default().with_format(Some(f.clone())))
            .await
            .unwrap();
    }
}

async fn stale_handle(
    rng: &mut Rng,
    kind: Stale,
    name: &str,
    ds: &Dispensers,
    raw: &Collection<Document>,
    world: &World,
    subject: &Subject,
) {
    let step = rng.pick(&[1, 1, 2, 7, -1, -3]);
    let start = rng.range(-1_000, 1_000);
    let spec = Spec::default()
        .with_step(step)
        .with_min(i64::MIN + 1)
        .with_max(i64::MAX - 1)
        .with_start(start);
    ds.inc.create(name, spec).await.unwrap();
    let sleeper = match kind {
        Stale::CompareAndSet => ds.cas_optimistic.open(name).await.unwrap(),
        _ => ds.inc_optimistic.open(name).await.unwrap(),
    };
    for _ in 0..rng.range(1, 3) {
        let from = Instant::now();
        let n = sleeper.next().await.unwrap();
        subject.record(world, from, vec![n], "stale handle (before)".into());
    }
    // The version the sleeper's last write left: nobody else has written.
    let remembered = ds.inc.peek(name).await.unwrap().version;
    // Another client draws after it: the numbers right after the sleeper's state are issued.
    let o = other(rng, ds).open(name).await.unwrap();
    for _ in 0..rng.range(1, 4) {
        let from = Instant::now();
        let n = o.next().await.unwrap();
        subject.record(world, from, vec![n], "other client".into());
    }
    // Delete and create again beyond every issued number (the same era).
    let old = raw
        .find_one_and_delete(doc! { "_id": name })
        .await
        .unwrap()
        .expect("the sequence exists");
    let value = old.get_i64("value").unwrap();
    let gap = rng.range(1, 20) * step;
    ds.inc
        .create(name, spec.with_start(value + gap))
        .await
        .unwrap();
    // Draws on the new document, then writes until it stands at the remembered version.
    let fresh = other(rng, ds).open(name).await.unwrap();
    for _ in 0..rng.range(0, remembered - 1) {
        let from = Instant::now();
        let n = fresh.next().await.unwrap();
        subject.record(world, from, vec![n], "fresh client".into());
    }
    catch_up(&ds.inc, name, remembered).await;
    // The stale handle writes: it must re-read, not take the new document for the old one.
    for who in [
        "stale handle (after)",
        "fresh client",
        "stale handle (after)",
    ] {
        let h = if who == "fresh client" {
            &fresh
        } else {
            &sleeper
        };
        let from = Instant::now();
        let n = h.next().await.unwrap();
        subject.record(world, from, vec![n], who.into());
    }
}

async fn stale_give_back(
    rng: &mut Rng,
    name: &str,
    ds: &Dispensers,
    raw: &Collection<Document>,
    world: &World,
    subject: &Subject,
) {
    let d = other(rng, ds);
    let spec = Spec::default().with_start(rng.range(1, 1_000));
    d.create(name, spec).await.unwrap();
    // Some numbers before the block, one write each.
    let before = d.open(name).await.unwrap();
    for _ in 0..rng.range(0, 3) {
        let from = Instant::now();
        let n = before.next().await.unwrap();
        subject.record(world, from, vec![n], "before the block".into());
    }
    let size = rng.range(3, 20) as u64;
    let created = Instant::now();
    let blocks = d
        .open_blocks(name)
        .options(
            BlockOptions::default()
                .with_size(size)
                .with_prefetch(None)
                .with_range_share(None),
        )
        .await
        .unwrap();
    let taken = rng.range(1, size as i64 - 1);
    for _ in 0..taken {
        let n = blocks.next().await.unwrap();
        subject.record(world, created, vec![n], "block client".into());
    }
    // The block's write left this state.
    let state = d.peek(name).await.unwrap();
    let (version, last) = (state.version, state.value);
    // Delete, and create again at the old start: a new era, which issues the same numbers.
    let from = Instant::now();
    raw.delete_one(doc! { "_id": name }).await.unwrap();
    d.create(name, spec).await.unwrap();
    subject.era_change(from);
    // Draw the new document to the very state the block's write left: `version - 1` writes
    // of one number, then one write of the rest.
    let fresh = other(rng, ds).open(name).await.unwrap();
    let start = spec.start;
    let total = u64::try_from(last - start + 1).unwrap();
    for k in 0..version {
        let from = Instant::now();
        let n = if k + 1 < version {
            1
        } else {
            total - (version as u64 - 1)
        };
        let run = fresh.next_n(n).await.unwrap();
        subject.record(world, from, run.into_iter().collect(), "new era".into());
    }
    let now = d.peek(name).await.unwrap();
    assert_eq!(
        (now.version, now.value),
        (version, last),
        "the catch-up missed"
    );
    // Closing the stale block client must not give its tail back into the new document.
    let _ = blocks.close().await;
    let from = Instant::now();
    let run = fresh.next_n(size).await.unwrap();
    subject.record(
        world,
        from,
        run.into_iter().collect(),
        "new era after the close".into(),
    );
}

async fn forced_bound_raised(
    rng: &mut Rng,
    name: &str,
    ds: &Dispensers,
    world: &World,
    subject: &Subject,
) {
    let step = rng.pick(&[1, 1, 3, -1, -2]);
    let spec = Spec::default()
        .with_step(step)
        .with_min(-1_000_000)
        .with_max(1_000_000)
        .with_start(rng.range(-1_000, 1_000));
    let d = other(rng, ds);
    d.create(name, spec).await.unwrap();
    let h = other(rng, ds).open(name).await.unwrap();
    let drawn = rng.range(3, 20);
    for _ in 0..drawn {
        let from = Instant::now();
        let n = h.next().await.unwrap();
        subject.record(world, from, vec![n], "before".into());
    }
    let value = d.peek(name).await.unwrap().value;
    // A bound somewhere among the numbers issued (below the last one, in the direction).
    let back = rng.range(1, drawn - 1) * step;
    let change = if step > 0 {
        dispenser::sequence::Alter::default().with_max(value - back)
    } else {
        dispenser::sequence::Alter::default().with_min(value - back)
    };
    let refused = async { d.open(name).await?.alter(change.clone()).await }.await;
    assert!(
        matches!(refused, Err(dispenser::Error::InvalidSpec { .. })),
        "a bound below the last number without force: {refused:?}"
    );
    d.open(name)
        .await
        .unwrap()
        .alter(change)
        .force(true)
        .await
        .unwrap();
    let exhausted = h.next().await;
    assert!(
        exhausted
            .as_ref()
            .is_err_and(dispenser::Error::is_exhausted),
        "after a forced bound below the last number: {exhausted:?}"
    );
    // Raise it again past the last number: the next numbers follow the last one issued.
    let ahead = rng.range(5, 50) * step;
    let raise = if step > 0 {
        dispenser::sequence::Alter::default().with_max(value + ahead)
    } else {
        dispenser::sequence::Alter::default().with_min(value + ahead)
    };
    d.open(name).await.unwrap().alter(raise).await.unwrap();
    for _ in 0..rng.range(3, 5) {
        let from = Instant::now();
        let n = h.next().await.unwrap();
        subject.record(world, from, vec![n], "after the bound was raised".into());
    }
}
