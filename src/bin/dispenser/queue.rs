//! `dispenser queue …`: create a ticket queue, take tickets, call the next one, show it.

use std::io::Write;

use dispenser::Dispenser;
use dispenser::queue::{QueueSpec, QueueStatus, Ticket};

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
        /// Succeed without change if the queue exists with the same range.
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
        /// Print each ticket as JSON: {"ticket", "serial", "taken", "served", "waiting"}.
        #[arg(long)]
        json: bool,
    },
    /// Call the oldest waiting ticket and print it (exit 10 when nobody waits).
    Call {
        /// Queue name.
        name: String,
        /// Print the ticket as JSON: {"ticket", "serial", "taken", "served", "waiting"}.
        #[arg(long)]
        json: bool,
    },
    /// Show what is being served, how many wait, and the next ticket.
    Status {
        /// Queue name.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List every queue, one line each (a document that cannot be read is reported on
    /// stderr, exit 7).
    List {
        /// Print one JSON array of statuses.
        #[arg(long)]
        json: bool,
    },
    /// Delete a queue (exit 3 when there is none). Created again, it starts from its first
    /// ticket: delete a queue only when nobody waits in it.
    Delete {
        /// Queue name.
        name: String,
    },
}

/// A status as one line: `lobby: now serving 7, 3 waiting of 10, next ticket 1; tickets 1…9,
/// then 0; taken 11 served 8 rounds 1 updated_at …`.
pub fn describe(s: &QueueStatus) -> String {
    let serving = s
        .now_serving
        .map_or_else(|| "nobody yet".to_owned(), |n| n.to_string());
    let next = s
        .next_ticket
        .map_or_else(|| "none (full)".to_owned(), |n| n.to_string());
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

fn ticket_line(t: &Ticket, json: bool) -> String {
    if json {
        t.to_json().to_string()
    } else {
        t.number.to_string()
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
            if_not_exists,
        } => {
            let spec = QueueSpec::default().with_min(min).with_max(max);
            let q = if if_not_exists {
                d.ensure_queue(&name, spec).await?
            } else {
                d.create_queue(&name, spec).await?
            };
            writeln!(out, "{}", describe(&q.status().await?)).map_err(io_err)?;
        }
        QueueCommand::Take { name, count, json } => {
            let tickets = d.open_queue(&name).await?.take_n(count).await?;
            for t in &tickets {
                writeln!(out, "{}", ticket_line(t, json)).map_err(io_err)?;
            }
        }
        QueueCommand::Call { name, json } => {
            let t = d.open_queue(&name).await?.call().await?;
            writeln!(out, "{}", ticket_line(&t, json)).map_err(io_err)?;
        }
        QueueCommand::Status { name, json } => {
            let s = d.open_queue(&name).await?.status().await?;
            if json {
                writeln!(out, "{}", s.to_json()).map_err(io_err)?;
            } else {
                writeln!(out, "{}", describe(&s)).map_err(io_err)?;
            }
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
                let all: Vec<_> = rows.iter().map(QueueStatus::to_json).collect();
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
        QueueCommand::Delete { name } => {
            d.delete_queue(&name).await?;
            writeln!(out, "deleted queue {}", one_line_name(&name)).map_err(io_err)?;
        }
    }
    out.flush().map_err(io_err)?;
    Ok(Outcome::Done)
}
