//! The `dispenser` binary: parses the command line, hands each command to its module, prints
//! one line per error and exits with a code that says what kind of failure it was.
//!
//! The files, from the top down: `cli.rs` lists the commands; each command lives in a file
//! of its own with its arguments (`create.rs`, `next.rs`, `sequence.rs` for the other admin
//! commands of a sequence, `check.rs`, `audit.rs`, `doctor.rs`, `gapless.rs`, `queue.rs`,
//! `history.rs`, `bench/`, `serve/`); below them `args.rs` (argument pieces several commands share),
//! `output.rs` (writing to stdout), `exit.rs` (exit codes) and `probe.rs` (is the server
//! there at all).

mod args;
mod audit;
mod bench;
mod check;
mod cli;
mod create;
mod doctor;
mod exit;
mod gapless;
mod history;
mod next;
mod output;
mod probe;
mod queue;
mod sequence;
mod serve;

use std::io::{self, BufWriter};
use std::process::ExitCode;
use std::time::Duration;

use dispenser::{Dispenser, Error, Options};

use cli::{Cli, Command};
use exit::Outcome;

/// mimalloc: the service allocates on every request (hyper, axum, JSON), and glibc's malloc
/// took a quarter of the instructions of a draw over HTTP.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DISPENSER_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(io::stderr)
        .with_ansi(io::IsTerminal::is_terminal(&io::stderr()))
        .init();
    let cli = match Cli::try_parse_resolved() {
        Ok(cli) => cli,
        Err(e) => {
            // `check` speaks the monitoring convention: its usage errors are UNKNOWN (3).
            let checking = std::env::args_os().skip(1).any(|a| a == "check");
            let code = e.exit_code();
            let _ = e.print();
            return if checking && code != 0 {
                ExitCode::from(3)
            } else {
                ExitCode::from(u8::try_from(code).unwrap_or(exit::OTHER))
            };
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dispenser: cannot start the async runtime: {e}");
            return ExitCode::from(exit::OTHER);
        }
    };
    let uri = cli.uri.clone();
    let checking = matches!(cli.command, Command::Check(_));
    // A service starts and waits for its database; a command fails at once when every
    // host refuses the connection (the driver would wait its whole selection timeout).
    let serving = matches!(cli.command, Command::Serve(_));
    let outcome = runtime.block_on(async {
        if serving {
            return run(cli).await;
        }
        tokio::select! {
            biased;
            done = run(cli) => done,
            refused = probe::refused(&uri) => Err(refused),
        }
    });
    match outcome {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Exit(code)) => ExitCode::from(code),
        Ok(Outcome::Duplicate) => {
            eprintln!("dispenser: DUPLICATE numbers were issued: this is a bug, please report it");
            ExitCode::from(exit::DUPLICATE)
        }
        Err(e) => {
            // The message holds the essential cause (a driver error is one line of it), so
            // the source chain is not appended; it may quote the URI, hence the scrub.
            let message = dispenser::redact::scrub(&e.to_string(), &uri);
            if unreachable(&e) {
                eprintln!("dispenser: {message}; {}", probe::HINT);
            } else {
                eprintln!("dispenser: {message}");
            }
            if checking {
                // The monitoring convention: the state is unknown.
                println!("UNKNOWN {message}");
                return ExitCode::from(check::Status::Unknown.code());
            }
            ExitCode::from(exit::code(&e))
        }
    }
}

/// Whether `e` says no server could be reached (then the user is told what to check).
fn unreachable(e: &Error) -> bool {
    match e {
        Error::Database { source, .. } => matches!(
            source.kind.as_ref(),
            dispenser::mongodb::error::ErrorKind::ServerSelection { .. }
                | dispenser::mongodb::error::ErrorKind::Io(_)
                | dispenser::mongodb::error::ErrorKind::DnsResolve { .. }
        ),
        _ => false,
    }
}

/// Runs the command. `bench` opens clients of its own (in worker processes too); every other
/// command works through one dispenser. `serve` prints its address itself; the others write
/// their answer through a buffer on stdout, which they flush.
async fn run(cli: Cli) -> dispenser::Result<Outcome> {
    let uri = cli.uri.as_str();
    let options = Options::default()
        .with_database(cli.db.as_str())
        .with_collection(cli.collection.as_str())
        .with_operation_timeout(Duration::from_secs_f64(cli.timeout))
        .with_caller(cli.caller.as_str());
    let connect = || Dispenser::connect(uri, options.clone());
    let stdout = || BufWriter::new(io::stdout().lock());
    match cli.command {
        Command::Create(a) => create::run(&connect().await?, a, &mut stdout()).await,
        Command::Next(a) => next::run(&connect().await?, a, &mut stdout()).await,
        Command::Peek(a) => sequence::peek(&connect().await?, a, &mut stdout()).await,
        Command::List(a) => sequence::list(&connect().await?, a, &mut stdout()).await,
        Command::Alter(a) => sequence::alter(&connect().await?, a, &mut stdout()).await,
        Command::AdvanceTo(a) => sequence::advance_to(&connect().await?, a, &mut stdout()).await,
        Command::Reset(a) => sequence::reset(&connect().await?, a, &mut stdout()).await,
        Command::Delete(a) => sequence::delete(&connect().await?, a, &mut stdout()).await,
        Command::History(a) => history::run(&connect().await?, a, &mut stdout()).await,
        Command::Check(a) => check::run(&connect().await?, a, &mut stdout()).await,
        Command::Audit(a) => audit::run(&connect().await?, a, &mut stdout()).await,
        Command::Doctor(a) => doctor::run(&connect().await?, a, uri, &mut stdout()).await,
        Command::Gapless(c) => gapless::run(&connect().await?, c, &mut stdout()).await,
        Command::Queue(c) => queue::run(&connect().await?, c, &mut stdout()).await,
        Command::Bench(a) => bench::run(uri, options, a).await,
        Command::Serve(a) => serve::run(connect().await?, a, uri).await,
    }
}
