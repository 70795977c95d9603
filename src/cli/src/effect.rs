//! What each command writes, in words: what to say when its write's outcome is unknown, or
//! when its answer could not be printed (`main.rs` says it; the exit codes are `exit.rs`'s).

use crate::cli::{Cli, Command};
use crate::gapless::GaplessCommand;
use crate::queue::QueueCommand;

/// What a command that writes writes, in words.
pub struct Effect {
    /// What it writes: "numbers of sequence \"orders\"".
    pub what: String,
    /// How to find out whether a write whose reply never came was made.
    pub find_out: String,
    /// What running the same command again does, once it was written.
    pub again: String,
}

impl Effect {
    fn new(what: String, find_out: String) -> Option<Effect> {
        Some(Effect {
            what,
            find_out,
            again: "running it again writes again".to_owned(),
        })
    }

    /// This effect, whose command run again does `again` (instead of writing again).
    fn again(effect: Option<Effect>, again: &str) -> Option<Effect> {
        effect.map(|e| Effect {
            again: again.to_owned(),
            ..e
        })
    }
}

/// What `cli`'s command writes, `None` for a command that only reads (`doctor` and `bench`
/// write only scratch documents of their own, and `serve` answers each request itself). A
/// new command does not compile until it is listed here; the outcomes harness
/// (`tests/integration/outcomes.rs`) runs every command listed as writing.
pub fn effect(cli: &Cli) -> Option<Effect> {
    let peek = |name: &str| {
        format!("`dispenser peek {name}` and `dispenser history {name}` show whether it was made")
    };
    let queue = |name: &str| {
        format!(
            "`dispenser queue peek {name}` and `dispenser queue history {name}` show whether it was made"
        )
    };
    let gapless = |name: &str| format!("`dispenser gapless peek {name}` shows whether it was made");
    match &cli.command {
        Command::Create(a) => Effect::new(
            format!("sequence {:?} created", a.name),
            format!("`dispenser peek {}` shows whether it exists", a.name),
        ),
        Command::Next(a) => Effect::new(
            format!("numbers issued from sequence {:?}", a.name),
            "numbers it may have reserved are a gap, never issued to anyone: drawing again is safe"
                .to_owned(),
        ),
        Command::Alter(a) => Effect::new(format!("sequence {:?} altered", a.name), peek(&a.name)),
        Command::Adopt(a) => Effect::new(
            format!("sequence {:?} moved past its source", a.name),
            peek(&a.name),
        ),
        Command::AdvanceTo(a) => Effect::new(
            format!("sequence {:?} advanced past {}", a.name, a.n),
            peek(&a.name),
        ),
        Command::Reset(a) => Effect::new(
            format!(
                "sequence {:?} reset to {}",
                a.name,
                a.next.or(a.value).unwrap_or_default()
            ),
            peek(&a.name),
        ),
        Command::Delete(a) => Effect::new(format!("sequence {:?} deleted", a.name), peek(&a.name)),
        Command::Gapless(g) => match g {
            GaplessCommand::Peek { .. }
            | GaplessCommand::List { .. }
            | GaplessCommand::History(_) => None,
            GaplessCommand::Create { name, .. } => Effect::new(
                format!("gap-free sequence {name:?} created"),
                gapless(name),
            ),
            GaplessCommand::Delete { name, .. } => Effect::new(
                format!("gap-free sequence {name:?} deleted"),
                format!(
                    "`dispenser gapless peek {name}` and `dispenser gapless history {name}` show whether it was"
                ),
            ),
            GaplessCommand::Issue { name, .. } => Effect::new(
                format!(
                    "gap-free numbers of {name:?}, each carried by a document inserted into its collection in {}",
                    cli.db
                ),
                format!(
                    "look for the document by its number in the collection `dispenser gapless peek {name}` names (`dispenser audit COLLECTION --field FIELD` lists the numbers used) before issuing again"
                ),
            ),
            GaplessCommand::Void { name, number, .. } => Effect::new(
                format!("number {number} of gap-free sequence {name:?} voided"),
                gapless(name),
            ),
            GaplessCommand::Release { name, number, .. } => Effect::new(
                format!("the lease on number {number} of gap-free sequence {name:?} released"),
                gapless(name),
            ),
            GaplessCommand::Alter { name, .. } => Effect::new(
                format!("gap-free sequence {name:?} altered"),
                gapless(name),
            ),
        },
        Command::Queue(q) => match q {
            QueueCommand::Peek { .. }
            | QueueCommand::List { .. }
            | QueueCommand::History(_) => None,
            QueueCommand::Take {
                name, request_id, ..
            } => Effect::again(Effect::new(
                format!("tickets taken from queue {name:?}"),
                match request_id {
                    Some(id) => format!(
                        "take again with the same --request-id {id}: it answers the tickets the first take got, if it got any, and takes nothing more"
                    ),
                    None => "a ticket it may have taken waits with nobody holding it and is called in its turn; take again, and pass --request-id next time: a take retried with the same id learns the tickets of one whose answer was lost".to_owned(),
                },
            ), if request_id.is_some() {
                "running it again with the same --request-id answers the same tickets and takes nothing more"
            } else {
                "running it again takes more tickets"
            }),
            QueueCommand::Create { name, .. } => {
                Effect::new(format!("queue {name:?} created"), queue(name))
            }
            QueueCommand::Call { name, .. } => {
                Effect::new(format!("a ticket of queue {name:?} called"), queue(name))
            }
            QueueCommand::Recall { name, .. } => {
                Effect::new(format!("a ticket of queue {name:?} recalled"), queue(name))
            }
            QueueCommand::Finish { name, .. } => Effect::new(
                format!("a desk of queue {name:?} finished its ticket"),
                queue(name),
            ),
            QueueCommand::Cancel {
                name,
                ticket,
                serial,
                request_id,
                ..
            } => Effect::again(Effect::new(
                match (ticket, serial, request_id) {
                    (_, Some(s), _) => format!("the ticket of serial {s} of queue {name:?} cancelled"),
                    (_, _, Some(id)) => format!(
                        "the ticket of the take with request id {id:?} of queue {name:?} cancelled"
                    ),
                    (Some(t), _, _) => format!("ticket {t} of queue {name:?} cancelled"),
                    (None, None, None) => format!("a ticket of queue {name:?} cancelled"),
                },
                queue(name),
            ), if serial.is_some() || request_id.is_some() {
                "running it again is refused: that ticket no longer waits"
            } else {
                "running it again cancels the ticket that waits with that number now, if one does"
            }),
            QueueCommand::Alter { name, .. } => {
                Effect::new(format!("queue {name:?} altered"), queue(name))
            }
            QueueCommand::Delete { name, .. } => {
                Effect::new(format!("queue {name:?} deleted"), queue(name))
            }
        },
        Command::Peek(_)
        | Command::List(_)
        | Command::Check(_)
        | Command::Audit(_)
        | Command::Doctor(_)
        | Command::History(_)
        | Command::Bench(_)
        | Command::Serve(_) => None,
    }
}
