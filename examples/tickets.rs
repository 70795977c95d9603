//! The demo: a cyclic ticket dispenser (1 … 99, 0, 1 …) serving many concurrent counters.
//!
//! Each counter is its own handle (as if on its own machine) and draws tickets as fast as it
//! can. Together they draw whole cycles, so every ticket value must come out exactly the same
//! number of times; the summary checks that and counts duplicates. Run it with
//! `scripts/demo.sh` (it starts a local server when `MONGODB_URI` is unset).
//!
//! Options: `--counters N` (default 8), `--cycles N` (default 20), `--strategy inc|cas`.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Instant;

use dispenser::{Dispenser, Options, Spec, Strategy};

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

async fn run(args: Args) -> Result<bool, dispenser::Error> {
    let uri = std::env::var("MONGODB_URI").unwrap_or_else(|_| "mongodb://127.0.0.1:27017".into());
    let options = Options::default().with_strategy(args.strategy);
    let dispenser = Dispenser::connect(&uri, options).await?;
    let spec = Spec::default().with_max(MAX_TICKET).with_cycle(true);
    let before = dispenser.ensure("tickets", spec).await?;
    let first_state = dispenser.peek("tickets").await?;
    drop(before);

    let total = args.cycles * (MAX_TICKET as usize + 1);
    let per_counter = total / args.counters;
    let extra = total % args.counters;
    println!(
        "tickets 1..={MAX_TICKET}, 0 (cyclic) at {}: {} counters draw {total} tickets ({} cycles), {:?}",
        dispenser::redact_uri(&uri),
        args.counters,
        args.cycles,
        args.strategy
    );
    println!(
        "the sequence stands at {} after {} earlier cycle(s)",
        first_state.value, first_state.cycles
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
        println!(
            "counter {c:>3}: {} tickets, first {:?}, last {:?}",
            got.len(),
            got.first(),
            got.last()
        );
        conflicts += stats.conflicts;
        round_trips += stats.round_trips;
        all.extend(got);
    }
    let elapsed = started.elapsed();

    let mut seen: HashMap<i64, usize> = HashMap::new();
    for t in &all {
        *seen.entry(*t).or_default() += 1;
    }
    // Whole cycles were drawn: every value must appear exactly `cycles` times.
    let wrong: Vec<_> = (0..=MAX_TICKET)
        .filter(|v| seen.get(v).copied().unwrap_or(0) != args.cycles)
        .collect();
    let duplicates: usize = seen.values().map(|c| c.saturating_sub(args.cycles)).sum();
    let after = dispenser.peek("tickets").await?;
    println!("issued      {}", all.len());
    println!(
        "distinct    {} (each expected {} times)",
        seen.len(),
        args.cycles
    );
    println!("duplicates  {duplicates}");
    println!(
        "throughput  {:.0} tickets/s ({:.2?}), {round_trips} round trips, {conflicts} lost races",
        all.len() as f64 / elapsed.as_secs_f64(),
        elapsed
    );
    println!(
        "the sequence now stands at {} after {} cycle(s) in all",
        after.value, after.cycles
    );
    if !wrong.is_empty() || duplicates != 0 {
        eprintln!("tickets: FAILED: values with the wrong count: {wrong:?}");
        return Ok(false);
    }
    println!(
        "ok: every ticket value issued exactly {} times",
        args.cycles
    );
    Ok(true)
}
