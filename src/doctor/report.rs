//! What [`Dispenser::doctor`](crate::Dispenser::doctor) found, and the verdict drawn from it.
//!
//! The verdict is computed here, from plain counts, so it is tested without a server.

use std::time::Duration;

use serde_json::{Value, json};

/// How the server is deployed, as its `hello` reply tells.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let r = d.doctor().await?;
/// if let dispenser::doctor::Topology::ReplicaSet { name } = &r.server.topology {
///     println!("replica set {name}");
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Topology {
    /// One server on its own.
    Standalone,
    /// A member of a replica set.
    ReplicaSet {
        /// The set's name (`setName`).
        name: String,
    },
    /// A `mongos` router of a sharded cluster.
    Sharded,
}

impl std::fmt::Display for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Topology::Standalone => f.write_str("standalone"),
            Topology::ReplicaSet { name } => write!(f, "replica set {name:?}"),
            Topology::Sharded => f.write_str("sharded cluster (mongos)"),
        }
    }
}

/// The server's own account of itself (`buildInfo` and `hello`).
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let r = d.doctor().await?;
/// println!("{:?} {:?} {}", r.server.version, r.server.max_wire_version, r.server.topology);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerFacts {
    /// The MongoDB version it announces (`buildInfo.version`), if it said.
    pub version: Option<String>,
    /// What the server says it really is when that is not MongoDB (`FerretDB v1.24.2`).
    pub product: Option<String>,
    /// The oldest wire protocol version it speaks.
    pub min_wire_version: Option<i32>,
    /// The newest wire protocol version it speaks.
    pub max_wire_version: Option<i32>,
    /// Standalone, replica set or sharded.
    pub topology: Topology,
}

/// Whether writes are acknowledged as the library needs them.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let r = d.doctor().await?;
/// assert!(r.write_concern.majority_journaled || !r.is_fit());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteConcernCheck {
    /// The dispenser's write concern, as text (`w: majority, j: true`).
    pub configured: String,
    /// Whether that write concern is majority and journaled.
    pub configured_safe: bool,
    /// Whether a write with `w: "majority", j: true` was acknowledged without a write
    /// concern error.
    pub majority_journaled: bool,
    /// The server's answer when it was not.
    pub detail: Option<String>,
}

/// One operation the library sends, tried the way the library sends it.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let r = d.doctor().await?;
/// for o in r.operations.iter().filter(|o| !o.ok) {
///     println!("{}: {:?}", o.name, o.detail);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OperationCheck {
    /// A short name (`findAndModify`, `updateOne`, `insert`, `unique index`).
    pub name: String,
    /// What was checked, in a sentence.
    pub what: String,
    /// Whether the server answered as the library needs.
    pub ok: bool,
    /// What went wrong, when something did.
    pub detail: Option<String>,
}

/// Conditional increments of one document by many tasks at once.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let r = d.doctor().await?;
/// let inc = &r.probe.increments;
/// println!("{} acknowledged, {} distinct", inc.acknowledged, inc.distinct);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct IncrementProbe {
    /// How many were to be sent.
    pub planned: u64,
    /// How many the server acknowledged, each returning the value it wrote.
    pub acknowledged: u64,
    /// How many failed (an error or a timeout: their outcome is unknown).
    pub failed: u64,
    /// How many distinct values the acknowledged increments returned (must be all of them).
    pub distinct: u64,
    /// The document's value afterwards (must be the acknowledged count, or a little more when
    /// some failed).
    pub final_value: Option<i64>,
    /// Whether they were the library's own `findAndModify` (with a projection). When the
    /// server refused that, the probe sent the same increment without a projection, to
    /// still find out whether updates are lost.
    pub library_operation: bool,
}

/// Compare-and-set loops on one document by many tasks at once.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let r = d.doctor().await?;
/// let cas = &r.probe.compare_and_set;
/// println!("{} wins, {} distinct, {} lost races", cas.wins, cas.distinct, cas.lost_races);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CasProbe {
    /// How many wins were to be collected.
    pub planned: u64,
    /// How many writes matched (won), each storing the value read plus one.
    pub wins: u64,
    /// How many writes matched nothing (another task came first).
    pub lost_races: u64,
    /// How many operations failed.
    pub failed: u64,
    /// How many distinct values the wins stored (must be all of them).
    pub distinct: u64,
    /// The document's value afterwards (must be the number of wins).
    pub final_value: Option<i64>,
}

/// Inserts of one `_id` by every task at once.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let r = d.doctor().await?;
/// assert!(r.probe.inserts.inserted <= 1 || !r.is_fit());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct InsertRace {
    /// How many tasks tried.
    pub tasks: u64,
    /// How many inserts succeeded (must be 1).
    pub inserted: u64,
    /// How many answered duplicate key 11000 (must be the rest).
    pub duplicate_key: u64,
    /// How many failed otherwise.
    pub failed: u64,
    /// How many documents of that `_id` exist afterwards (must be 1).
    pub documents: Option<u64>,
}

/// The concurrency probe: what many tasks writing at once got back.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let r = d.doctor().await?;
/// if r.probe.cut_short {
///     println!("the time limit ran out: run again with a longer one");
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Probe {
    /// How many tasks wrote at once.
    pub tasks: u32,
    /// The conditional increments.
    pub increments: IncrementProbe,
    /// The compare-and-set loops.
    pub compare_and_set: CasProbe,
    /// The racing inserts.
    pub inserts: InsertRace,
    /// The first error an operation of the probe met, if any.
    pub first_error: Option<String>,
    /// Whether the time limit cut the probe short.
    pub cut_short: bool,
}

/// What kind of problem makes a server unfit.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let r = d.doctor().await?;
/// use dispenser::doctor::ProblemKind;
/// let loses = r.problems.iter().any(|p| p.kind == ProblemKind::LostUpdates);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProblemKind {
    /// Acknowledged writes did not all take effect: concurrent writers saw the same state
    /// and one overwrote the other. Numbers would be issued twice.
    LostUpdates,
    /// The writes were kept, but acknowledged increments returned the same value twice (the
    /// reply was not read under the write). Numbers would be issued twice.
    DuplicateResults,
    /// Two inserts of one `_id` both succeeded: two processes could create one sequence.
    DuplicateInserts,
    /// An operation the library sends failed or answered otherwise than the library needs.
    Operation,
    /// Writes are not acknowledged by a majority and journaled, or the dispenser is not
    /// configured to ask for that where it matters.
    WriteConcern,
    /// The time limit ran out before the probe could tell.
    Inconclusive,
}

impl ProblemKind {
    /// A stable name for machines (`lost_updates`, …), as in the JSON report.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::doctor::ProblemKind;
    /// assert_eq!(ProblemKind::LostUpdates.as_str(), "lost_updates");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::LostUpdates => "lost_updates",
            ProblemKind::DuplicateResults => "duplicate_results",
            ProblemKind::DuplicateInserts => "duplicate_inserts",
            ProblemKind::Operation => "operation",
            ProblemKind::WriteConcern => "write_concern",
            ProblemKind::Inconclusive => "inconclusive",
        }
    }
}

/// One reason the server is unfit.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let r = d.doctor().await?;
/// for p in &r.problems {
///     println!("{}: {}", p.kind.as_str(), p.message);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Problem {
    /// What kind.
    pub kind: ProblemKind,
    /// What was seen, in one line.
    pub message: String,
}

/// Where the examination wrote, and whether that is gone.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let r = d.doctor().await?;
/// assert!(r.scratch.collection.starts_with("dispenser_doctor_"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Scratch {
    /// The database (the dispenser's).
    pub database: String,
    /// The collection of its own it wrote in (`dispenser_doctor_…`).
    pub collection: String,
    /// Whether the collection no longer exists afterwards.
    pub removed: bool,
    /// Why it could not be removed.
    pub detail: Option<String>,
}

/// What [`Dispenser::doctor`](crate::Dispenser::doctor) found: the server, the operations
/// the library sends, the concurrency probe, and the problems that make it unfit (none on a
/// fit server).
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let r = d.doctor().await?;
/// println!("{:?} in {:?}", r.reason(), r.elapsed);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Report {
    /// The server's own account of itself.
    pub server: ServerFacts,
    /// Whether majority + journaled writes are acknowledged.
    pub write_concern: WriteConcernCheck,
    /// Each operation the library sends.
    pub operations: Vec<OperationCheck>,
    /// Many tasks writing at once.
    pub probe: Probe,
    /// The scratch collection.
    pub scratch: Scratch,
    /// Why the server is unfit, most serious first; empty when it is fit.
    pub problems: Vec<Problem>,
    /// How long the examination took.
    pub elapsed: Duration,
    /// The time limit it had.
    pub time_limit: Duration,
}

impl Report {
    /// Whether the library's promise (never a duplicate) can hold on this server: every
    /// check passed.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let fit = d.doctor().await?.is_fit();
    /// # Ok(()) }
    /// ```
    pub fn is_fit(&self) -> bool {
        self.problems.is_empty()
    }

    /// Why the server is unfit, in one line (the most serious problem, and how many more
    /// there are); `None` when it is fit.
    ///
    /// For example `lost updates: 1 600 acknowledged increments returned 196 distinct values
    /// (final value 210); 2 more problems in the report`.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// if let Some(why) = d.doctor().await?.reason() {
    ///     eprintln!("unfit: {why}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn reason(&self) -> Option<String> {
        let first = self.problems.first()?;
        Some(match self.problems.len() - 1 {
            0 => first.message.clone(),
            1 => format!("{}; 1 more problem in the report", first.message),
            more => format!("{}; {more} more problems in the report", first.message),
        })
    }

    /// The report as JSON (what `dispenser doctor --json` prints).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let report = d.doctor().await?;
    /// assert_eq!(report.to_json()["fit"], report.is_fit());
    /// # Ok(()) }
    /// ```
    pub fn to_json(&self) -> Value {
        let s = &self.server;
        let p = &self.probe;
        json!({
            "fit": self.is_fit(),
            "reason": self.reason(),
            "server": {
                "version": s.version,
                "product": s.product,
                "min_wire_version": s.min_wire_version,
                "max_wire_version": s.max_wire_version,
                "topology": match &s.topology {
                    Topology::Standalone => "standalone",
                    Topology::ReplicaSet { .. } => "replica_set",
                    Topology::Sharded => "sharded",
                },
                "replica_set": match &s.topology {
                    Topology::ReplicaSet { name } => Some(name),
                    _ => None,
                },
            },
            "write_concern": {
                "configured": self.write_concern.configured,
                "configured_safe": self.write_concern.configured_safe,
                "majority_journaled": self.write_concern.majority_journaled,
                "detail": self.write_concern.detail,
            },
            "operations": self.operations.iter().map(|o| json!({
                "name": o.name, "what": o.what, "ok": o.ok, "detail": o.detail,
            })).collect::<Vec<_>>(),
            "probe": {
                "tasks": p.tasks,
                "cut_short": p.cut_short,
                "first_error": p.first_error,
                "increments": {
                    "planned": p.increments.planned,
                    "acknowledged": p.increments.acknowledged,
                    "failed": p.increments.failed,
                    "distinct": p.increments.distinct,
                    "final_value": p.increments.final_value,
                    "library_operation": p.increments.library_operation,
                },
                "compare_and_set": {
                    "planned": p.compare_and_set.planned,
                    "wins": p.compare_and_set.wins,
                    "lost_races": p.compare_and_set.lost_races,
                    "failed": p.compare_and_set.failed,
                    "distinct": p.compare_and_set.distinct,
                    "final_value": p.compare_and_set.final_value,
                },
                "inserts": {
                    "tasks": p.inserts.tasks,
                    "inserted": p.inserts.inserted,
                    "duplicate_key": p.inserts.duplicate_key,
                    "failed": p.inserts.failed,
                    "documents": p.inserts.documents,
                },
            },
            "problems": self.problems.iter().map(|x| json!({
                "kind": x.kind.as_str(), "message": x.message,
            })).collect::<Vec<_>>(),
            "scratch": {
                "database": self.scratch.database,
                "collection": self.scratch.collection,
                "removed": self.scratch.removed,
                "detail": self.scratch.detail,
            },
            "elapsed_seconds": self.elapsed.as_secs_f64(),
            "time_limit_seconds": self.time_limit.as_secs_f64(),
        })
    }
}

fn mark(ok: bool) -> &'static str {
    if ok { "ok  " } else { "FAIL" }
}

/// The report as text, one fact per line and the verdict last (what `dispenser doctor` prints
/// after the line naming the server).
impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&text(self))
    }
}

fn text(r: &Report) -> String {
    let s = &r.server;
    let wire = match (s.min_wire_version, s.max_wire_version) {
        (Some(lo), Some(hi)) => format!("{lo} to {hi}"),
        (_, Some(hi)) => format!("up to {hi}"),
        _ => "unknown".to_owned(),
    };
    let version = s.version.as_deref().unwrap_or("unknown");
    let product = s
        .product
        .as_ref()
        .map(|p| format!(" (the server is {p})"))
        .unwrap_or_default();
    let wc = &r.write_concern;
    let mut t = format!(
        "version        MongoDB {version}{product}; wire versions {wire}\n\
         topology       {}\n\
         write concern  {} w: majority, j: true {}; the dispenser's: {}\n\
         operations\n",
        s.topology,
        mark(wc.majority_journaled),
        match &wc.detail {
            None => "acknowledged".to_owned(),
            Some(d) => format!("not acknowledged: {d}"),
        },
        wc.configured,
    );
    for o in &r.operations {
        t += &format!("  {} {:<14} {}", mark(o.ok), o.name, o.what);
        if let Some(d) = &o.detail {
            t += &format!(": {d}");
        }
        t.push('\n');
    }
    let p = &r.probe;
    let (inc, cas, ins) = (&p.increments, &p.compare_and_set, &p.inserts);
    let final_value = |v: Option<i64>| match v {
        Some(v) if v >= 0 => grouped(v.unsigned_abs()),
        Some(v) => v.to_string(),
        None => "unknown".to_owned(),
    };
    t += &format!("concurrency probe, {} tasks\n", p.tasks);
    t += &format!(
        "  {} increments      {} of {} acknowledged, {} distinct values, final value {}{}{}\n",
        mark(inc.distinct == inc.acknowledged && inc.final_value >= Some(count(inc.acknowledged))),
        grouped(inc.acknowledged),
        grouped(inc.planned),
        grouped(inc.distinct),
        final_value(inc.final_value),
        failed(inc.failed),
        if inc.library_operation {
            ""
        } else {
            " (sent without a projection: the server refused the library's findAndModify)"
        },
    );
    t += &format!(
        "  {} compare-and-set {} of {} wins, {} distinct values, final value {}; {} lost races{}\n",
        mark(cas.distinct == cas.wins && cas.final_value == Some(count(cas.wins))),
        grouped(cas.wins),
        grouped(cas.planned),
        grouped(cas.distinct),
        final_value(cas.final_value),
        grouped(cas.lost_races),
        failed(cas.failed),
    );
    t += &format!(
        "  {} racing inserts  {} of one _id: {} inserted, {} duplicate key 11000, {} document(s){}\n",
        mark(ins.inserted == 1 && ins.documents == Some(1)),
        ins.tasks,
        ins.inserted,
        ins.duplicate_key,
        ins.documents
            .map_or_else(|| "unknown".to_owned(), |n| n.to_string()),
        failed(ins.failed),
    );
    if let Some(e) = &p.first_error {
        t += &format!("  first error: {e}\n");
    }
    let sc = &r.scratch;
    t += &format!(
        "scratch        {}.{} {}\n",
        sc.database,
        sc.collection,
        match &sc.detail {
            None if sc.removed => "removed".to_owned(),
            None => "NOT removed".to_owned(),
            Some(d) => format!("NOT removed: {d}"),
        }
    );
    t += &format!(
        "time           {:.1} s (limit {} s)\n",
        r.elapsed.as_secs_f64(),
        r.time_limit.as_secs_f64()
    );
    match r.reason() {
        None => t += "fit: every check passed; the library's promise can hold on this server\n",
        Some(why) => t += &format!("UNFIT: {why}\n"),
    }
    t
}

fn failed(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!("; {} failed", grouped(n))
    }
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `n` with its digits in groups of three (`1 600`, `196`), as the guide and the reasons
/// write counts.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// The problems the probe's counts show, most serious first.
pub(crate) fn probe_problems(p: &Probe) -> Vec<Problem> {
    let mut problems = Vec::new();
    let inc = &p.increments;
    // Failed increments may have been applied too: the final value lies between the
    // acknowledged count and the attempted one. Below the acknowledged count, writes were lost.
    let inc_lost = inc
        .final_value
        .is_some_and(|v| v < to_i64(inc.acknowledged));
    if inc_lost || (inc.distinct < inc.acknowledged && inc.final_value.is_none()) {
        problems.push(Problem {
            kind: ProblemKind::LostUpdates,
            message: format!(
                "lost updates: {} acknowledged increments returned {} distinct values{}",
                grouped(inc.acknowledged),
                grouped(inc.distinct),
                final_value(inc.final_value),
            ),
        });
    } else if inc.distinct < inc.acknowledged {
        problems.push(Problem {
            kind: ProblemKind::DuplicateResults,
            message: format!(
                "duplicate results: {} acknowledged increments returned {} distinct values{} (the writes were kept; their replies were not read under the write)",
                grouped(inc.acknowledged),
                grouped(inc.distinct),
                final_value(inc.final_value),
            ),
        });
    }
    let cas = &p.compare_and_set;
    let cas_lost = cas.final_value.is_some_and(|v| v < to_i64(cas.wins));
    if cas.distinct < cas.wins || cas_lost {
        problems.push(Problem {
            kind: ProblemKind::LostUpdates,
            message: format!(
                "lost updates: {} acknowledged compare-and-set wins left {} distinct values{}",
                grouped(cas.wins),
                grouped(cas.distinct),
                final_value(cas.final_value),
            ),
        });
    }
    let ins = &p.inserts;
    if ins.inserted > 1 || ins.documents.is_some_and(|n| n > 1) {
        problems.push(Problem {
            kind: ProblemKind::DuplicateInserts,
            message: format!(
                "duplicate inserts: {} of {} concurrent inserts of one _id succeeded{}",
                ins.inserted,
                ins.tasks,
                ins.documents
                    .map(|n| format!(", {n} documents stored"))
                    .unwrap_or_default(),
            ),
        });
    } else if ins.tasks > 0
        && ins.failed == 0
        && (ins.inserted != 1 || ins.duplicate_key + 1 != ins.tasks)
    {
        problems.push(Problem {
            kind: ProblemKind::Operation,
            message: format!(
                "racing inserts of one _id: {} inserted and {} duplicate key errors of {} tries; want 1 and the rest",
                ins.inserted, ins.duplicate_key, ins.tasks
            ),
        });
    }
    let failed = inc.failed + cas.failed + ins.failed;
    if failed > 0 && !p.cut_short {
        problems.push(Problem {
            kind: ProblemKind::Operation,
            message: format!(
                "{} operation(s) of the concurrency probe failed: {}",
                grouped(failed),
                p.first_error.as_deref().unwrap_or("no error recorded")
            ),
        });
    }
    if p.cut_short {
        problems.push(Problem {
            kind: ProblemKind::Inconclusive,
            message: format!(
                "inconclusive: the time limit ran out after {} of {} increments and {} of {} compare-and-set wins; run again with a longer time limit",
                grouped(inc.acknowledged),
                grouped(inc.planned),
                grouped(cas.wins),
                grouped(cas.planned)
            ),
        });
    }
    problems
}

fn final_value(v: Option<i64>) -> String {
    match v {
        Some(v) if v >= 0 => format!(" (final value {})", grouped(v.unsigned_abs())),
        Some(v) => format!(" (final value {v})"),
        None => String::new(),
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Puts the problems in order, most serious first (stable within a kind).
pub(crate) fn rank(problems: &mut [Problem]) {
    problems.sort_by_key(|p| match p.kind {
        ProblemKind::LostUpdates => 0,
        ProblemKind::DuplicateResults => 1,
        ProblemKind::DuplicateInserts => 2,
        ProblemKind::WriteConcern => 3,
        ProblemKind::Operation => 4,
        ProblemKind::Inconclusive => 5,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(inc: (u64, u64, Option<i64>), cas: (u64, u64, Option<i64>)) -> Probe {
        Probe {
            tasks: 8,
            increments: IncrementProbe {
                planned: 1600,
                acknowledged: inc.0,
                failed: 0,
                distinct: inc.1,
                final_value: inc.2,
                library_operation: true,
            },
            compare_and_set: CasProbe {
                planned: 800,
                wins: cas.0,
                lost_races: 3000,
                failed: 0,
                distinct: cas.1,
                final_value: cas.2,
            },
            inserts: InsertRace {
                tasks: 8,
                inserted: 1,
                duplicate_key: 7,
                failed: 0,
                documents: Some(1),
            },
            first_error: None,
            cut_short: false,
        }
    }

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(196), "196");
        assert_eq!(grouped(1600), "1 600");
        assert_eq!(grouped(1_234_567), "1 234 567");
    }

    #[test]
    fn a_clean_probe_has_no_problem() {
        let p = probe((1600, 1600, Some(1600)), (800, 800, Some(800)));
        assert_eq!(probe_problems(&p), vec![]);
    }

    #[test]
    fn lost_updates_are_named_with_the_figures() {
        // FerretDB 1.24 / SQLite, measured: 1 600 increments, 196 distinct values.
        let p = probe((1600, 196, Some(210)), (800, 138, Some(140)));
        let problems = probe_problems(&p);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::LostUpdates);
        assert_eq!(
            problems[0].message,
            "lost updates: 1 600 acknowledged increments returned 196 distinct values (final value 210)"
        );
        assert_eq!(
            problems[1].message,
            "lost updates: 800 acknowledged compare-and-set wins left 138 distinct values (final value 140)"
        );
    }

    #[test]
    fn a_lost_update_with_distinct_replies_is_still_caught_by_the_final_value() {
        let p = probe((1600, 1600, Some(1599)), (800, 800, Some(799)));
        let kinds: Vec<_> = probe_problems(&p).iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            vec![ProblemKind::LostUpdates, ProblemKind::LostUpdates]
        );
    }

    #[test]
    fn duplicate_replies_over_kept_writes_are_their_own_kind() {
        // mongo-java-server's findAndModify without a projection, measured: 4000 increments
        // kept, 3963 distinct values returned.
        let p = probe((4000, 3963, Some(4000)), (800, 800, Some(800)));
        let problems = probe_problems(&p);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].kind, ProblemKind::DuplicateResults);
        assert!(problems[0].message.starts_with(
            "duplicate results: 4 000 acknowledged increments returned 3 963 distinct values"
        ));
    }

    #[test]
    fn a_cut_short_probe_is_inconclusive_and_double_inserts_are_caught() {
        let mut p = probe((300, 300, Some(301)), (10, 10, Some(10)));
        p.cut_short = true;
        p.increments.failed = 1;
        p.inserts.inserted = 2;
        p.inserts.duplicate_key = 6;
        p.inserts.documents = Some(2);
        let mut problems = probe_problems(&p);
        rank(&mut problems);
        let kinds: Vec<_> = problems.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            vec![ProblemKind::DuplicateInserts, ProblemKind::Inconclusive]
        );
        assert!(
            problems[1].message.contains("300 of 1 600 increments"),
            "{problems:?}"
        );
    }

    #[test]
    fn the_reason_is_the_first_problem_and_a_count_of_the_rest() {
        let problem = |m: &str| Problem {
            kind: ProblemKind::Operation,
            message: m.to_owned(),
        };
        let mut r = Report {
            server: ServerFacts {
                version: None,
                product: None,
                min_wire_version: None,
                max_wire_version: None,
                topology: Topology::Standalone,
            },
            write_concern: WriteConcernCheck {
                configured: "w: majority, j: true".into(),
                configured_safe: true,
                majority_journaled: true,
                detail: None,
            },
            operations: vec![],
            probe: probe((1600, 1600, Some(1600)), (800, 800, Some(800))),
            scratch: Scratch {
                database: "d".into(),
                collection: "c".into(),
                removed: true,
                detail: None,
            },
            problems: vec![],
            elapsed: Duration::from_millis(1500),
            time_limit: Duration::from_secs(10),
        };
        assert!(r.is_fit());
        assert_eq!(r.reason(), None);
        assert_eq!(r.to_json()["fit"], true);
        r.problems = vec![problem("a"), problem("b"), problem("c")];
        assert_eq!(
            r.reason().as_deref(),
            Some("a; 2 more problems in the report")
        );
        let j = r.to_json();
        assert_eq!(j["fit"], false);
        assert_eq!(j["reason"], "a; 2 more problems in the report");
        assert_eq!(j["problems"][1]["kind"], "operation");
        assert_eq!(j["server"]["topology"], "standalone");
        assert_eq!(j["elapsed_seconds"], 1.5);
    }
}
