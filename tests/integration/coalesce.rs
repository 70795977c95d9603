//! Coalesced draws: concurrent calls on one handle share writes, stay linearizable, respect
//! wraps and bounds inside a batch, fail together when their write fails, and a caller that
//! gives up while queued reserves nothing.

use std::time::{Duration, Instant};

use dispenser::{Error, Options, Spec, sequence::Strategy};
use futures::future::join_all;

use crate::common::{Fixture, assert_each_exactly};
use crate::proxy::{Faults, Proxy};

const STRATEGIES: [Strategy; 2] = [Strategy::ConditionalIncrement, Strategy::Cas];

fn patient(o: Options) -> Options {
    o.with_backoff(
        dispenser::sequence::Backoff::default()
            .with_max_attempts(100_000)
            .with_max_elapsed(Duration::from_secs(120)),
    )
}

/// (invoke, return, number) of every call; panics if a call began after another returned
/// and still got a smaller number (the sequence ascends).
fn assert_linearizable(mut calls: Vec<(Instant, Instant, i64)>) {
    calls.sort_by_key(|c| c.1);
    let mut prefix_max = Vec::with_capacity(calls.len());
    let mut m = i64::MIN;
    for c in &calls {
        m = m.max(c.2);
        prefix_max.push(m);
    }
    for c in &calls {
        // Calls that returned before this one was invoked.
        let k = calls.partition_point(|d| d.1 < c.0);
        if k > 0 {
            assert!(
                prefix_max[k - 1] < c.2,
                "{} was returned after {} had been returned before the call began",
                c.2,
                prefix_max[k - 1]
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_on_one_handle_share_writes_and_stay_linearizable() {
    for strategy in STRATEGIES {
        let f = Fixture::new("coalesce").await;
        let d = f.dispenser(patient(f.options().with_strategy(strategy)));
        let seq = d.create("orders", Spec::default()).await.unwrap();
        let tasks = (0..32).map(|_| {
            let seq = seq.clone();
            tokio::spawn(async move {
                let mut calls = Vec::new();
                for _ in 0..200 {
                    let t0 = Instant::now();
                    let n = seq.next().await.expect("next");
                    calls.push((t0, Instant::now(), n));
                }
                calls
            })
        });
        let calls: Vec<_> = join_all(tasks)
            .await
            .into_iter()
            .flat_map(|r| r.unwrap())
            .collect();
        assert_each_exactly(calls.iter().map(|c| c.2).collect(), 1..=6400, 1);
        assert_linearizable(calls);
        let s = seq.stats();
        assert_eq!(s.issued, 6400, "{strategy:?}");
        assert!(
            s.batches < 6400 && s.max_batch > 1 && s.coalesced_calls > 0,
            "{strategy:?}: no write was shared: {s:?}"
        );
        assert_eq!(s.batched_calls, 6400, "{strategy:?}: {s:?}");
        eprintln!(
            "{strategy:?}: 6400 calls in {} writes (largest batch {})",
            s.writes, s.max_batch
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_coalescing_every_call_writes() {
    let f = Fixture::new("no_coalesce").await;
    let d = f.dispenser(f.options().with_coalesce(false));
    let seq = d.create("orders", Spec::default()).await.unwrap();
    let got = join_all((0..8).map(|_| {
        let seq = seq.clone();
        async move {
            let mut v = Vec::new();
            for _ in 0..25 {
                v.push(seq.next().await.unwrap());
            }
            v
        }
    }))
    .await
    .concat();
    assert_each_exactly(got, 1..=200, 1);
    let s = seq.stats();
    // Every call won a write of its own (the others are the pinned writes that lost to a
    // sibling task and were followed by the conditional increment).
    assert_eq!(
        (s.writes - s.conflicts, s.coalesced_calls, s.batches),
        (200, 0, 0),
        "{s:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cyclic_batches_stop_at_the_wrap_and_every_ticket_comes_out_equally() {
    for strategy in STRATEGIES {
        let f = Fixture::new("coalesce_cyclic").await;
        let d = f.dispenser(patient(f.options().with_strategy(strategy)));
        let spec = Spec::default().with_start(0).with_max(9).with_cycle(true);
        let seq = d.create("tickets", spec).await.unwrap();
        let got = join_all((0..16).map(|_| {
            let seq = seq.clone();
            async move {
                let mut v = Vec::new();
                for _ in 0..40 {
                    v.push(seq.next().await.unwrap());
                }
                v
            }
        }))
        .await
        .concat();
        assert_each_exactly(got, 0..=9, 64);
        assert!(seq.stats().max_batch > 1, "{strategy:?}");
        assert_eq!(d.peek("tickets").await.unwrap().cycles, 63, "{strategy:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exhaustion_inside_a_batch_fails_only_the_callers_past_the_bound() {
    for strategy in STRATEGIES {
        let f = Fixture::new("coalesce_bound").await;
        let d = f.dispenser(patient(f.options().with_strategy(strategy)));
        let seq = d
            .create("orders", Spec::default().with_max(100))
            .await
            .unwrap();
        let runs = join_all((0..16).map(|_| {
            let seq = seq.clone();
            async move {
                let mut runs = Vec::new();
                loop {
                    match seq.next_n(7).await {
                        Ok(run) => runs.push(run),
                        Err(Error::Exhausted {
                            requested,
                            remaining,
                            ..
                        }) => {
                            assert_eq!(requested, 7);
                            assert!(remaining < 7, "{remaining} left but refused");
                            return runs;
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        }))
        .await
        .concat();
        assert!(runs.iter().all(|r| r.count() == 7), "{strategy:?}");
        let numbers: Vec<i64> = runs.iter().flat_map(|r| r.into_iter()).collect();
        assert_each_exactly(numbers, 1..=98, 1);
        // The two left are still there, for a caller that fits.
        let last = seq.next_n(2).await.unwrap();
        assert_eq!((last.first(), last.last()), (99, 100), "{strategy:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_write_fails_its_callers_promptly() {
    crate::common::ready();
    // A closed port: every write fails; the queued callers must not wait one timeout each.
    // 64 callers: taking turns would take 32 s; failing together takes about one timeout, so
    // the bound (16 timeouts, 8 s) holds on a loaded machine and still tells the two apart.
    const CALLERS: usize = 64;
    let timeout = Duration::from_millis(500);
    let options = Options::default()
        .with_database(crate::common::DB)
        .with_collection("never_written")
        .with_operation_timeout(timeout);
    let d = dispenser::Dispenser::connect("mongodb://127.0.0.1:9/?directConnection=true", options)
        .await
        .unwrap();
    let t0 = Instant::now();
    let errs = join_all((0..CALLERS).map(|_| {
        let d = d.clone();
        async move { d.open("orders").await.map(|_| ()) }
    }))
    .await;
    assert!(errs.iter().all(|e| e.is_err()));
    assert!(t0.elapsed() < 16 * timeout, "took {:?}", t0.elapsed());

    // A reachable server through the fault proxy that then goes away.
    let f = Fixture::new("coalesce_fail").await;
    let proxy = Proxy::to_test_server(Faults::default(), 7).await;
    let via = f.options().with_operation_timeout(timeout);
    let d = dispenser::Dispenser::connect(&proxy.uri(""), via)
        .await
        .unwrap();
    let seq = d.create("orders", Spec::default()).await.unwrap();
    assert_eq!(seq.next().await.unwrap(), 1);
    proxy.set_faults(Faults {
        reset: 1.0,
        include_handshakes: true,
        ..Faults::default()
    });
    let t0 = Instant::now();
    let results = join_all((0..CALLERS).map(|_| {
        let seq = seq.clone();
        async move { seq.next().await }
    }))
    .await;
    assert!(results.iter().all(|r| r.is_err()), "{results:?}");
    assert!(
        t0.elapsed() < 16 * timeout,
        "{CALLERS} queued callers took {:?}",
        t0.elapsed()
    );
    proxy.set_faults(Faults::default());
    // Once the server is back (the driver reconnects), the handle draws again.
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        match seq.next().await {
            Ok(n) => break n,
            Err(e) if Instant::now() < deadline => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the server came back but draws still fail: {e}"),
        }
    };
    assert!(after > 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn callers_that_give_up_while_queued_reserve_nothing() {
    let f = Fixture::new("coalesce_cancel").await;
    let d = f.dispenser(f.options());
    let seq = d.create("orders", Spec::default()).await.unwrap();
    let (got, cancelled): (Vec<Vec<i64>>, Vec<u64>) = join_all((0..24).map(|t| {
        let seq = seq.clone();
        async move {
            let mut v = Vec::new();
            let mut cancelled = 0;
            for i in 0..60u64 {
                if (t + i) % 3 == 0 {
                    match tokio::time::timeout(Duration::from_micros(i * 7 % 300), seq.next()).await
                    {
                        Ok(r) => v.push(r.unwrap()),
                        Err(_) => cancelled += 1,
                    }
                } else {
                    v.push(seq.next().await.unwrap());
                }
            }
            (v, cancelled)
        }
    }))
    .await
    .into_iter()
    .unzip();
    let got: Vec<i64> = got.concat();
    let cancelled: u64 = cancelled.iter().sum();
    let mut sorted = got.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), got.len(), "a number was returned twice");
    // Every number the sequence moved past was returned, or belonged to a caller that gave
    // up after its write was sent: never more gaps than cancelled calls.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let value = d.peek("orders").await.unwrap().value as u64;
    let gaps = value - got.len() as u64;
    assert!(
        gaps <= cancelled,
        "{gaps} numbers reserved for nobody, but only {cancelled} calls gave up"
    );
    eprintln!("{} returned, {cancelled} gave up, {gaps} gaps", got.len());
}

/// Issue 40: when a round trip takes milliseconds, the callers a write answered are back in
/// the queue before the next write is sent, so each write carries nearly every task. (It used
/// to take the queue as soon as it had answered: found empty, the first caller back drew
/// alone and the others queued behind it — batches of 1 and 15 alternated, a mean of 8, and
/// at a 2 ms round trip the library drew 1.7× a raw `$inc`'s numbers where it draws 3×.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_slow_round_trip_each_write_carries_nearly_every_caller() {
    const TASKS: u64 = 16;
    const CALLS: u64 = 25;
    let f = Fixture::new("coalesce_slow_round_trip").await;
    let slow = Faults {
        max_latency: Duration::from_millis(4),
        ..Faults::default()
    };
    let proxy = Proxy::to_test_server(slow, 40).await;
    let d = dispenser::Dispenser::connect(&proxy.uri(""), f.options())
        .await
        .unwrap();
    let seq = d.create("orders", Spec::default()).await.unwrap();
    let tasks = (0..TASKS).map(|_| {
        let seq = seq.clone();
        tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..CALLS {
                got.push(seq.next().await.expect("next"));
            }
            got
        })
    });
    let numbers: Vec<i64> = join_all(tasks)
        .await
        .into_iter()
        .flat_map(|r| r.unwrap())
        .collect();
    let total = i64::try_from(TASKS * CALLS).unwrap();
    assert_each_exactly(numbers, 1..=total, 1);
    let s = seq.stats();
    let mean = s.batched_calls as f64 / s.batches as f64;
    eprintln!(
        "{} calls in {} writes: a mean batch of {mean:.1} of {TASKS} tasks; {}",
        s.batched_calls,
        s.batches,
        proxy.counts()
    );
    assert!(
        mean >= 0.75 * TASKS as f64,
        "a mean batch of {mean:.1} callers of {TASKS}: the writes leave callers behind ({s:?})"
    );
}

/// The counters tell batches apart exactly: a call queued alone behind an inline draw is a
/// batch of one, served by a write of its own — not coalesced; three queued together share
/// one write and are. (Found by cargo-mutants: counting a batch of one as coalesced went
/// unnoticed.) The calls are polled by hand, so the order is fixed: the first draws inline
/// (nothing in flight), the others queue while its write is out.
#[tokio::test]
async fn a_call_queued_alone_is_a_batch_of_one_and_only_shared_writes_count_as_coalesced() {
    let f = Fixture::new("coalesce_counts").await;
    let d = f.dispenser(f.options());
    d.create("orders", Spec::default()).await.unwrap();
    for queued in [1_usize, 3] {
        // A handle of its own (its own queue and counters): the last one's draining task
        // may still be lingering for late callers.
        let seq = d.open("orders").await.unwrap();
        let mut inline = std::pin::pin!(seq.next());
        assert!(futures::poll!(&mut inline).is_pending(), "its write is out");
        let mut others: Vec<_> = (0..queued).map(|_| Box::pin(seq.next())).collect();
        for o in &mut others {
            assert!(futures::poll!(o).is_pending(), "queued behind the write");
        }
        let first = inline.await.unwrap();
        let rest: Vec<i64> = join_all(others)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let want: Vec<i64> = (first + 1..).take(queued).collect();
        assert_eq!(
            rest, want,
            "in arrival order, after the inline call's number"
        );
        let s = seq.stats();
        assert_eq!(
            (s.batches, s.batched_calls, s.coalesced_calls, s.max_batch),
            (
                2,
                1 + queued as u64,
                if queued > 1 { queued as u64 } else { 0 },
                queued.max(1) as u64
            ),
            "{queued} queued: {s:?}"
        );
    }
}

/// Regression (issue 59, 6): a caller lined up behind a write in flight waited for that write
/// (up to the operation timeout), then for its own batch's (another timeout), while its error
/// said "timed out after 1s". Its time counts from its own call: it returns within about one
/// timeout, saying the outcome of its own write is unknown once that write was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_caller_in_line_times_out_one_timeout_after_its_call_not_two() {
    let f = Fixture::new("coalesce_line_timeout").await;
    let proxy = Proxy::to_test_server(Faults::default(), 11).await;
    let timeout = Duration::from_secs(1);
    let d =
        dispenser::Dispenser::connect(&proxy.uri(""), f.options().with_operation_timeout(timeout))
            .await
            .unwrap();
    let seq = d.create("orders", Spec::default()).await.unwrap();
    assert_eq!(seq.next().await.unwrap(), 1);
    // From now on every request's reply is swallowed and its connection stays silent.
    proxy.set_faults(Faults {
        drop_reply: 1.0,
        stall_share: 1.0,
        ..Faults::default()
    });
    let first = tokio::spawn({
        let seq = seq.clone();
        async move { seq.next().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    let lined = seq.next().await;
    let took = t0.elapsed();
    proxy.set_faults(Faults::default());
    let first = first.await.unwrap();
    assert!(matches!(first, Err(Error::Timeout { .. })), "{first:?}");
    let e = lined.expect_err("its write never answered");
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert!(
        took < timeout + timeout / 2,
        "the caller in line took {took:?} (two timeouts: {:?})",
        2 * timeout
    );
    // Its own write was sent (when the first one gave up): its outcome is unknown.
    assert_eq!(e.written(), dispenser::error::Written::Unknown, "{e}");
}

/// A caller whose time runs out while it waits in line (its batch not sent: the write in
/// flight is the one before it) leaves the line, says nothing was written, and nothing is
/// written for it after: the draw in flight wrote from a stale state (another handle drew;
/// that write held 600 ms at the proxy), lost, and its retry hung, so the caller behind
/// it is still in line at its deadline (found by cargo-mutants on `coalesce.rs`: a waiter left
/// in line, or told `unknown`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_whose_time_runs_out_in_line_leaves_it_and_nothing_is_written_for_it() {
    let f = Fixture::new("coalesce_line_deadline").await;
    let proxy = Proxy::to_test_server(Faults::default(), 64).await;
    let timeout = Duration::from_secs(1);
    let a = dispenser::Dispenser::connect(
        &proxy.uri(""),
        f.options()
            .with_operation_timeout(timeout)
            .with_strategy(Strategy::Cas),
    )
    .await
    .unwrap();
    let sa = a.create("orders", Spec::default()).await.unwrap();
    // Another handle draws: what `sa` remembers is stale, so its next write loses its race
    // and reads the sequence again.
    let b = f.dispenser(f.options());
    let sb = b.open("orders").await.unwrap();
    assert_eq!(sb.next().await.unwrap(), 1);
    let lost = proxy.hold_next("update", &f.collection);
    // Its retry after the lost race: the conditional increment (a findAndModify).
    let write = proxy.hold_next("findAndModify", &f.collection);
    let first = tokio::spawn({
        let sa = sa.clone();
        async move { sa.next().await }
    });
    tokio::time::timeout(Duration::from_secs(30), lost.arrived())
        .await
        .expect("the first draw's write reached the proxy");
    let lined = tokio::spawn({
        let sa = sa.clone();
        async move {
            let t0 = Instant::now();
            (sa.next().await, t0.elapsed())
        }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    lost.open();
    let (lined, took) = lined.await.unwrap();
    let e = lined.expect_err("its deadline came while the draw before it hung");
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert_eq!(
        e.written(),
        dispenser::error::Written::Nothing,
        "it never left the line: {e}"
    );
    assert!(took < timeout + timeout / 2, "{took:?}");
    let first = first.await.unwrap();
    assert!(first.is_err(), "its write hung: {first:?}");
    write.open();
    // Whatever the first draw's write did, nothing more is written for the caller that left.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let value = sb.peek().await.unwrap().value;
    assert!(
        value <= 2,
        "value {value}: one by the other handle, at most one by the first draw"
    );
}

/// Issue 63: the leader gathers the callers a write answered into the next write while they
/// keep coming back — a binding's come back one at a time (each Python thread takes the GIL in
/// turn, each Node.js Promise is settled on the one JavaScript thread). Here threads take turns
/// on one lock (the "GIL", held a random while between calls) and call through `block_on` as
/// the Python binding does, on two handles of two clients (their writes collide on the
/// document), through a proxy that delays each reply by a random 0–3 ms, asking 1–3 numbers a
/// call; some calls give up after a random 0–4 ms (in line: nothing reserved; after their write
/// was sent: a gap). Every number acknowledged must be unique and within what was written, for
/// both strategies. Seeded: `DISPENSER_COALESCE_SEED=<seed>` replays the choices (not the
/// timing).
#[test]
fn callers_gathered_while_they_come_back_one_at_a_time_never_share_a_number() {
    use std::sync::{Arc, Mutex};

    use crate::model::rng::Rng;

    const THREADS: u64 = 12;
    const CALLS: u64 = 40;
    let seed = crate::common::seed("DISPENSER_COALESCE_SEED");
    eprintln!("coalesce gather: seed {seed} (replay: DISPENSER_COALESCE_SEED={seed})");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for (k, strategy) in STRATEGIES.into_iter().enumerate() {
        let (handles, f, _proxy) = rt.block_on(async {
            let faults = Faults {
                max_latency: Duration::from_millis(3),
                ..Faults::default()
            };
            let proxy = Proxy::to_test_server(faults, seed ^ k as u64).await;
            let f = Fixture::new("coalesce_gather").await;
            let options = patient(f.options().with_strategy(strategy));
            f.dispenser(options.clone())
                .create("orders", Spec::default())
                .await
                .unwrap();
            let mut handles = Vec::new();
            for _ in 0..2 {
                let d = dispenser::Dispenser::connect(&proxy.uri(""), options.clone())
                    .await
                    .unwrap();
                handles.push(d.open("orders").await.unwrap());
            }
            (handles, f, proxy)
        });
        let gil = Arc::new(Mutex::new(()));
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let seq = handles[(t % 2) as usize].clone();
                let (gil, rt) = (gil.clone(), rt.handle().clone());
                let mut rng = Rng(seed.wrapping_add(1000 * k as u64 + t));
                std::thread::spawn(move || {
                    let (mut got, mut gave_up) = (Vec::new(), 0_u64);
                    for _ in 0..CALLS {
                        {
                            let _held = gil.lock().unwrap();
                            let hold = Duration::from_micros(rng.below(300));
                            let t0 = Instant::now();
                            while t0.elapsed() < hold {
                                std::hint::spin_loop();
                            }
                        }
                        let n = 1 + rng.below(3);
                        let call = seq.next_n(n);
                        let answer = if rng.chance(15) {
                            let patience = Duration::from_micros(rng.below(4000));
                            match rt.block_on(async { tokio::time::timeout(patience, call).await })
                            {
                                Ok(answer) => answer,
                                Err(_) => {
                                    gave_up += 1;
                                    continue;
                                }
                            }
                        } else {
                            rt.block_on(call)
                        };
                        let run = answer.expect("next_n");
                        got.extend(run);
                    }
                    (got, gave_up)
                })
            })
            .collect();
        let (mut numbers, mut gave_up) = (Vec::new(), 0);
        for t in threads {
            let (got, g) = t.join().unwrap();
            numbers.extend(got);
            gave_up += g;
        }
        let value =
            rt.block_on(async { f.dispenser(f.options()).peek("orders").await.unwrap().value });
        let count = numbers.len();
        numbers.sort_unstable();
        let dupes: Vec<i64> = numbers
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0])
            .collect();
        assert!(
            dupes.is_empty(),
            "{strategy:?}, seed {seed}: numbers issued twice: {:?}",
            &dupes[..dupes.len().min(20)]
        );
        assert!(
            numbers.first().is_none_or(|&n| n >= 1) && numbers.last().is_none_or(|&n| n <= value),
            "{strategy:?}, seed {seed}: numbers outside 1..={value} written"
        );
        if gave_up == 0 {
            assert_each_exactly(numbers, 1..=value, 1);
        }
        let (a, b) = (handles[0].stats(), handles[1].stats());
        eprintln!(
            "{strategy:?}: {count} numbers, {gave_up} calls gave up, {} + {} calls in {} + {} \
             writes (largest batches {}, {})",
            a.batched_calls, b.batched_calls, a.batches, b.batches, a.max_batch, b.max_batch
        );
    }
}
