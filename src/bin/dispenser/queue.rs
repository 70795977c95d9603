//! `dispenser queue …`: create a ticket queue, take tickets, call the next one (from a desk,
//! or a given ticket), recall, cancel, change the range, show it.

use std::io::Write;

use dispenser::queue::{Queue, QueueAlter, QueueSpec, QueueState, Ticket};
use dispenser::{Dispenser, Format};

use crate::args::whole;
use crate::exit::Outcome;
use crate::output::{io_err, one_line_name};

/// The most tickets one `queue take --count` may take.
pub const MAX_TAKE: u64 = 10_000;

/// `dispenser queue`.
#[derive(clap::Subcommand, Debug)]
pub enum QueueCommand {
    /// Create a queue: tickets MIN+1 … MAX, then MIN, round again; at most MAX-MIN+1 wait.
    Create {
        /// Queue name (1–200 bytes, no control characters, not starting with '$').
        name: String,
        /// The lowest ticket (shown last in a round).
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        min: i64,
        /// The highest ticket.
        #[arg(long, default_value_t = 99, allow_negative_numbers = true)]
        max: i64,
        /// How tickets are shown, e.g. 'A-{n:03}'; the numbers stay in --json.
        #[arg(long)]
        format: Option<String>,
        /// Start again at the first ticket each local day (in --tz), never handing out a
        /// number still held by someone waiting from the day before.
        #[arg(long)]
        daily: bool,
        /// The IANA time zone of the queue's local day and hours (today's counts, --daily).
        #[arg(long, default_value = "UTC")]
        tz: String,
        /// Succeed without change if the queue exists with the same lowest ticket, format,
        /// zone and --daily (else exit 6); a highest ticket an alter changed since is kept, and
        /// stderr says so.
        #[arg(long)]
        if_not_exists: bool,
    },
    /// Take the next ticket and print it (exit 9 when the queue is full: nothing taken).
    Take {
        /// Queue name.
        name: String,
        /// Take this many tickets at once, a family: consecutive tickets in one write, all or
        /// nothing (exit 9 and nothing taken when fewer fit); printed in the order they will
        /// be called.
        #[arg(long, default_value_t = 1, value_parser = whole::<u64>(1, MAX_TAKE), allow_negative_numbers = true)]
        count: u64,
        /// A request id (1-64 printable ASCII): the same id again within 24 hours prints the
        /// tickets the first take got ("replayed": true in --json) and takes nothing more, so a
        /// take whose answer was lost can be retried.
        #[arg(long)]
        request_id: Option<String>,
        /// Print each ticket as JSON: {"ticket", "label", "serial", "position",
        /// "estimated_wait_seconds", "taken", "served", "waiting", "replayed", …}.
        #[arg(long)]
        json: bool,
    },
    /// Call the oldest waiting ticket (or a given one: --serial S, or --ticket T) and print it
    /// (exit 10 when nobody waits). The desk shows it until it calls again; a ticket shown is
    /// never handed out.
    Call {
        /// Queue name.
        name: String,
        /// The desk calling: 1-16 letters, digits, spaces, '-', '_' or '.', not only spaces
        /// (spaces at either end are dropped).
        #[arg(long)]
        desk: Option<String>,
        /// Call the waiting ticket that shows this number, out of order: looked up once, then
        /// called by its serial, which stderr names (exit 11 when it does not wait).
        #[arg(long, allow_negative_numbers = true, conflicts_with = "serial")]
        ticket: Option<i64>,
        /// Call the waiting ticket of this serial out of order (the `serial` its take
        /// printed with --json); refused when that very ticket no longer waits (exit 11).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        serial: Option<u64>,
        /// Print the ticket as JSON: {"ticket", "label", "serial", "desk", "taken", "served",
        /// "waiting", …}.
        #[arg(long)]
        json: bool,
    },
    /// Announce again the ticket a desk shows (exit 10 when it shows none); nobody is served.
    Recall {
        /// Queue name.
        name: String,
        /// The desk (the one without a name when left out).
        #[arg(long)]
        desk: Option<String>,
        /// Only while the desk shows the ticket of this serial (exit 11 when it shows another).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        serial: Option<u64>,
        /// Print the ticket as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A desk is done with its ticket (closes, or serves no one next): it shows none, and the
    /// ticket's number may come round again (exit 10 when it shows none).
    Finish {
        /// Queue name.
        name: String,
        /// The desk (the one without a name when left out).
        #[arg(long)]
        desk: Option<String>,
        /// Only while the desk shows the ticket of this serial (exit 11 when it shows another).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        serial: Option<u64>,
    },
    /// Cancel a waiting ticket: calls pass over it (exit 11 when it does not wait; nothing
    /// changed). Name it by the number it shows (looked up once, then cancelled by its
    /// serial, which the answer names), by --serial, or by --request-id of its take.
    #[command(group(clap::ArgGroup::new("which").required(true).args(["ticket", "serial", "request_id"])))]
    Cancel {
        /// Queue name.
        name: String,
        /// The number the ticket shows.
        #[arg(allow_negative_numbers = true)]
        ticket: Option<i64>,
        /// The ticket's serial (the `serial` its take printed with --json); refused when that
        /// very ticket no longer waits.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        serial: Option<u64>,
        /// The request id of the take that got the ticket (a give-up; a take of several
        /// tickets is refused: name each by --serial).
        #[arg(long)]
        request_id: Option<String>,
        /// Print the ticket as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Change the highest ticket; refused (exit 6, nothing changed) when a ticket waiting or
    /// shown would show another number.
    Alter {
        /// Queue name.
        name: String,
        /// The new highest ticket.
        #[arg(long, allow_negative_numbers = true)]
        max: i64,
    },
    /// Show what is being served, how many wait, and the next ticket.
    Peek {
        /// Queue name.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Who changed the queue, when, how: its recorded operations, oldest first (a deleted
    /// queue's too).
    History(crate::history::HistoryArgs),
    /// List every queue, one line each (a document that cannot be read is reported on
    /// stderr, exit 7).
    List {
        /// Print one JSON array of statuses.
        #[arg(long)]
        json: bool,
    },
    /// Delete a queue (exit 3 when there is none). Refused (exit 6, nothing deleted) while
    /// tickets wait or a desk shows one: created again, the queue starts from its first ticket
    /// and would hand out their numbers again.
    Delete {
        /// Queue name.
        name: String,
        /// Delete it even while tickets are held (or its document cannot be read): you know
        /// nobody waits any more. The history records the force.
        #[arg(long)]
        force: bool,
    },
}

/// A ticket as people see it, by the queue's format.
fn label(s: &QueueState, ticket: i64) -> String {
    match s.label_format.as_deref().map(Format::parse) {
        Some(Ok(f)) => f.render(ticket, None),
        _ => ticket.to_string(),
    }
}

/// A status as one line: `lobby: now serving 7, 3 waiting of 10, next ticket 1; tickets 1…9,
/// then 0; taken 11 served 8 rounds 1 updated_at …`.
pub fn describe(s: &QueueState) -> String {
    let serving = s
        .now_serving
        .map_or_else(|| "nobody yet".to_owned(), |n| label(s, n));
    let next = s
        .next_ticket
        .map_or_else(|| "none (full)".to_owned(), |n| label(s, n));
    format!(
        "{name}: now serving {serving}, {waiting} waiting of {capacity}, next ticket {next}; tickets {first}…{max}, then {min}; taken {taken} served {served} rounds {rounds} updated_at {updated}",
        name = one_line_name(&s.name),
        waiting = s.waiting,
        capacity = s.capacity,
        first = i128::from(s.min) + 1,
        max = s.max,
        min = s.min,
        taken = s.taken,
        served = s.served,
        rounds = s.rounds,
        updated = s.updated_at.try_to_rfc3339_string().unwrap_or_default(),
    )
}

/// The lines `queue peek` prints after the first: each desk, the last calls, the waits.
fn details(s: &QueueState) -> Vec<String> {
    let secs = |d: Option<std::time::Duration>| {
        d.map_or_else(|| "unknown".to_owned(), |d| format!("{} s", d.as_secs()))
    };
    let mut lines = Vec::new();
    for d in &s.desks {
        lines.push(format!(
            "  desk {}: {}",
            d.desk
                .as_deref()
                .map_or_else(|| "(unnamed)".to_owned(), one_line_name),
            d.label
        ));
    }
    for c in s.recent_calls.iter().take(10) {
        lines.push(format!(
            "  {} {} at desk {} {}",
            if c.recall { "recalled" } else { "called" },
            c.label,
            c.desk
                .as_deref()
                .map_or_else(|| "(unnamed)".to_owned(), one_line_name),
            c.at.try_to_rfc3339_string().unwrap_or_default()
        ));
    }
    lines.push(format!(
        "  wait: estimated {} for a ticket taken now, average {}, p90 {}; today taken {} served {}; cancelled {}",
        secs(s.estimated_wait),
        secs(s.average_wait),
        secs(s.p90_wait),
        s.taken_today,
        s.served_today,
        s.cancelled
    ));
    lines
}

/// The ticket that waits with `number` in queue `q`, looked up once (a number read off a
/// board): its serial and the queue's incarnation, which the act then names, and stderr says.
async fn resolve(
    q: &Queue,
    number: i64,
) -> dispenser::Result<(u64, dispenser::mongodb::bson::oid::ObjectId)> {
    let t = q.waiting_ticket(number).await?;
    eprintln!(
        "dispenser: ticket {} of queue {} is serial {}",
        t.label,
        one_line_name(q.name()),
        t.serial
    );
    Ok((t.serial, t.incarnation))
}

fn ticket_line(t: &Ticket, json: bool) -> String {
    if json {
        t.to_json().to_string()
    } else {
        t.label.clone()
    }
}

pub async fn run(
    d: &Dispenser,
    cmd: QueueCommand,
    out: &mut impl Write,
) -> dispenser::Result<Outcome> {
    match cmd {
        QueueCommand::Create {
            name,
            min,
            max,
            format,
            daily,
            tz,
            if_not_exists,
        } => {
            let mut spec = QueueSpec::default()
                .with_min(min)
                .with_max(max)
                .with_daily(daily);
            // The zone by name, as given: `validate` names the queue if it is unknown.
            spec.time_zone = tz;
            if let Some(f) = format {
                spec = spec.with_format(Format::parse(&f)?);
            }
            let q = if if_not_exists {
                let q = d.ensure_queue(&name, spec).await?;
                crate::output::kept(dispenser::Kind::Queue, &name, q.altered());
                q
            } else {
                d.create_queue(&name, spec).await?
            };
            crate::output::wrote(format!("queue {name:?} created"));
            writeln!(out, "{}", describe(&q.peek().await?)).map_err(io_err)?;
        }
        QueueCommand::Take {
            name,
            count,
            request_id,
            json,
        } => {
            let q = d.open_queue(&name).await?;
            let mut take = q.take().count(count);
            if let Some(id) = request_id {
                take = take.request_id(id);
            }
            let tickets = take.await?;
            for t in &tickets {
                writeln!(out, "{}", ticket_line(t, json)).map_err(io_err)?;
            }
        }
        QueueCommand::Call {
            name,
            desk,
            ticket,
            serial,
            json,
        } => {
            let q = d.open_queue(&name).await?;
            let mut call = q.call();
            if let Some(desk) = desk {
                call = call.desk(desk);
            }
            if let Some(number) = ticket {
                let (serial, incarnation) = resolve(&q, number).await?;
                call = call.serial(serial).incarnation(incarnation);
            }
            if let Some(serial) = serial {
                call = call.serial(serial);
            }
            let t = call.await?;
            writeln!(out, "{}", ticket_line(&t, json)).map_err(io_err)?;
        }
        QueueCommand::Recall {
            name,
            desk,
            serial,
            json,
        } => {
            let q = d.open_queue(&name).await?;
            let mut recall = q.recall();
            if let Some(desk) = desk {
                recall = recall.desk(desk);
            }
            if let Some(serial) = serial {
                recall = recall.serial(serial);
            }
            let t = recall.await?;
            writeln!(out, "{}", ticket_line(&t, json)).map_err(io_err)?;
        }
        QueueCommand::Finish { name, desk, serial } => {
            let q = d.open_queue(&name).await?;
            let mut finish = q.finish();
            if let Some(desk) = desk {
                finish = finish.desk(desk);
            }
            if let Some(serial) = serial {
                finish = finish.serial(serial);
            }
            let t = finish.await?;
            writeln!(
                out,
                "desk {} of queue {} finished ticket {}",
                t.desk
                    .as_deref()
                    .map_or_else(|| "(unnamed)".to_owned(), one_line_name),
                one_line_name(&name),
                t.label
            )
            .map_err(io_err)?;
        }
        QueueCommand::Cancel {
            name,
            ticket,
            serial,
            request_id,
            json,
        } => {
            let q = d.open_queue(&name).await?;
            let mut cancel = q.cancel();
            if let Some(number) = ticket {
                let (serial, incarnation) = resolve(&q, number).await?;
                cancel = cancel.serial(serial).incarnation(incarnation);
            }
            if let Some(serial) = serial {
                cancel = cancel.serial(serial);
            }
            if let Some(id) = request_id {
                cancel = cancel.request_id(id);
            }
            let t = cancel.await?;
            if json {
                let mut v = t.to_json();
                v["cancelled"] = serde_json::Value::Bool(true);
                writeln!(out, "{v}").map_err(io_err)?;
            } else {
                writeln!(
                    out,
                    "cancelled ticket {} (serial {}) of queue {}",
                    t.label,
                    t.serial,
                    one_line_name(&name)
                )
                .map_err(io_err)?;
            }
        }
        QueueCommand::Alter { name, max } => {
            let change = QueueAlter::default().with_max(max);
            let s = d.open_queue(&name).await?.alter(change).await?;
            writeln!(out, "{}", describe(&s)).map_err(io_err)?;
        }
        QueueCommand::Peek { name, json } => {
            let s = d.open_queue(&name).await?.peek().await?;
            if json {
                writeln!(out, "{}", s.to_json()).map_err(io_err)?;
            } else {
                writeln!(out, "{}", describe(&s)).map_err(io_err)?;
                for line in details(&s) {
                    writeln!(out, "{line}").map_err(io_err)?;
                }
            }
        }
        QueueCommand::History(a) => {
            return crate::history::run(d, dispenser::Kind::Queue, a, out).await;
        }
        QueueCommand::List { json } => {
            // As `dispenser list`: one line per queue on stdout (or one JSON array), a
            // document that cannot be read on stderr, exit 7 then.
            let mut corrupt = None;
            let mut rows = Vec::new();
            for item in d.list_queues().await? {
                match item {
                    Ok(s) => rows.push(s),
                    Err(e) => {
                        eprintln!("dispenser: {e}");
                        corrupt = Some(e);
                    }
                }
            }
            if json {
                let all: Vec<_> = rows.iter().map(QueueState::to_json).collect();
                writeln!(out, "{}", serde_json::Value::Array(all)).map_err(io_err)?;
            } else if rows.is_empty() && corrupt.is_none() {
                let place = format!("{}.{}_queues", d.options().database, d.options().collection);
                eprintln!("dispenser: no queues in {place}");
            } else {
                for s in &rows {
                    writeln!(out, "{}", describe(s)).map_err(io_err)?;
                }
            }
            out.flush().map_err(io_err)?;
            if let Some(e) = corrupt {
                return Err(e);
            }
        }
        QueueCommand::Delete { name, force } => {
            d.delete_queue(&name).force(force).await?;
            writeln!(out, "deleted queue {}", one_line_name(&name)).map_err(io_err)?;
        }
    }
    out.flush().map_err(io_err)?;
    Ok(Outcome::Done)
}
