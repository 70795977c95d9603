//! The demo: a cyclic ticket dispenser (1 … 99, 0, 1 …) serving many concurrent counters.
//!
//! Each counter is its own handle (as if on its own machine) and draws tickets as fast as it
//! can. Together they draw whole cycles and a few tickets more, so each run ends mid-cycle and
//! the next carries on from there; the summary checks that every ticket came out exactly as
//! often as it should and counts duplicates. Run it with
//! `scripts/demo.sh` (it starts a local server when `MONGODB_URI` is unset).
//!
//! Options: `--counters N` (default 8), `--cycles N` (default 20), `--strategy inc|cas`.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Instant;

use dispenser::{Dispenser, Options, Spec, sequence::Strategy};

const MAX_TICKET: i64 = 99;

struct Args {
    counters: usize,
    cycles: usize,
    strategy: Strategy,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        counters: 8,
        cycles: 20,
        strategy: Strategy::ConditionalIncrement,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--counters" => {
                args.counters = value()?
                    .parse()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or("--counters takes a whole number from 1 to 1000")?;
            }
            "--cycles" => {
                args.cycles = value()?
                    .parse()
                    .ok()
                    .filter(|n| (1..=10_000).contains(n))
                    .ok_or("--cycles takes a whole number from 1 to 10000")?;
            }
            "--strategy" => {
                args.strategy = match value()?.as_str() {
                    "inc" => Strategy::ConditionalIncrement,
                    "cas" => Strategy::Cas,
                    other => return Err(format!("--strategy takes inc or cas, not {other:?}")),
                };
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("tickets: {e}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("tickets: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Tickets drawn on top of whole cycles, so that each run ends mid-cycle and the next one
/// visibly carries on from there.
const EXTRA: usize = 37;

/// The ticket after `n` (1 … 99, then 0, then 1 again).
fn after(n: i64) -> i64 {
    if n >= MAX_TICKET { 0 } else { n + 1 }
}

fn how(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::Cas => "compare-and-set: read, then write if no one else wrote meanwhile",
        _ => "conditional increment: one round trip per ticket",
    }
}

async fn run(args: Args) -> Result<bool, dispenser::Error> {
    let uri = std::env::var("MONGODB_URI").unwrap_or_else(|_| "mongodb://127.0.0.1:27017".into());
    let options = Options::default().with_strategy(args.strategy);
    let dispenser = Dispenser::connect(&uri, options).await?;
    let spec = Spec::default().with_max(MAX_TICKET).with_cycle(true);
    dispenser.ensure("tickets", spec).await?;
    let before = dispenser.peek("tickets").await?;
    let first = before.next_number().unwrap_or(1);

    let total = args.cycles * (MAX_TICKET as usize + 1) + EXTRA;
    let per_counter = total / args.counters;
    let extra = total % args.counters;
    println!(
        "The ticket machine \"tickets\" hands out 1, 2, … {MAX_TICKET}, then 0 and round again (stored at {}).",
        dispenser::error::redact::redact_uri(&uri)
    );
    if before.cycles == 0 && before.value == 0 {
        println!(
            "Before this run: a new machine, nothing handed out yet; the first ticket is {first}."
        );
    } else {
        println!(
            "Before this run: the last ticket handed out was {}, after {} full round(s); this run carries on at {first}.",
            before.value, before.cycles
        );
    }
    println!(
        "Now {} counters, each as if on its own machine, hand out {total} tickets at once ({}).",
        args.counters,
        how(args.strategy)
    );

    let started = Instant::now();
    let mut handles = Vec::new();
    for c in 0..args.counters {
        let dispenser = dispenser.clone();
        let n = per_counter + usize::from(c < extra);
        handles.push(tokio::spawn(async move {
            let seq = dispenser.open("tickets").await?;
            let mut got = Vec::with_capacity(n);
            for _ in 0..n {
                got.push(seq.next().await?);
            }
            Ok::<_, dispenser::Error>((got, seq.stats()))
        }));
    }
    let mut all = Vec::with_capacity(total);
    let mut conflicts = 0;
    let mut round_trips = 0;
    for (c, h) in handles.into_iter().enumerate() {
        let (got, stats) = h.await.expect("counter task panicked")?;
        match (got.first(), got.last()) {
            (Some(a), Some(b)) => println!(
                "  counter {:>2}: {:>5} tickets, its first {a:>2}, its last {b:>2}",
                c + 1,
                got.len()
            ),
            _ => println!("  counter {:>2}: no tickets", c + 1),
        }
        conflicts += stats.conflicts;
        round_trips += stats.round_trips;
        all.extend(got);
    }
    let elapsed = started.elapsed();

    // Which tickets this run must have handed out: `total` of them, from `first` on, round
    // and round. Each must have come out exactly that often, no more (a duplicate), no less.
    let mut expected: HashMap<i64, usize> = HashMap::new();
    let mut t = first;
    for _ in 0..total {
        *expected.entry(t).or_default() += 1;
        t = after(t);
    }
    let mut seen: HashMap<i64, usize> = HashMap::new();
    for t in &all {
        *seen.entry(*t).or_default() += 1;
    }
    let wrong: Vec<_> = (0..=MAX_TICKET)
        .filter(|v| seen.get(v) != expected.get(v))
        .collect();
    let duplicates: usize = seen
        .iter()
        .map(|(v, c)| c.saturating_sub(expected.get(v).copied().unwrap_or(0)))
        .sum();
    let now = dispenser.peek("tickets").await?;
    println!(
        "After this run: the last ticket handed out is {}, after {} full round(s) in all; the next run starts at {}.",
        now.value,
        now.cycles,
        after(now.value)
    );
    println!(
        "Speed: {:.0} tickets/s ({:.2?} for {}), {round_trips} writes, {conflicts} lost race(s) retried.",
        all.len() as f64 / elapsed.as_secs_f64(),
        elapsed,
        all.len()
    );
    if !wrong.is_empty() || duplicates != 0 {
        eprintln!(
            "tickets: FAILED: {duplicates} duplicate(s); tickets handed out the wrong number of times: {wrong:?}"
        );
        return Ok(false);
    }
    println!(
        "Check: OK, every ticket came out exactly as often as it should ({} or {} times each), no duplicates.",
        total / (MAX_TICKET as usize + 1),
        total / (MAX_TICKET as usize + 1) + 1
    );
    Ok(true)
}
