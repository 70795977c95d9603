//! One trait for every source of numbers: the same generic code draws from a plain
//! sequence, blocks, stripes (with and without blocks) and a daily sequence, picked from a
//! configuration string, and every number is unique.

use std::collections::HashSet;

use dispenser::{
    Spec,
    source::{BoxNumberSource, NumberSource, SourceKind},
};

use crate::common::Fixture;

/// Generic code: knows nothing of the kind of source.
async fn draw_some(source: &impl NumberSource, n: usize) -> Vec<i64> {
    let mut out = Vec::new();
    while out.len() < n {
        let run = source.next_n(3).await.expect("next_n");
        assert!(run.count() >= 1 && run.count() <= 3, "{run:?}");
        out.extend(run);
        out.push(source.next().await.expect("next"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_source_is_drawn_through_one_trait() {
    let f = Fixture::new("sources").await;
    let d = f.dispenser(f.options());
    d.create("orders", Spec::default()).await.unwrap();
    d.ensure_striped("ids", 3, Spec::default()).await.unwrap();
    d.create("tickets", Spec::default()).await.unwrap();
    let mut orders = HashSet::new();
    for (name, kind) in [
        ("orders", "plain"),
        ("orders", "blocks:7"),
        ("orders", "plain"),
        ("ids", "striped"),
        ("ids", "striped-blocks:5"),
        ("tickets", "daily:UTC"),
    ] {
        let kind: SourceKind = kind.parse().unwrap();
        let source: BoxNumberSource = d.open_source(name, &kind).await.unwrap();
        assert_eq!(source.name(), name);
        let got = draw_some(&source, 20).await;
        let stats = source.stats();
        assert!(
            stats.issued >= 20 || matches!(kind, SourceKind::Daily(_)),
            "{kind:?}: {stats:?}"
        );
        let report = source.close().await.unwrap();
        if matches!(kind, SourceKind::Plain | SourceKind::Striped) {
            assert_eq!((report.given_back, report.lost), (0, 0), "{kind:?}");
        }
        if name == "orders" {
            for n in got {
                assert!(orders.insert(n), "{kind:?} issued {n} twice");
            }
        } else {
            let distinct: HashSet<i64> = got.iter().copied().collect();
            assert_eq!(distinct.len(), got.len(), "{kind:?}: {got:?}");
        }
    }
    // A plain run is contiguous and as long as asked.
    let plain = d.open_source("orders", &SourceKind::Plain).await.unwrap();
    assert_eq!(plain.next_n(5).await.unwrap().count(), 5);
    assert!(plain.next_n(0).await.is_err());
    // Unknown names fail as the concrete open would.
    assert!(matches!(
        d.open_source("nope", &SourceKind::Plain).await,
        Err(dispenser::Error::NotFound { .. })
    ));
}
