//! The `dispenser` binary: parses the command line, calls the library, prints one line per
//! error and exits with a code that says what kind of failure it was.

mod audit;
mod bench;
mod check;
mod cli;
mod doctor;
mod gapless;
mod probe;
mod queue;
mod serve;

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;
use std::time::Duration;

use dispenser::{
    Alter, Dispenser, Error, Format, Options, SequenceState, Spec, Strategy, block::BlockOptions,
};

use cli::{Cli, Command, StrategyArg};

/// Exit codes (documented in the README).
mod exit {
    pub const OTHER: u8 = 1;
    pub const INVALID_INPUT: u8 = 2;
    pub const NO_SUCH_SEQUENCE: u8 = 3;
    pub const EXHAUSTED: u8 = 4;
    pub const DATABASE: u8 = 5;
    pub const CONFLICT: u8 = 6;
    pub const CORRUPT: u8 = 7;
    pub const DUPLICATE: u8 = 8;
    pub const QUEUE_FULL: u8 = 9;
    pub const NOBODY_WAITING: u8 = 10;
}

fn exit_code(e: &Error) -> u8 {
    match e {
        Error::InvalidName { .. } | Error::InvalidSpec { .. } | Error::InvalidArgument { .. } => {
            exit::INVALID_INPUT
        }
        Error::NoSuchSequence { .. } | Error::NoSuchQueue { .. } => exit::NO_SUCH_SEQUENCE,
        Error::Exhausted { .. } => exit::EXHAUSTED,
        Error::Database { .. } | Error::Timeout { .. } => exit::DATABASE,
        Error::AlreadyExists { .. }
        | Error::SpecConflict { .. }
        | Error::WouldGoBackwards { .. }
        | Error::Contention { .. }
        | Error::QueueExists { .. } => exit::CONFLICT,
        Error::QueueFull { .. } => exit::QUEUE_FULL,
        Error::NobodyWaiting { .. } => exit::NOBODY_WAITING,
        Error::CorruptDocument { .. } => exit::CORRUPT,
        _ => exit::OTHER,
    }
}

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
            let message = dispenser::scrub(&e.to_string(), &uri);
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
            ExitCode::from(exit_code(&e))
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

/// How a command ended when it did not fail.
enum Outcome {
    Done,
    /// The benchmark found a duplicate.
    Duplicate,
    /// `check`: the monitoring status.
    Exit(u8),
}

async fn run(cli: Cli) -> dispenser::Result<Outcome> {
    let strategy = match &cli.command {
        Command::Next(a) => match a.strategy {
            StrategyArg::Cas => Strategy::Cas,
            StrategyArg::Inc => Strategy::ConditionalIncrement,
        },
        _ => Strategy::default(),
    };
    let options = Options::default()
        .with_database(cli.db.as_str())
        .with_collection(cli.collection.as_str())
        .with_strategy(strategy)
        .with_operation_timeout(Duration::from_secs_f64(cli.timeout));
    if let Command::Bench(args) = cli.command {
        options.validate()?;
        return Ok(if bench::run(&cli.uri, options, args).await? {
            Outcome::Done
        } else {
            Outcome::Duplicate
        });
    }
    let d = Dispenser::connect(&cli.uri, options).await?;
    if let Command::Serve(args) = cli.command {
        serve::run(d, args, &cli.uri).await?;
        return Ok(Outcome::Done);
    }
    let mut out = BufWriter::new(io::stdout().lock());
    if let Command::Check(args) = cli.command {
        let code = check::run(&d, args, &mut out).await;
        return Ok(Outcome::Exit(code));
    }
    if let Command::Doctor(args) = cli.command {
        let code = doctor::run(&d, args, &cli.uri, &mut out).await?;
        out.flush().map_err(io_err)?;
        return Ok(Outcome::Exit(code));
    }
    if let Command::Audit(args) = cli.command {
        let code = audit::run(&d, args, &mut out).await?;
        out.flush().map_err(io_err)?;
        return Ok(Outcome::Exit(code));
    }
    if let Command::Gapless(cmd) = cli.command {
        gapless::run(&d, cmd, &mut out).await?;
        out.flush().map_err(io_err)?;
        return Ok(Outcome::Done);
    }
    if let Command::Queue(cmd) = cli.command {
        return queue::run(&d, cmd, &mut out).await.map(|()| Outcome::Done);
    }
    match cli.command {
        Command::Create(a) => {
            let spec = Spec::default()
                .with_start(a.start)
                .with_step(a.step)
                .with_min(a.min)
                .with_max(a.max)
                .with_cycle(a.cycle);
            // Parse the format first: bad input writes nothing.
            let format = a.format.as_deref().map(Format::parse).transpose()?;
            if let Some(stripes) = a.stripes {
                if format.is_some() {
                    return Err(Error::InvalidArgument {
                        what: "--format".into(),
                        reason: "a striped sequence has no format (its numbers are not in order)"
                            .into(),
                    });
                }
                d.ensure_striped(&a.name, stripes, spec).await?;
                for state in d.peek_striped(&a.name).await? {
                    writeln!(out, "{}", describe(&state)).map_err(io_err)?;
                }
                out.flush().map_err(io_err)?;
                return Ok(Outcome::Done);
            }
            if a.if_not_exists {
                d.ensure(&a.name, spec).await?;
            } else {
                d.create(&a.name, spec).await?;
            }
            if let Some(f) = &format {
                d.set_format(&a.name, Some(f)).await?;
            }
            let state = d.peek(&a.name).await?;
            writeln!(out, "{}", describe(&state)).map_err(io_err)?;
        }
        Command::Next(a) => {
            let scope = match (&a.scope, a.daily) {
                (Some(key), _) => Some(key.clone()),
                (None, true) => Some(d.open_daily(&a.name, &a.tz)?.scope_now()),
                (None, false) => None,
            };
            let format = if a.formatted {
                let f = d
                    .peek(&a.name)
                    .await?
                    .format
                    .ok_or_else(|| Error::InvalidArgument {
                        what: "--formatted".into(),
                        reason: format!(
                            "sequence {:?} has no format (set one with create --format)",
                            a.name
                        ),
                    })?;
                // Refused before anything is drawn: `INV--000001` is no serial number.
                if scope.is_none() && f.uses_scope() {
                    return Err(Error::InvalidArgument {
                        what: "--formatted".into(),
                        reason: format!(
                            "the format of sequence {:?} is {:?}, which needs a scope: add --scope KEY or --daily",
                            a.name,
                            f.as_str()
                        ),
                    });
                }
                Some(f)
            } else {
                None
            };
            let show = |n: i64| match &format {
                Some(f) => f.try_render(n, scope.as_deref()),
                None => Ok(n.to_string()),
            };
            let opened = match &scope {
                Some(key) => d.open_scope(&a.name, key).await,
                None => d.open(&a.name).await,
            };
            let seq = match opened {
                Err(Error::NoSuchSequence { .. })
                    if scope.is_none() && striped(&d, &a.name).await =>
                {
                    let ids = d.open_striped(&a.name).await?;
                    let ids = match a.block {
                        Some(size) => ids.with_blocks(run_blocks(size, a.count))?,
                        None => ids,
                    };
                    for _ in 0..a.count {
                        let n = ids.next().await?;
                        writeln!(out, "{n}").map_err(io_err)?;
                        out.flush().map_err(io_err)?;
                    }
                    let report = ids.close().await?;
                    if let Some(line) = close_line("block clients", &report) {
                        eprintln!("{line}");
                    }
                    return Ok(Outcome::Done);
                }
                other => other?,
            };
            if let Some(size) = a.block {
                let blocks = seq.into_blocks(run_blocks(size, a.count))?;
                for i in 1..=a.count {
                    // Only numbers already issued are printed.
                    let n = blocks.next().await?;
                    writeln!(out, "{}", show(n)?).map_err(io_err)?;
                    if i % size == 0 {
                        out.flush().map_err(io_err)?;
                    }
                }
                out.flush().map_err(io_err)?;
                let report = blocks.close().await?;
                if let Some(line) = close_line("block client", &report) {
                    eprintln!("{line}");
                }
            } else {
                let mut left = a.count;
                while left > 0 {
                    let run = seq.next_n(left).await?;
                    for n in run {
                        writeln!(out, "{}", show(n)?).map_err(io_err)?;
                    }
                    // Everything issued is on stdout before the next write is tried.
                    out.flush().map_err(io_err)?;
                    left -= run.count();
                }
            }
        }
        Command::Peek { name, json } => {
            let state = match d.peek(&name).await {
                Err(Error::NoSuchSequence { .. }) if striped(&d, &name).await => {
                    for state in d.peek_striped(&name).await? {
                        if json {
                            writeln!(out, "{}", state.to_json()).map_err(io_err)?;
                        } else {
                            writeln!(out, "{}", describe(&state)).map_err(io_err)?;
                        }
                    }
                    out.flush().map_err(io_err)?;
                    return Ok(Outcome::Done);
                }
                other => other?,
            };
            let text = if json {
                state.to_json().to_string()
            } else {
                describe(&state)
            };
            writeln!(out, "{text}").map_err(io_err)?;
        }
        Command::List { json, scopes } => {
            let all = match &scopes {
                Some(template) => d.list_scopes(template).await?,
                None => d.list().await?,
            };
            let mut corrupt = None;
            let mut rows = Vec::new();
            for item in all {
                match item {
                    Ok(state) => rows.push(state),
                    Err(e) => {
                        eprintln!("dispenser: {e}");
                        corrupt = Some(e);
                    }
                }
            }
            if json {
                let arr: Vec<_> = rows.iter().map(SequenceState::to_json).collect();
                writeln!(out, "{}", serde_json::Value::Array(arr)).map_err(io_err)?;
            } else if rows.is_empty() && corrupt.is_none() {
                // On stderr, like `kubectl get`: stdout stays one line per sequence.
                let place = format!("{}.{}", d.options().database, d.options().collection);
                match &scopes {
                    Some(template) => eprintln!("dispenser: no scopes of {template:?} in {place}"),
                    None => eprintln!("dispenser: no sequences in {place}"),
                }
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
        Command::Reset { name, value, force } => {
            let states = match d.reset(&name, value, force).await {
                Err(Error::NoSuchSequence { .. }) if striped(&d, &name).await => {
                    d.reset_striped(&name, value, force).await?
                }
                other => vec![other?],
            };
            for state in states {
                writeln!(out, "{}", describe(&state)).map_err(io_err)?;
            }
        }
        Command::Delete {
            name,
            scopes_before: Some(before),
            tz,
        } => {
            let n = match tz {
                Some(zone) => {
                    d.open_daily(&name, &zone)?
                        .delete_scopes_before(&before)
                        .await?
                }
                None => d.delete_scopes_before(&name, &before).await?,
            };
            writeln!(out, "deleted {n} scope(s) of {name} before {before}").map_err(io_err)?;
        }
        Command::Delete { name, .. } => match d.delete(&name).await {
            Err(Error::NoSuchSequence { .. }) if striped(&d, &name).await => {
                let n = d.delete_striped(&name).await?;
                writeln!(out, "deleted {name} ({n} stripes)").map_err(io_err)?;
            }
            other => {
                other?;
                writeln!(out, "deleted {name}").map_err(io_err)?;
            }
        },
        Command::AdvanceTo { name, n } => {
            let states = match d.advance_to(&name, n).await {
                Err(Error::NoSuchSequence { .. }) if striped(&d, &name).await => {
                    d.advance_striped(&name, n).await?
                }
                other => vec![other?],
            };
            for state in states {
                writeln!(out, "{}", describe(&state)).map_err(io_err)?;
            }
        }
        Command::Alter {
            name,
            step,
            min,
            max,
            cycle,
            no_cycle,
            format,
            no_format,
            force,
        } => {
            let mut change = Alter::default().with_force(force);
            change.step = step;
            change.min = min;
            change.max = max;
            change.cycle = (cycle || no_cycle).then_some(cycle);
            if let Some(f) = format.as_deref() {
                change.format = Some(Some(Format::parse(f)?));
            } else if no_format {
                change.format = Some(None);
            }
            if striped(&d, &name).await {
                for state in d.alter_striped(&name, change).await? {
                    writeln!(out, "{}", describe(&state)).map_err(io_err)?;
                }
            } else {
                let state = d.alter(&name, change).await?;
                writeln!(out, "{}", describe(&state)).map_err(io_err)?;
            }
        }
        Command::Bench(_)
        | Command::Serve(_)
        | Command::Check(_)
        | Command::Audit(_)
        | Command::Doctor(_)
        | Command::Gapless(_)
        | Command::Queue(_) => {}
    }
    out.flush().map_err(io_err)?;
    Ok(Outcome::Done)
}

/// Whether `name` has no document of its own but is a striped sequence (`name~0` records
/// its stripes): the admin commands then act on every stripe.
async fn striped(d: &Dispenser, name: &str) -> bool {
    d.peek_striped(name).await.is_ok()
}

fn io_err(e: io::Error) -> Error {
    Error::InvalidArgument {
        what: "standard output".into(),
        reason: e.to_string(),
    }
}

/// Block options for a `next --block SIZE --count COUNT` run: a prefetched block never grows
/// past what the run can still use (`max(COUNT, SIZE)`), so a run that knows it needs three
/// numbers does not reserve thousands (what a killed run would lose).
fn run_blocks(size: u64, count: u64) -> BlockOptions {
    BlockOptions::default()
        .with_size(size)
        .with_grow_to(Some(count.max(size)))
}

/// What closing a block client did, for stderr; `None` when there is nothing to say (no
/// number given back, none lost).
fn close_line(what: &str, report: &dispenser::CloseReport) -> Option<String> {
    let mut parts = Vec::new();
    if report.given_back > 0 {
        parts.push(format!("{} unused number(s) given back", report.given_back));
    }
    if report.lost > 0 {
        parts.push(format!(
            "{} number(s) lost (a gap: reserved, never issued)",
            report.lost
        ));
    }
    (!parts.is_empty()).then(|| format!("dispenser: {what} closed: {}", parts.join(", ")))
}

fn describe(s: &SequenceState) -> String {
    let next = s
        .next_number()
        .map_or_else(|| "none (exhausted)".to_owned(), |n| n.to_string());
    format!(
        "{name}: value {value} next {next} remaining {rem} step {step} min {min} max {max} cycle {cycle} cycles {cycles}{format} updated_at {updated}; {usage}",
        name = one_line_name(&s.name),
        value = s.value,
        rem = s.remaining(),
        step = s.step,
        min = s.min,
        max = s.max,
        cycle = s.cycle,
        cycles = s.cycles,
        // The format (quoted: it may hold spaces); the write counter `version` is only in
        // --json, where tools that compare-and-set read it.
        format = s
            .format
            .as_ref()
            .map(|f| format!(" format {:?}", f.as_str()))
            .unwrap_or_default(),
        updated = s.updated_at.try_to_rfc3339_string().unwrap_or_default(),
        usage = check::usage_text(
            &s.usage(jiff::Timestamp::now()),
            s.cycle,
            check::DEFAULT_MIN_HISTORY
        ),
    )
}

/// A stored name as shown in line-oriented output: control characters (which no valid name
/// has, but another client may have written one) are escaped, so each sequence stays on its
/// own line.
fn one_line_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
