//! The server's own account of itself, and whether it acknowledges safe writes.

use bson::{Bson, Document, doc};
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::options::{Acknowledgment, WriteConcern};
use mongodb::{Client, Collection};

use super::Clock;
use super::report::{Problem, ProblemKind, ServerFacts, Topology, WriteConcernCheck};
use crate::error::{Error, Result, describe_driver_error};

/// `buildInfo` and `hello` (`isMaster` for a server that does not know `hello`, as MongoDB
/// before 4.4.2). The first operation: a server that cannot be reached fails here.
pub(super) async fn facts(client: &Client, clock: &Clock) -> Result<ServerFacts> {
    let admin = client.database("admin");
    let hello = match clock
        .driver(
            || "asking the server what it is (hello)".to_owned(),
            admin.run_command(doc! { "hello": 1 }),
        )
        .await
    {
        Err(Error::Database { source, .. })
            if matches!(source.kind.as_ref(), ErrorKind::Command(_)) =>
        {
            clock
                .driver(
                    || "asking the server what it is (isMaster)".to_owned(),
                    admin.run_command(doc! { "isMaster": 1 }),
                )
                .await?
        }
        other => other?,
    };
    // A server may deny buildInfo; its version is then unknown, nothing more.
    let build = clock
        .driver(
            || "reading the server's build info".to_owned(),
            admin.run_command(doc! { "buildInfo": 1 }),
        )
        .await
        .unwrap_or_default();
    Ok(read_facts(&hello, &build))
}

fn read_facts(hello: &Document, build: &Document) -> ServerFacts {
    let topology = if hello.get_str("msg") == Ok("isdbgrid") {
        Topology::Sharded
    } else if let Ok(name) = hello.get_str("setName") {
        Topology::ReplicaSet {
            name: name.to_owned(),
        }
    } else {
        Topology::Standalone
    };
    ServerFacts {
        version: build.get_str("version").ok().map(str::to_owned),
        product: build
            .get_str("ferretdbVersion")
            .ok()
            .map(|v| format!("FerretDB {v}")),
        min_wire_version: hello.get("minWireVersion").and_then(int),
        max_wire_version: hello.get("maxWireVersion").and_then(int),
        topology,
    }
}

fn int(b: &Bson) -> Option<i32> {
    match b {
        Bson::Int32(n) => Some(*n),
        Bson::Int64(n) => i32::try_from(*n).ok(),
        Bson::Double(f) if f.fract() == 0.0 && f.abs() < 1e9 => Some(*f as i32),
        _ => None,
    }
}

/// A write concern as text: `w: majority, j: true`.
pub(super) fn render(wc: &WriteConcern) -> String {
    let w = match &wc.w {
        None => "default".to_owned(),
        Some(Acknowledgment::Majority) => "majority".to_owned(),
        Some(Acknowledgment::Nodes(n)) => n.to_string(),
        Some(Acknowledgment::Custom(tag)) => format!("{tag:?}"),
        Some(_) => "other".to_owned(),
    };
    let j = match wc.journal {
        Some(j) => j.to_string(),
        None => "default".to_owned(),
    };
    format!("w: {w}, j: {j}")
}

/// The write-concern problems: a server that does not acknowledge majority + journaled
/// writes, or a dispenser configured with less where it matters — without the journal
/// anywhere (a crash loses what was acknowledged), with less than a majority on a replica set
/// or sharded cluster (a failover rolls it back).
pub(super) fn write_concern_problems(
    configured: &WriteConcern,
    check: &WriteConcernCheck,
    topology: &Topology,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    if !check.majority_journaled {
        problems.push(Problem {
            kind: ProblemKind::WriteConcern,
            message: format!(
                "writes with w: majority, j: true are not acknowledged: {}",
                check.detail.as_deref().unwrap_or("no acknowledgement")
            ),
        });
    }
    let unjournaled = configured.journal != Some(true);
    let below_majority = configured.w != Some(Acknowledgment::Majority);
    if unjournaled || (below_majority && *topology != Topology::Standalone) {
        problems.push(Problem {
            kind: ProblemKind::WriteConcern,
            message: format!(
                "the dispenser's write concern is {}: an acknowledged write can be lost (not yet journaled at a crash, or rolled back at a failover) and its numbers issued again; keep the default w: majority, j: true",
                check.configured
            ),
        });
    }
    problems
}

/// Writes one document with `w: "majority", j: true` (through `safe`) and tells whether it
/// was acknowledged; also judges the dispenser's own write concern.
pub(super) async fn write_concern(
    safe: &Collection<Document>,
    configured: &WriteConcern,
    clock: &Clock,
) -> Result<WriteConcernCheck> {
    let configured_safe =
        configured.w == Some(Acknowledgment::Majority) && configured.journal == Some(true);
    let written = clock
        .driver(
            || "writing with w: majority, j: true".to_owned(),
            safe.insert_one(doc! { "_id": "write_concern" }),
        )
        .await;
    let (majority_journaled, detail) = match written {
        Ok(_) => (true, None),
        Err(Error::Database { source, .. }) if refuses_write_concern(&source) => {
            (false, Some(describe_driver_error(&source)))
        }
        Err(e) => return Err(e),
    };
    Ok(WriteConcernCheck {
        configured: render(configured),
        configured_safe,
        majority_journaled,
        detail,
    })
}

/// A write concern error, or a command refused for its write concern: BadValue (2, "cannot
/// use 'j' option when a host does not have journaling enabled"), UnknownReplWriteConcern
/// (79), UnsatisfiableWriteConcern (100).
fn refuses_write_concern(e: &mongodb::error::Error) -> bool {
    match e.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteConcernError(_)) => true,
        ErrorKind::Command(c) => matches!(c.code, 2 | 79 | 100),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_topology_and_the_product_are_read_from_the_replies() {
        let ferret = read_facts(
            &doc! { "isWritablePrimary": true, "minWireVersion": 0, "maxWireVersion": 21 },
            &doc! { "version": "7.0.42", "ferretdbVersion": "v1.24.2" },
        );
        assert_eq!(ferret.topology, Topology::Standalone);
        assert_eq!(ferret.product.as_deref(), Some("FerretDB v1.24.2"));
        assert_eq!(ferret.version.as_deref(), Some("7.0.42"));
        assert_eq!(
            (ferret.min_wire_version, ferret.max_wire_version),
            (Some(0), Some(21))
        );
        let rs = read_facts(
            &doc! { "setName": "rs0", "maxWireVersion": 25_i64 },
            &Document::new(),
        );
        assert_eq!(rs.topology, Topology::ReplicaSet { name: "rs0".into() });
        assert_eq!((rs.version, rs.max_wire_version), (None, Some(25)));
        let mongos = read_facts(
            &doc! { "msg": "isdbgrid", "maxWireVersion": 17.0 },
            &doc! {},
        );
        assert_eq!(mongos.topology, Topology::Sharded);
        assert_eq!(mongos.max_wire_version, Some(17));
    }

    #[test]
    fn write_concerns_are_rendered() {
        assert_eq!(
            render(&crate::sequence::safe_write_concern()),
            "w: majority, j: true"
        );
        let w1 = WriteConcern::builder().w(Acknowledgment::Nodes(1)).build();
        assert_eq!(render(&w1), "w: 1, j: default");
    }

    #[test]
    fn a_weak_write_concern_is_a_problem_where_it_can_lose_writes() {
        let check = |configured: &WriteConcern| WriteConcernCheck {
            configured: render(configured),
            configured_safe: false,
            majority_journaled: true,
            detail: None,
        };
        let rs = Topology::ReplicaSet { name: "rs0".into() };
        let safe = crate::sequence::safe_write_concern();
        let w1_journaled = WriteConcern::builder()
            .w(Acknowledgment::Nodes(1))
            .journal(true)
            .build();
        let majority_only = WriteConcern::builder().w(Acknowledgment::Majority).build();
        let count =
            |wc: &WriteConcern, t: &Topology| write_concern_problems(wc, &check(wc), t).len();
        assert_eq!(count(&safe, &rs), 0);
        assert_eq!(count(&w1_journaled, &Topology::Standalone), 0);
        assert_eq!(count(&w1_journaled, &rs), 1);
        assert_eq!(count(&majority_only, &Topology::Standalone), 1);
        let refused = WriteConcernCheck {
            majority_journaled: false,
            detail: Some("no journal".into()),
            ..check(&safe)
        };
        let problems = write_concern_problems(&safe, &refused, &Topology::Standalone);
        assert_eq!(
            problems[0].message,
            "writes with w: majority, j: true are not acknowledged: no journal"
        );
    }
}
