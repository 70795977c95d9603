//! One vocabulary (issue 38): for every kind of sequence, `create` makes it and fails if it
//! exists, `ensure` makes it or opens it, `open` opens an existing one and never writes.

use dispenser::gapless::GaplessOptions;
use dispenser::queue::QueueSpec;
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
    assert!(is_missing(&d.open_striped("ids").await.err().unwrap()));
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
    assert_eq!(opened.peek().await.unwrap().next, 1);

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

    d.create_striped("ids", 3, Spec::default()).await.unwrap();
    assert!(is_exists(
        &d.create_striped("ids", 3, Spec::default())
            .await
            .err()
            .unwrap()
    ));
    d.ensure_striped("ids", 3, Spec::default()).await.unwrap();
    assert_eq!(d.open_striped("ids").await.unwrap().stripes(), 3);
}

/// Admin operations are methods of the handle (issue 38): a handle opened from a dispenser with a
/// caller records its alter, advance-to, reset, alter of the format and delete as that caller, each
/// answering the state the next draw follows; a queue's alter and delete likewise. An empty
/// change is refused by name and writes nothing, history included; a reset backwards without
/// force is recorded, refused; a handle that outlives its delete is refused, never handed a
/// number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_operations_are_methods_of_the_handle_recorded_as_its_caller() {
    use dispenser::queue::QueueAlter;
    use dispenser::sequence::Alter;

    let f = Fixture::new("vocabulary_admin").await;
    let d = f.dispenser(f.options().with_caller("ops"));
    let orders = d.create("orders", Spec::default()).await.unwrap();
    assert_eq!(orders.next().await.unwrap(), 1);
    let s = orders.alter(Alter::default().with_max(500)).await.unwrap();
    assert_eq!((s.max, s.next_number()), (500, Some(2)));
    let s = orders.advance_to(100).await.unwrap();
    assert_eq!(s.next_number(), Some(101));
    assert_eq!(orders.next().await.unwrap(), 101);
    assert!(matches!(
        orders.reset(50).await,
        Err(Error::WouldGoBackwards { .. })
    ));
    let s = orders.reset(50).force(true).await.unwrap();
    assert_eq!(s.next_number(), Some(50));
    assert_eq!(orders.peek().await.unwrap().next_number(), Some(50));
    let f6 = dispenser::Format::parse("ORD-{n:06}").unwrap();
    orders
        .alter(Alter::default().with_format(Some(f6.clone())))
        .await
        .unwrap();
    assert_eq!(orders.peek().await.unwrap().format, Some(f6));
    let version = orders.peek().await.unwrap().version;
    assert!(matches!(
        orders.alter(Alter::default()).await,
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(orders.peek().await.unwrap().version, version);
    orders.delete().await.unwrap();
    assert!(matches!(orders.next().await, Err(Error::NotFound { .. })));
    let h = d
        .history(dispenser::Kind::Sequence, "orders")
        .await
        .unwrap();
    let ops: Vec<_> = h.iter().map(|e| e.op.as_str()).collect();
    // The refused reset (backwards without force) is recorded, refused.
    assert_eq!(
        ops,
        [
            "create",
            "alter",
            "advance-to",
            "reset",
            "reset",
            "alter",
            "delete"
        ],
        "{h:#?}"
    );
    assert_eq!(h[3].outcome.as_str(), "refused", "{h:#?}");
    assert!(h.iter().all(|e| e.who.as_deref() == Some("ops")), "{h:#?}");

    // A queue: alter and delete on the handle, an empty alter refused with nothing written.
    let lobby = d
        .create_queue("lobby", QueueSpec::default().with_max(9))
        .await
        .unwrap();
    let version = lobby.peek().await.unwrap().version;
    let e = lobby.alter(QueueAlter::default()).await.unwrap_err();
    assert!(e.to_string().contains("lobby"), "{e}");
    assert_eq!(lobby.peek().await.unwrap().version, version);
    let s = lobby
        .alter(QueueAlter::default().with_max(19))
        .await
        .unwrap();
    assert_eq!(s.capacity, 20);
    lobby.delete().await.unwrap();
    assert!(matches!(
        lobby.take().await,
        Err(Error::NotFound {
            kind: dispenser::Kind::Queue,
            ..
        })
    ));
    let h = d.history(dispenser::Kind::Queue, "lobby").await.unwrap();
    let ops: Vec<_> = h.iter().map(|e| e.op.as_str()).collect();
    assert_eq!(ops, ["create", "alter", "delete"], "{h:#?}");
}

/// A queue's actions are builders (issue 38): nothing is sent before the `.await` (a builder
/// dropped unawaited takes nothing), a take answers one ticket and `.count(n)` a family, the
/// options set on a builder are those used (a request id answers the same take again, a
/// desk shows what it called), and a bad option is refused naming the queue, nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_actions_are_builders_that_do_nothing_until_awaited() {
    let f = Fixture::new("vocabulary_actions").await;
    let d = f.dispenser(f.options());
    let q = d
        .create_queue("post", QueueSpec::default().with_max(99))
        .await
        .unwrap();
    let version = q.peek().await.unwrap().version;
    drop(q.take().count(3).request_id("never-sent"));
    drop(q.call().desk("1"));
    assert_eq!(
        q.peek().await.unwrap().version,
        version,
        "a dropped builder wrote"
    );

    let one = q.take().await.unwrap();
    assert_eq!(one.number, 1);
    let family = q
        .take()
        .count(3)
        .request_id("k-1")
        .caller("kiosk")
        .await
        .unwrap();
    assert_eq!(
        family.iter().map(|t| t.number).collect::<Vec<_>>(),
        [2, 3, 4]
    );
    let again = q
        .take()
        .count(3)
        .request_id("k-1")
        .caller("kiosk")
        .await
        .unwrap();
    assert!(again.iter().all(|t| t.replayed), "{again:?}");
    assert_eq!(again[0].number, 2);
    // The same id from another caller is another take.
    let other = q.take().request_id("k-1").caller("kiosk-2").await.unwrap();
    assert_eq!((other.number, other.replayed), (5, false));

    let called = q.call().desk("A").await.unwrap();
    assert_eq!((called.number, called.desk.as_deref()), (1, Some("A")));
    let given = q.call().desk("B").serial(4).await.unwrap();
    assert_eq!((given.number, given.desk.as_deref()), (4, Some("B")));
    let recalled = q.recall().desk("A").await.unwrap();
    assert_eq!(recalled.number, 1);
    let released = q.finish().desk("B").await.unwrap();
    assert_eq!(released.number, 4);
    assert!(matches!(
        q.finish().desk("B").await,
        Err(Error::NoTicketShown { .. })
    ));
    let version = q.peek().await.unwrap().version;
    for e in [
        q.take().count(0).await.unwrap_err(),
        q.take().request_id("").await.unwrap_err(),
        q.call().desk("no/slash").await.unwrap_err(),
        q.recall().desk("").await.unwrap_err(),
    ] {
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
        assert!(e.to_string().contains("post"), "{e}");
    }
    assert_eq!(q.peek().await.unwrap().version, version);
}

/// Issue 50: "plain or striped?" is decided once, by `Dispenser::open_either`: a plain
/// sequence is plain, a striped one striped, neither is `NotFound` naming the name, a
/// name that cannot be either is `InvalidName`.
#[tokio::test]
async fn open_either_tells_a_plain_sequence_from_a_striped_one() {
    use dispenser::stripe::Either;
    let f = Fixture::new("vocabulary_either").await;
    let d = f.dispenser(f.options());
    d.create("plain", Spec::default()).await.unwrap();
    d.create_striped("ids", 3, Spec::default()).await.unwrap();
    match d.open_either("plain").await.unwrap() {
        Either::Plain(s) => assert_eq!(s.peek().await.unwrap().name, "plain"),
        Either::Striped(ids) => panic!("plain opened as striped: {ids:?}"),
    }
    match d.open_either("ids").await.unwrap() {
        Either::Striped(ids) => assert_eq!(ids.stripes(), 3),
        Either::Plain(s) => panic!("striped opened as plain: {s:?}"),
    }
    match d.open_either("neither").await {
        Err(Error::NotFound {
            kind: dispenser::Kind::Sequence,
            name,
        }) => assert_eq!(name, "neither"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        d.open_either("$x").await,
        Err(Error::InvalidName { .. })
    ));
}
