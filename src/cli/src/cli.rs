//! The command line: the top-level parser, the global options and the list of commands.
//! Each command's own arguments are defined beside the code that runs it.

use clap::{Parser, Subcommand};

use crate::args::parse_timeout;
use crate::audit::AuditArgs;
use crate::bench::args::BenchArgs;
use crate::check::CheckArgs;
use crate::create::CreateArgs;
use crate::doctor::DoctorArgs;
use crate::gapless::GaplessCommand;
use crate::history::HistoryArgs;
use crate::next::NextArgs;
use crate::queue::QueueCommand;
use crate::sequence::{AdvanceToArgs, AlterArgs, DeleteArgs, ListArgs, PeekArgs, ResetArgs};
use crate::serve::ServeArgs;

/// Unique numbers from MongoDB: sequences and cyclic serial numbers, never issued twice.
#[derive(Debug, Parser)]
#[command(name = "dispenser", version, about, long_about = None)]
pub struct Cli {
    /// MongoDB connection string [default: $MONGODB_URI, else mongodb://127.0.0.1:27017]
    /// (its password is never printed).
    // Not clap's `env`: an argument taken from the environment counts as given, and clap's
    // usage lines would then show `--uri <URI>` as if it were required.
    #[arg(long = "uri", id = "uri", value_name = "URI", global = true)]
    pub uri_flag: Option<String>,

    /// The connection string in effect: --uri, else MONGODB_URI, else the local default
    /// (see [`Cli::try_parse_resolved`]).
    #[arg(skip)]
    pub uri: String,

    /// Database holding the sequence documents.
    #[arg(long, global = true, default_value = "dispenser")]
    pub db: String,

    /// Collection holding the sequence documents.
    #[arg(long, global = true, default_value = "dispensers")]
    pub collection: String,

    /// Seconds one database operation may take (also the server selection timeout).
    #[arg(long, global = true, default_value_t = 10.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub timeout: f64,

    /// Who is acting: the name the history of admin operations records (1 to 128 printable
    /// ASCII characters) [default: $DISPENSER_CALLER, else USER@HOST].
    // Not clap's `env`, for the reason --uri is not.
    #[arg(long = "caller", id = "caller", value_name = "NAME", global = true)]
    pub caller_flag: Option<String>,

    /// The caller in effect: --caller, else DISPENSER_CALLER, else USER@HOST.
    #[arg(skip)]
    pub caller: String,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The URI used when neither --uri nor MONGODB_URI is given.
pub const DEFAULT_URI: &str = "mongodb://127.0.0.1:27017";

impl Cli {
    /// Parses the command line and settles the URI: --uri, else a non-empty MONGODB_URI,
    /// else [`DEFAULT_URI`].
    pub fn try_parse_resolved() -> Result<Self, clap::Error> {
        let mut cli = Cli::try_parse()?;
        cli.uri = cli
            .uri_flag
            .take()
            .or_else(|| std::env::var("MONGODB_URI").ok().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| DEFAULT_URI.to_owned());
        cli.caller = cli
            .caller_flag
            .take()
            .or_else(|| {
                std::env::var("DISPENSER_CALLER")
                    .ok()
                    .filter(|c| !c.is_empty())
            })
            .unwrap_or_else(crate::history::default_caller);
        // What one flag's parser cannot see: `check`'s thresholds in the wrong order, a usage
        // error like any other (before anything connects).
        if let Command::Check(a) = &cli.command
            && let Err(m) = a.check_thresholds()
        {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            cmd.build();
            let kind = clap::error::ErrorKind::ArgumentConflict;
            return Err(match cmd.find_subcommand_mut("check") {
                Some(check) => check.error(kind, m),
                None => cmd.error(kind, m),
            });
        }
        Ok(cli)
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a sequence.
    Create(CreateArgs),
    /// Issue numbers, one per line on stdout.
    Next(NextArgs),
    /// Show the stored state of a sequence.
    Peek(PeekArgs),
    /// List all sequences (or the scopes of one template).
    List(ListArgs),
    /// Exhaustion alerts: one line per sequence, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
    Check(CheckArgs),
    /// Gaps and duplicates of a number field in any collection (exit 0 clean, 1 found).
    Audit(AuditArgs),
    /// Examine the server: can it keep the promise of no duplicates? Exit 0 fit, 1 unfit.
    ///
    /// Reports the server (version, wire versions, topology), whether majority + journaled
    /// writes are acknowledged, whether each operation the library sends works as it needs it,
    /// and a concurrency probe (tasks × conditional increments and compare-and-sets on a
    /// document of its own: a lost update makes the server unfit). It writes only in a scratch
    /// collection of its own in --db (dispenser_doctor_…) and removes it.
    Doctor(DoctorArgs),
    /// Gap-free sequences (invoices): peek, void, issue, release, alter.
    #[command(subcommand)]
    Gapless(GaplessCommand),
    /// Ticket queues: take a ticket, call the next one; never two waiting with one number.
    ///
    /// A queue's tickets are MIN+1 … MAX, then MIN, round again. The tickets waiting and those
    /// the desks show are never handed out again: a take is refused when it would not fit
    /// beside them (exit 9), a call when nobody waits (exit 10), a cancel or a call of a
    /// given ticket when it does not wait (exit 11). Queues are kept in the collection
    /// COLLECTION_queues (dispensers_queues by default).
    #[command(subcommand)]
    Queue(QueueCommand),
    /// Change the shape of a live sequence (step, bounds, cycle, format) while others draw.
    Alter(AlterArgs),
    /// Move a sequence past N (after an import); never moves it backwards.
    AdvanceTo(AdvanceToArgs),
    /// Move a sequence past every number another numbering issued (mongoose-sequence,
    /// mongoengine, a counter, the documents' highest number): the switch-over; never
    /// backwards, recorded in the history as `adopt`.
    Adopt(crate::adopt::AdoptArgs),
    /// Set the number a sequence issues next.
    Reset(ResetArgs),
    /// Delete a sequence (or only its old scopes).
    Delete(DeleteArgs),
    /// Who created, altered, advanced, reset or deleted a sequence, when, and how.
    ///
    /// A queue's and a gap-free sequence's: `queue history`, `gapless history`. Every admin operation of the library, the command line and the service is recorded in
    /// COLLECTION_history (dispensers_history by default): who (--caller here, the token's
    /// name through the service), when (the server's clock), the parameters, the state before
    /// and after, and how it ended (done, refused, failed, or pending: no outcome recorded).
    /// Oldest first.
    History(HistoryArgs),
    /// Measure throughput and latency, check for duplicates, compare with raw driver calls.
    Bench(BenchArgs),
    /// Serve numbers over HTTP (bearer tokens, blocks with prefetch, /healthz, /metrics).
    Serve(ServeArgs),
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_is_well_formed() {
        Cli::command().debug_assert();
    }
}
