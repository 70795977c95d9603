//! `alter` on live sequences: alters racing draws of every kind (plain handles of both
//! strategies, coalesced callers, block clients), with a no-duplicates and within-bounds
//! check after each alter; refusals write nothing; `--force` does what it says; the CLI and
//! the service.

use std::collections::HashSet;
use std::time::Instant;

use dispenser::block::BlockOptions;
use dispenser::{Error, Options, Spec, sequence::Alter, sequence::Strategy};
use futures::future::join_all;

use crate::common::Fixture;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn alters_racing_draws_of_every_kind_never_duplicate_and_respect_the_new_shape() {
    let f = Fixture::new("alter_race").await;
    let inc = f.dispenser(f.options());
    let cas = f.dispenser(f.options().with_strategy(Strategy::Cas));
    inc.create("orders", Spec::default().with_max(1_000_000))
        .await
        .unwrap();
    let shared_inc = inc.open("orders").await.unwrap();
    let shared_cas = cas.open("orders").await.unwrap();
    let mut seen: HashSet<i64> = HashSet::new();
    let mut seed: u64 = 0x5eed;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for round in 0..30 {
        let state = inc.peek("orders").await.unwrap();
        let change = match rnd(3) {
            0 => Alter::default().with_step(1 + rnd(3) as i64),
            1 => Alter::default().with_max(state.max + 1 + rnd(1000) as i64),
            _ => Alter::default().with_min(state.value.max(0) + rnd(20) as i64),
        };
        let draws = join_all((0..6).map(|t| {
            let seq = if t % 2 == 0 {
                shared_inc.clone()
            } else {
                shared_cas.clone()
            };
            let d = inc.clone();
            async move {
                let mut out: Vec<(Instant, i64, bool)> = Vec::new();
                if t == 5 {
                    let b = d
                        .open_blocks("orders")
                        .options(BlockOptions::default().with_size(7))
                        .await
                        .unwrap();
                    for _ in 0..30 {
                        out.push((Instant::now(), b.next().await.unwrap(), true));
                    }
                    b.close().await.unwrap();
                } else {
                    for _ in 0..30 {
                        let t0 = Instant::now();
                        out.push((t0, seq.next().await.unwrap(), false));
                    }
                }
                out
            }
        }));
        let alter = async {
            tokio::time::sleep(std::time::Duration::from_millis(rnd(15))).await;
            let done = inc
                .open("orders")
                .await
                .unwrap()
                .alter(change.clone())
                .await
                .unwrap();
            (Instant::now(), done)
        };
        let (drawn, (altered_at, after)) = tokio::join!(draws, alter);
        for (t0, n, from_block) in drawn.into_iter().flatten() {
            assert!(
                seen.insert(n),
                "round {round}: {n} issued twice (alter {change:?})"
            );
            // A plain call that began after the alter returned follows the new shape.
            if !from_block && t0 > altered_at {
                assert!(
                    (after.min..=after.max).contains(&n),
                    "round {round}: {n} outside the new bounds {}..={}",
                    after.min,
                    after.max
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_alters_write_nothing_and_force_does_what_it_says() {
    let f = Fixture::new("alter_refuse").await;
    let d = f.dispenser(
        Options::default()
            .with_database(crate::common::DB)
            .with_collection(f.collection.as_str()),
    );
    let seq = d.create("orders", Spec::default()).await.unwrap();
    let _issued = seq.next_n(60).await.unwrap();
    let before = d.peek("orders").await.unwrap();
    for (bad, force) in [
        (Alter::default().with_max(50), false),
        (Alter::default().with_step(0), false),
        (Alter::default().with_min(10).with_max(5), false),
        // A step of the other sign, force or not: 59, 58, … were issued.
        (Alter::default().with_step(-1), false),
        (Alter::default().with_step(-3), true),
        // Cycle on without force: 0, 1, … would come again after the wrap.
        (Alter::default().with_cycle(true), false),
    ] {
        let err = async { d.open("orders").await?.alter(bad).force(force).await }
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidSpec { .. }), "{err}");
    }
    assert!(matches!(
        async { d.open("orders").await?.alter(Alter::default()).await }.await,
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(d.peek("orders").await.unwrap().version, before.version);
    // Forced below the last number: a non-cyclic sequence is exhausted at once, and a bound
    // raised again later continues after the last issued number (60), never below it.
    d.open("orders")
        .await
        .unwrap()
        .alter(Alter::default().with_max(50))
        .force(true)
        .await
        .unwrap();
    assert!(seq.next().await.unwrap_err().is_exhausted());
    let state = d
        .open("orders")
        .await
        .unwrap()
        .alter(Alter::default().with_max(70))
        .await
        .unwrap();
    assert_eq!((state.value, state.next_number()), (60, Some(61)));
    assert_eq!(seq.next().await.unwrap(), 61);
    d.open("orders")
        .await
        .unwrap()
        .alter(Alter::default().with_max(50))
        .force(true)
        .await
        .unwrap();
    // Cyclic: the next number wraps to min.
    let state = d
        .open("orders")
        .await
        .unwrap()
        .alter(Alter::default().with_max(40).with_cycle(true))
        .force(true)
        .await
        .unwrap();
    assert_eq!(state.next_number(), Some(0));
    assert_eq!(seq.next().await.unwrap(), 0);
    // A raised min moves the sequence forward; a stripe keeps its step.
    let state = d
        .open("orders")
        .await
        .unwrap()
        .alter(
            Alter::default()
                .with_min(30)
                .with_cycle(false)
                .with_max(1000),
        )
        .await
        .unwrap();
    assert_eq!(state.next_number(), Some(30));
    d.ensure_striped("ids", 2, Spec::default()).await.unwrap();
    let err = async {
        d.open("ids~0")
            .await?
            .alter(Alter::default().with_step(3))
            .await
    }
    .await
    .unwrap_err();
    assert!(err.to_string().contains("residue class"), "{err}");
}

/// `dispenser ARGS` on the test server and `coll`.
fn cli(coll: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", crate::common::uri())
        .args(["--db", crate::common::DB, "--collection", coll])
        .args(args)
        .output()
        .expect("run dispenser")
}

#[test]
fn the_cli_alters_a_sequence() {
    crate::common::ready();
    let coll = crate::common::unique("cli_alter");
    let run = |args: &[&str]| cli(&coll, args);
    assert!(run(&["create", "tickets", "--max", "9"]).status.success());
    // Turning cycle on repeats numbers after the wrap: refused without --force, nothing
    // written.
    let out = run(&[
        "alter", "tickets", "--max", "99", "--cycle", "--format", "T-{n:02}",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("repeat after the wrap") && err.contains("force"),
        "{err}"
    );
    let peek: serde_json::Value =
        serde_json::from_slice(&run(&["peek", "tickets", "--json"]).stdout).unwrap();
    assert_eq!(
        (peek["max"].as_i64(), peek["version"].as_i64()),
        (Some(9), Some(0))
    );
    let out = run(&[
        "alter", "tickets", "--max", "99", "--cycle", "--format", "T-{n:02}", "--force",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let peek: serde_json::Value =
        serde_json::from_slice(&run(&["peek", "tickets", "--json"]).stdout).unwrap();
    assert_eq!(
        (peek["max"].as_i64(), peek["cycle"].as_bool()),
        (Some(99), Some(true))
    );
    assert_eq!(peek["format"].as_str(), Some("T-{n:02}"));
    let out = run(&["alter", "tickets", "--step", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("step must not be 0"));
    let out = run(&["alter", "tickets", "--no-format", "--no-cycle"]);
    assert!(out.status.success());
    let peek: serde_json::Value =
        serde_json::from_slice(&run(&["peek", "tickets", "--json"]).stdout).unwrap();
    assert!(peek["format"].is_null() && peek["cycle"] == false, "{peek}");
}

/// The reproduction: 1…5 drawn, then `alter --step -1` (with or without --force)
/// would have issued 4, 3, 2 again. Refused, exit 2, nothing written; the mirror case
/// (descending → ascending) too; the next numbers carry on.
#[test]
fn a_step_of_the_other_sign_is_refused_whatever_force_says() {
    crate::common::ready();
    let coll = crate::common::unique("cli_alter_sign");
    let run = |args: &[&str]| cli(&coll, args);
    let numbers = |out: std::process::Output| -> Vec<i64> {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    };
    assert!(run(&["create", "orders"]).status.success());
    assert_eq!(
        numbers(run(&["next", "orders", "--count", "5"])),
        [1, 2, 3, 4, 5]
    );
    for args in [
        &["alter", "orders", "--step", "-1"][..],
        &["alter", "orders", "--step", "-1", "--force"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("step of -1") && err.contains("create a new sequence"),
            "{err}"
        );
    }
    assert_eq!(numbers(run(&["next", "orders", "--count", "3"])), [6, 7, 8]);
    assert!(
        run(&[
            "create", "down", "--step", "-1", "--min", "-100", "--max", "0", "--start", "0"
        ])
        .status
        .success()
    );
    assert_eq!(numbers(run(&["next", "down", "--count", "3"])), [0, -1, -2]);
    let out = run(&["alter", "down", "--step", "2", "--force"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(numbers(run(&["next", "down"])), [-3]);
}

/// A striped sequence is altered as a whole: the change is planned for every stripe before
/// any is written, so a bound that only a later stripe refuses (it would strand that
/// stripe's last number) writes nothing to the earlier ones either. Through the CLI (by the
/// striped name) and the library.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_striped_alter_that_one_stripe_refuses_writes_nothing() {
    let f = Fixture::new("alter_striped").await;
    let d = f.dispenser(f.options());
    let ids = d.ensure_striped("ids", 2, Spec::default()).await.unwrap();
    // Stripe 0 issues 1, 3, 5, …; stripe 1 issues 2, 4, 6, …; draw stripe 1 further ahead.
    let stripe1 = d.open("ids~1").await.unwrap();
    for _ in 0..10 {
        stripe1.next().await.unwrap();
    }
    ids.next().await.unwrap();
    let before = ids.peek().await.unwrap();
    let (v0, v1) = (before[0].value, before[1].value);
    assert!(v0 < v1, "{v0} {v1}");
    // A max between them: fine for stripe 0, strands stripe 1's last number.
    let change = Alter::default().with_max(v0 + 2);
    let err = ids.alter(change.clone()).await.unwrap_err();
    assert!(matches!(err, Error::InvalidSpec { .. }), "{err}");
    assert!(err.to_string().contains("ids~1"), "{err}");
    let after = ids.peek().await.unwrap();
    assert_eq!(
        (after[0].version, after[0].max, after[1].version),
        (before[0].version, before[0].max, before[1].version),
        "a refused striped alter wrote a stripe"
    );
    // A format or nothing to change: refused too.
    for (bad, force) in [
        (Alter::default().with_format(None), false),
        (Alter::default(), true),
    ] {
        let err = ids.alter(bad).force(force).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    }
    // The CLI takes the striped name.
    let out = cli(
        &f.collection,
        &["alter", "ids", "--max", &(v1 + 1000).to_string()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    let after = ids.peek().await.unwrap();
    assert!(after.iter().all(|s| s.max == v1 + 1000), "{after:?}");
    // With force, the bound that stranded stripe 1 is accepted: it is exhausted, stripe 0
    // carries on, nothing repeats.
    ids.alter(change).force(true).await.unwrap();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..3 {
        match ids.next().await {
            Ok(n) => assert!(n > v0 && n <= v0 + 2 && seen.insert(n), "{n}"),
            Err(e) => assert!(e.is_exhausted(), "{e}"),
        }
    }
}
