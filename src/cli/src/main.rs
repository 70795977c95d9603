//! The `dispenser` binary: parses the command line, hands each command to its module, prints
//! one line per error and exits with a code that says what kind of failure it was.
//!
//! The files, from the top down: `cli.rs` lists the commands; each command lives in a file
//! of its own with its arguments (`create.rs`, `next.rs`, `sequence.rs` for the other admin
//! commands of a sequence, `check.rs`, `audit.rs`, `doctor.rs`, `gapless.rs`, `queue.rs`,
//! `history.rs`, `bench/`, `serve/`) and `effect.rs` (what each writes, in words, for the
//! messages of an unknown outcome or an answer not printed); below them `args.rs` (argument
//! pieces several commands share), `output.rs` (the answer on stdout), `exit.rs` (exit codes)
//! and `probe.rs` (is the server there at all).

mod adopt;
mod args;
mod audit;
mod bench;
mod check;
mod cli;
mod create;
mod doctor;
mod effect;
mod exit;
mod gapless;
mod history;
mod next;
mod output;
mod probe;
mod queue;
mod sequence;
mod serve;

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;
use std::time::Duration;

use dispenser::{Dispenser, Error, Options, error::Written};

use cli::{Cli, Command};
use effect::Effect;
use exit::Outcome;
use output::Answer;

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
    let effect = effect::effect(&cli);
    // Standard output, not locked: `bench` and `serve` print from other threads too.
    let mut answer = Answer::new(BufWriter::new(io::stdout()));
    // A service starts and waits for its database; a command fails at once when every
    // host refuses the connection (the driver would wait its whole selection timeout).
    let serving = matches!(cli.command, Command::Serve(_));
    let outcome = runtime.block_on(async {
        if serving {
            return run(cli, &mut answer).await;
        }
        tokio::select! {
            biased;
            done = run(cli, &mut answer) => done,
            refused = probe::refused(&uri) => Err(refused),
        }
    });
    // The runtime is left running, never shut down: a shutdown cancels the tasks the driver
    // spawned (its client's last `endSessions` among them), and one still waiting for such a
    // task when it is polled panics inside the driver (`JoinError::Cancelled`). The process
    // ends with whatever it still runs; the writes worth waiting for were waited for
    // (`Dispenser::flush`).
    std::mem::forget(runtime);
    // Anything a command printed and did not flush (it flushes), and whether it all arrived.
    let outcome = match outcome {
        Ok(o) => answer.flush().map(|()| o).map_err(output::io_err),
        failed => failed,
    };
    if let Some(cause) = answer.failure() {
        return unprinted(effect.as_ref(), &answer, cause, checking);
    }
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
            let message = dispenser::error::redact::scrub(&e.to_string(), &uri);
            let told = told(&e, &message, effect.as_ref(), &answer);
            let written = output::unprinted_writes();
            if checking {
                eprintln!("dispenser: {message}");
                // The monitoring convention: the state is unknown.
                let _ = writeln!(io::stdout(), "UNKNOWN {message}");
                return ExitCode::from(check::Status::Unknown.code());
            }
            let done = e.written() == Written::Done;
            if done || (e.written() == Written::Nothing && !written.is_empty()) {
                // Written, then what was to tell of it failed (reading it back).
                let what = match (written.is_empty(), effect.as_ref()) {
                    (false, _) => written.join("; "),
                    (true, Some(f)) => f.what.clone(),
                    (true, None) => "its write was made".to_owned(),
                };
                let again = effect
                    .as_ref()
                    .map_or("running it again writes again", |f| f.again.as_str());
                eprintln!(
                    "dispenser: written, but its answer could not be made ({message}): {what}; {again}"
                );
                return ExitCode::from(exit::UNPRINTED);
            }
            eprintln!("dispenser: {told}");
            ExitCode::from(exit::code(&e))
        }
    }
}

/// The line that tells `e` (whose scrubbed message is `message`): with what to check when no
/// server could be reached; with how to find out when the outcome is unknown; with "nothing
/// was written" when a command that writes failed without writing.
fn told(e: &Error, message: &str, effect: Option<&Effect>, answer: &Answer<impl Write>) -> String {
    let before = output::unprinted_writes();
    let before = if before.is_empty() {
        String::new()
    } else {
        format!("; before it: {}", before.join("; "))
    };
    if e.written() == Written::Unknown {
        let find_out = effect.map_or_else(String::new, |f| format!("; {}", f.find_out));
        return format!("{message}{before}{find_out}");
    }
    let told = match effect {
        Some(_) if e.is_transient() || matches!(e, Error::Closed { .. }) => {
            let nothing = if answer.printed_some() {
                "nothing was written after what was printed"
            } else {
                "nothing was written"
            };
            if message.contains("nothing was written") {
                message.to_owned()
            } else {
                format!("{message}; {nothing}")
            }
        }
        _ => message.to_owned(),
    };
    if unreachable(e) {
        return format!("{told}; {}", probe::HINT);
    }
    told
}

/// The end of a command whose answer could not be printed: exit 14, and stderr names what
/// was written (or says nothing was, for a command that only reads).
fn unprinted(
    effect: Option<&Effect>,
    answer: &Answer<impl Write>,
    cause: &io::Error,
    checking: bool,
) -> ExitCode {
    if checking {
        eprintln!("dispenser: the answer could not be printed (standard output: {cause})");
        return ExitCode::from(check::Status::Unknown.code());
    }
    match effect {
        Some(f) => {
            let lines = answer.unprinted();
            let shown = if lines.is_empty() {
                String::new()
            } else {
                format!(": {lines}")
            };
            eprintln!(
                "dispenser: written, but its answer could not be printed (standard output: {cause}): {}{shown}; {}",
                f.what, f.again
            );
        }
        None => eprintln!(
            "dispenser: the answer could not be printed (standard output: {cause}); nothing was written"
        ),
    }
    ExitCode::from(exit::UNPRINTED)
}

/// Whether `e` says no server could be reached (then the user is told what to check): no
/// server selected, a name that does not resolve, a connection refused. A connection cut
/// during an operation is not that, nor a selection that failed because the last connection
/// was cut (the driver waits for its monitor to see the server again): the server was
/// reached.
fn unreachable(e: &Error) -> bool {
    use dispenser::mongodb::error::ErrorKind;
    let Error::Database { source, .. } = e else {
        return false;
    };
    let cut = [
        "connection reset",
        "broken pipe",
        "end of file",
        "early eof",
        "aborted",
    ];
    let said = dispenser::error::redact::describe_driver_error(source).to_lowercase();
    if cut.iter().any(|c| said.contains(c)) {
        return false;
    }
    match source.kind.as_ref() {
        ErrorKind::ServerSelection { .. } | ErrorKind::DnsResolve { .. } => true,
        ErrorKind::Io(io) => matches!(
            io.kind(),
            io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound
        ),
        _ => false,
    }
}

/// Runs the command. `bench` opens clients of its own (in worker processes too); every other
/// command works through one dispenser, whose background writes it waits for before the
/// runtime shuts down. `serve` prints its address itself; the others write their answer to
/// `out`, which they flush.
async fn run(cli: Cli, out: &mut Answer<impl Write>) -> dispenser::Result<Outcome> {
    let uri = cli.uri.as_str();
    let options = Options::default()
        .with_database(cli.db.as_str())
        .with_collection(cli.collection.as_str())
        .with_operation_timeout(Duration::from_secs_f64(cli.timeout))
        .with_caller(cli.caller.as_str());
    let connect = || Dispenser::connect(uri, options.clone());
    match cli.command {
        Command::Bench(a) => bench::run(uri, options, a).await,
        Command::Serve(a) => serve::run(connect().await?, a, uri).await,
        command => {
            let d = connect().await?;
            let done = one(&d, command, uri, out).await;
            d.flush().await;
            done
        }
    }
}

/// Runs a command other than `bench` and `serve` through `d`.
async fn one(
    d: &Dispenser,
    command: Command,
    uri: &str,
    out: &mut impl Write,
) -> dispenser::Result<Outcome> {
    match command {
        Command::Create(a) => create::run(d, a, out).await,
        Command::Next(a) => next::run(d, a, out).await,
        Command::Peek(a) => sequence::peek(d, a, out).await,
        Command::List(a) => sequence::list(d, a, out).await,
        Command::Alter(a) => sequence::alter(d, a, out).await,
        Command::AdvanceTo(a) => sequence::advance_to(d, a, out).await,
        Command::Adopt(a) => adopt::run(d, a, out).await,
        Command::Reset(a) => sequence::reset(d, a, out).await,
        Command::Delete(a) => sequence::delete(d, a, out).await,
        Command::History(a) => history::run(d, dispenser::error::Kind::Sequence, a, out).await,
        Command::Check(a) => check::run(d, a, out).await,
        Command::Audit(a) => audit::run(d, a, out).await,
        Command::Doctor(a) => doctor::run(d, a, uri, out).await,
        Command::Gapless(c) => gapless::run(d, c, out).await,
        Command::Queue(c) => queue::run(d, c, out).await,
        Command::Bench(_) | Command::Serve(_) => unreachable!("run handles them"),
    }
}
