//! One vocabulary (issue 38): for every kind of sequence, `create` makes it and fails if it
//! exists, `ensure` makes it or opens it, `open` opens an existing one and never writes.

use dispenser::gapless::GaplessOptions;
use dispenser::queue::QueueSpec;
use dispenser::stripe::StripedSequence;
use dispenser::{Error, Spec};

use crate::common::Fixture;

/// How many documents the fixture's collections hold (sequences, gap-free states, queues).
async fn documents(f: &Fixture) -> u64 {
    let db = f.client.database(crate::common::DB);
    let mut n = 0;
    for c in [
        f.collection.clone(),
        format!("{}_gapless", f.collection),
        format!("{}_queues", f.collection),
    ] {
        n += db
            .collection::<dispenser::mongodb::bson::Document>(&c)
            .count_documents(dispenser::mongodb::bson::doc! {})
            .await
            .unwrap();
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_ensure_and_open_mean_the_same_for_every_kind() {
    let f = Fixture::new("vocabulary").await;
    let d = f.dispenser(f.options());
    let is_exists = |e: &Error| e.kind() == dispenser::ErrorKind::AlreadyExists;
    let is_missing = |e: &Error| e.kind() == dispenser::ErrorKind::NotFound;

    // open of what does not exist: an error, and nothing written.
    let before = documents(&f).await;
    d.ensure("invoices", Spec::default()).await.unwrap(); // the scopes' template
    let before = before + 1;
    assert!(is_missing(&d.open("nope").await.unwrap_err()));
    assert!(is_missing(
        &d.open_scope("invoices", "acme").await.unwrap_err()
    ));
    assert!(is_missing(&d.open_gapless("inv-2027").await.unwrap_err()));
    assert!(is_missing(&d.open_queue("post").await.unwrap_err()));
    assert!(is_missing(
        &StripedSequence::open(&d, "ids").await.err().unwrap()
    ));
    assert_eq!(documents(&f).await, before, "an open wrote");

    // create makes; a second create fails; ensure and open then open it.
    d.create("orders", Spec::default()).await.unwrap();
    assert!(is_exists(
        &d.create("orders", Spec::default()).await.unwrap_err()
    ));
    d.ensure("orders", Spec::default()).await.unwrap();
    d.open("orders").await.unwrap();

    let acme = d.create_scope("invoices", "acme").await.unwrap();
    assert_eq!(acme.next().await.unwrap(), 1);
    assert!(is_exists(
        &d.create_scope("invoices", "acme").await.unwrap_err()
    ));
    assert_eq!(
        d.ensure_scope("invoices", "acme")
            .await
            .unwrap()
            .next()
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        d.open_scope("invoices", "acme")
            .await
            .unwrap()
            .next()
            .await
            .unwrap(),
        3
    );

    let business = format!("{}_business", f.collection);
    let options = || GaplessOptions::new(business.as_str(), "number");
    d.create_gapless("inv-2027", options()).await.unwrap();
    assert!(is_exists(
        &d.create_gapless("inv-2027", options()).await.err().unwrap()
    ));
    d.ensure_gapless("inv-2027", options()).await.unwrap();
    let opened = d.open_gapless("inv-2027").await.unwrap();
    assert_eq!(opened.status().await.unwrap().next, 1);

    d.create_queue("post", QueueSpec::default().with_max(9))
        .await
        .unwrap();
    assert!(is_exists(
        &d.create_queue("post", QueueSpec::default().with_max(9))
            .await
            .err()
            .unwrap()
    ));
    d.ensure_queue("post", QueueSpec::default().with_max(9))
        .await
        .unwrap();
    d.open_queue("post").await.unwrap();

    StripedSequence::create(&d, "ids", 3, Spec::default())
        .await
        .unwrap();
    assert!(is_exists(
        &StripedSequence::create(&d, "ids", 3, Spec::default())
            .await
            .err()
            .unwrap()
    ));
    StripedSequence::ensure(&d, "ids", 3, Spec::default())
        .await
        .unwrap();
    assert_eq!(StripedSequence::open(&d, "ids").await.unwrap().stripes(), 3);
}
