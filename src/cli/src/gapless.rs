//! `dispenser gapless …`: the lifecycle (create, list, status, delete), voids, issuing,
//! releases and the longest lease of gap-free sequences.

use std::io::Write;
use std::time::Duration;

use dispenser::Dispenser;
use dispenser::gapless::{GaplessAlter, GaplessOptions, GaplessState, Released};
use dispenser::mongodb::bson::{Bson, Document};

use crate::exit::Outcome;
use crate::output::io_err;

/// `dispenser gapless`.
#[derive(clap::Subcommand, Debug)]
pub enum GaplessCommand {
    /// Create a gap-free sequence numbering the documents of a business collection (and its
    /// unique index on the number field); exit 6 when one of that name exists.
    Create {
        /// Succeed without change if it exists with the same collection, field, start and void
        /// field (exit 6 naming what differs otherwise); a longest lease an alter changed since
        /// is kept, and stderr says so.
        #[arg(long)]
        if_not_exists: bool,
        /// The gap-free sequence.
        name: String,
        /// The business collection (in --db): the field `collection` of the other surfaces,
        /// named so beside the global --collection (where the sequences' documents are).
        #[arg(long)]
        into: String,
        /// The number field (a dotted path for a nested field).
        #[arg(long)]
        field: String,
        /// The first number.
        #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
        start: i64,
        /// The longest lease, in seconds (more than 0, at most 86400): no holder's lease
        /// counts for longer.
        #[arg(long, default_value_t = 300.0)]
        max_lease: f64,
        /// The field of a void document that holds why the number was voided.
        #[arg(long, default_value = "voided")]
        void_field: String,
        /// More fields written into every void document, as a JSON object
        /// (`{"status":"VOID","total":0}`): what a validator of the business collection
        /// wants a document to have. Fixed at creation.
        #[arg(long)]
        void_extra: Option<String>,
    },
    /// Who changed the gap-free sequence, when, how: its recorded operations, oldest first
    /// (a deleted one's too).
    History(crate::history::HistoryArgs),
    /// List the gap-free sequences, one status line each (or one JSON array).
    List {
        /// Print one JSON array of statuses.
        #[arg(long)]
        json: bool,
    },
    /// Delete a gap-free sequence: its state goes, the business collection and its documents
    /// stay (exit 3 when there is none). Refused (exit 6, nothing deleted) while a holder's
    /// lease runs.
    Delete {
        /// The gap-free sequence.
        name: String,
        /// Delete it even while a holder's lease runs: you know the holder is dead (if it is
        /// not, its write still meets the unique index). The history records the force.
        #[arg(long)]
        force: bool,
    },
    /// Show the next number, the lease, the longest lease and the voided numbers.
    Peek {
        /// The gap-free sequence.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Void the next number on purpose, with a reason that is kept.
    Void {
        /// The gap-free sequence.
        name: String,
        /// The number (must be the next one).
        #[arg(allow_negative_numbers = true)]
        number: i64,
        /// Why (kept with the number).
        #[arg(long)]
        reason: String,
    },
    /// Insert one document carrying the next number into the sequence's business collection;
    /// prints the number (exit 3 when there is no such sequence: `gapless create` makes one).
    Issue {
        /// The gap-free sequence.
        name: String,
        /// The document to insert, as JSON (the number field is set on it).
        #[arg(long, default_value = "{}")]
        doc: String,
        /// Seconds a holder may take before its number can go to another caller (at most the
        /// sequence's longest lease: 300 s unless changed with `gapless alter --max-lease`).
        #[arg(long, default_value_t = 10.0)]
        lease: f64,
        /// How many documents to insert, one after the other.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        count: u64,
    },
    /// End the lease of a holder that stopped, at once: void its number if it did not write
    /// it, move past what it wrote if it did. Refused while the lease runs (by the server's
    /// clock) unless --force.
    Release {
        /// The gap-free sequence.
        name: String,
        /// The held number (the sequence's next one).
        #[arg(allow_negative_numbers = true)]
        number: i64,
        /// Why, kept with the number if it is voided.
        #[arg(long, default_value = "released: its holder stopped")]
        reason: String,
        /// Release a lease that has not run out: you know its holder is dead (if it is not,
        /// its write fails on the unique index and it moves on to the next number).
        #[arg(long)]
        force: bool,
        /// Print what the release did as JSON: `{"outcome":"voided","number":N}` or
        /// `{"outcome":"used","first":N,"last":M}`.
        #[arg(long)]
        json: bool,
    },
    /// Change a setting: the longest lease (no holder's lease counts for longer, the leases
    /// already taken included).
    Alter {
        /// The gap-free sequence.
        name: String,
        /// The longest lease, in seconds (more than 0, at most 86400).
        #[arg(long, required = true)]
        max_lease: Option<f64>,
    },
}

/// The status of a gap-free sequence in one line: where its numbers go, the next, the lease,
/// how many were voided.
fn status_line(s: &GaplessState) -> String {
    let lease = match &s.lease {
        None => "no holder".to_owned(),
        Some(l) => format!(
            "{} held until {} (server time){}",
            l.number,
            l.expires.try_to_rfc3339_string().unwrap_or_default(),
            if s.lease_expired() { ", ran out" } else { "" }
        ),
    };
    format!(
        "{}: numbers in {}.{}; next {}; {lease}; {} voided",
        s.name,
        s.collection,
        s.field,
        s.next,
        s.voided.len()
    )
}

/// `seconds` as a duration of 1 ms to a day, else an error naming `what`.
fn seconds(what: &str, seconds: f64) -> dispenser::Result<Duration> {
    if !(0.001..=86_400.0).contains(&seconds) {
        return Err(dispenser::Error::InvalidArgument {
            what: what.into(),
            reason: format!("{seconds} must be at least 0.001 and at most 86400 seconds"),
        });
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The JSON object `text` (the flag `what`'s) as a document, else an error naming the flag.
fn json_object(what: &str, text: &str) -> dispenser::Result<Document> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| dispenser::Error::InvalidArgument {
            what: what.into(),
            reason: format!("not JSON: {e}"),
        })?;
    match Bson::try_from(value) {
        Ok(Bson::Document(d)) => Ok(d),
        _ => Err(dispenser::Error::InvalidArgument {
            what: what.into(),
            reason: "must be a JSON object".into(),
        }),
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn io(e: std::io::Error) -> dispenser::Error {
    dispenser::Error::InvalidArgument {
        what: "output".into(),
        reason: e.to_string(),
    }
}

/// Test hook: `DISPENSER_TEST_GAPLESS_HOLD=before|after` makes `gapless issue` print
/// `holding N` and stop (forever) before or after its insert, so tests can kill it there.
fn hold_point() -> Option<String> {
    std::env::var("DISPENSER_TEST_GAPLESS_HOLD").ok()
}

pub async fn run(
    d: &Dispenser,
    cmd: GaplessCommand,
    out: &mut impl Write,
) -> dispenser::Result<Outcome> {
    match cmd {
        GaplessCommand::Create {
            if_not_exists,
            name,
            into,
            field,
            start,
            max_lease,
            void_field,
            void_extra,
        } => {
            let max_lease = seconds("--max-lease", max_lease)?;
            let mut options = GaplessOptions::new(&into, &field)
                .with_start(start)
                .with_max_lease(max_lease)
                .with_void_field(void_field);
            if let Some(extra) = void_extra {
                options = options.with_void_extra(json_object("--void-extra", &extra)?);
            }
            // No number is issued here: the lease only has to fit the longest one.
            options.lease = options.lease.min(max_lease);
            // Nothing is read after the write: a read that failed then would tell a written
            // sequence as not made.
            let numbers = if if_not_exists {
                let g = d.ensure_gapless(&name, options).await?;
                crate::output::kept(dispenser::error::Kind::Gapless, &name, g.altered());
                format!("created or found gap-free sequence {name}: numbers")
            } else {
                d.create_gapless(&name, options).await?;
                format!(
                    "created gap-free sequence {name}: numbers {start}, {}, …",
                    start.saturating_add(1)
                )
            };
            writeln!(out, "{numbers} in {}.{into}.{field}", d.options().database).map_err(io)?;
        }
        GaplessCommand::History(a) => {
            return crate::history::run(d, dispenser::error::Kind::Gapless, a, out).await;
        }
        GaplessCommand::List { json } => {
            let mut statuses = Vec::new();
            let mut unreadable = None;
            for item in d.list_gapless().await? {
                match item {
                    Ok(s) => statuses.push(s),
                    Err(e) => {
                        eprintln!("dispenser: {e}");
                        unreadable = Some(e);
                    }
                }
            }
            if let Some(e) = unreadable {
                // The readable ones first, then the failure's exit code.
                for s in &statuses {
                    writeln!(out, "{}", status_line(s)).map_err(io)?;
                }
                out.flush().map_err(io_err)?;
                return Err(e);
            }
            if json {
                let all: Vec<_> = statuses.iter().map(GaplessState::to_json).collect();
                writeln!(out, "{}", serde_json::Value::Array(all)).map_err(io)?;
            } else if statuses.is_empty() {
                let place = format!(
                    "{}.{}_gapless",
                    d.options().database,
                    d.options().collection
                );
                eprintln!("dispenser: no gap-free sequences in {place}");
            } else {
                for s in &statuses {
                    writeln!(out, "{}", status_line(s)).map_err(io)?;
                }
            }
        }
        GaplessCommand::Delete { name, force } => {
            d.delete_gapless(&name).force(force).await?;
            writeln!(
                out,
                "deleted gap-free sequence {name} (the documents it numbered stay)"
            )
            .map_err(io)?;
        }
        GaplessCommand::Peek { name, json } => {
            let s = d.open_gapless(&name).await?.peek().await?;
            if json {
                let v = s.to_json();
                writeln!(out, "{v}").map_err(io)?;
            } else {
                writeln!(out, "{}", status_line(&s)).map_err(io)?;
                writeln!(out, "  longest lease {:?}", s.max_lease).map_err(io)?;
                if !s.unique_index {
                    writeln!(
                        out,
                        "  warning: {}.{} has no plain unique index on the number field; the next issue, void or release creates it again (or says why it cannot)",
                        s.collection, s.field
                    )
                    .map_err(io)?;
                }
                for v in &s.voided {
                    writeln!(
                        out,
                        "  voided {} at {}: {}",
                        v.number,
                        v.at.try_to_rfc3339_string().unwrap_or_default(),
                        v.reason
                    )
                    .map_err(io)?;
                }
            }
        }
        GaplessCommand::Void {
            name,
            number,
            reason,
        } => {
            d.open_gapless(&name).await?.void(number, &reason).await?;
            writeln!(out, "{name}: {number} voided").map_err(io)?;
        }
        GaplessCommand::Issue {
            name,
            doc: body,
            lease,
            count,
        } => {
            let lease = seconds("--lease", lease)?;
            let base = json_object("--doc", &body)?;
            // Only an existing sequence issues (`gapless create` makes one): its settings
            // say where the numbers go.
            let g = d.open_gapless(&name).await?;
            let field = g.options().field.clone();
            // The number goes at the field's path (`meta.number` inside `meta`): refuse a
            // body where that cannot be, before anything is written.
            dispenser::gapless::set_field(&mut base.clone(), &field, 0_i64).map_err(|e| {
                dispenser::Error::InvalidArgument {
                    what: "--doc".into(),
                    reason: format!("{e} (the number goes at the sequence's field {field})"),
                }
            })?;
            // The lease asked, with the stored settings (an ensure that finds them opens).
            // An admin changing them since they were read (the longest lease, say) makes the
            // ensure refuse: read them again, a few times, rather than call that a conflict —
            // unless the numbers now go elsewhere (the body was checked for this field).
            let collection = g.options().collection.clone();
            let mut stored = g;
            let mut reread = 0;
            let g = loop {
                let asked = stored.options().clone().with_lease(lease);
                match d.ensure_gapless(&name, asked).await {
                    Err(e @ dispenser::Error::SpecConflict { .. }) if reread < 3 => {
                        reread += 1;
                        stored = d.open_gapless(&name).await?;
                        let o = stored.options();
                        if o.field != field || o.collection != collection {
                            return Err(e);
                        }
                    }
                    made => break made?,
                }
            };
            let hold = hold_point();
            // The business write is bounded like every database operation: cut, its outcome
            // is unknown (`Gapless::issue` takes tokio's `Elapsed` so).
            let limit = d.options().operation_timeout;
            for _ in 0..count {
                let coll = g.business();
                let (base, field, hold) = (&base, &field, &hold);
                let issued = g
                    .issue(|n| {
                        let mut doc = base.clone();
                        let set = dispenser::gapless::set_field(&mut doc, field, n);
                        async move {
                            let set: Result<(), BoxError> = set.map_err(BoxError::from);
                            // Checked before the sequence was opened.
                            set?;
                            if hold.as_deref() == Some("before") {
                                eprintln!("holding {n}");
                                std::future::pending::<()>().await;
                            }
                            let r = match tokio::time::timeout(limit, coll.insert_one(doc)).await {
                                Ok(r) => r.map(drop).map_err(BoxError::from),
                                Err(elapsed) => Err(BoxError::from(elapsed)),
                            };
                            if hold.as_deref() == Some("after") && r.is_ok() {
                                eprintln!("holding {n}");
                                std::future::pending::<()>().await;
                            }
                            r
                        }
                    })
                    .await?;
                writeln!(out, "{}", issued.number).map_err(io)?;
            }
            // Confirm the last number now: the process is about to exit. The numbers are
            // written either way; unconfirmed, the next caller finds them used.
            if let Err(e) = g.flush().await {
                eprintln!(
                    "dispenser: warning: {e} (the numbers printed are written; the next caller finds them used and moves past them)"
                );
            }
        }
        GaplessCommand::Release {
            name,
            number,
            reason,
            force,
            json,
        } => {
            let g = d.open_gapless(&name).await?;
            let released = g.release(number, &reason).force(force).await?;
            if json {
                writeln!(out, "{}", released.to_json()).map_err(io)?;
                out.flush().map_err(io_err)?;
                return Ok(Outcome::Done);
            }
            match released {
                Released::Voided(n) => {
                    writeln!(out, "{name}: {n} voided; its holder's lease ended").map_err(io)?;
                }
                Released::Used { first, last } => {
                    let run = if first == last {
                        format!("{first} was")
                    } else {
                        format!("{first} to {last} were")
                    };
                    writeln!(
                        out,
                        "{name}: {run} written by the holder; the sequence moved past, its lease ended"
                    )
                    .map_err(io)?;
                }
                other => writeln!(out, "{name}: {other:?}").map_err(io)?,
            }
        }
        GaplessCommand::Alter { name, max_lease } => {
            let mut change = GaplessAlter::default();
            if let Some(s) = max_lease {
                change = change.with_max_lease(seconds("--max-lease", s)?);
            }
            let s = d.open_gapless(&name).await?.alter(change).await?;
            writeln!(out, "{}", status_line(&s)).map_err(io)?;
        }
    }
    out.flush().map_err(io_err)?;
    Ok(Outcome::Done)
}
