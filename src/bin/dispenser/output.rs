//! Writing answers to standard output: the answer a command prints (and what it had written
//! when the answer could not be printed), the error a failed write becomes, and names shown
//! one per line.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::Mutex;

use dispenser::Error;

/// A failed write to standard output, as the error the command fails with. `main` tells the
/// user what happened from the [`Answer`] it printed through, not from this error.
pub fn io_err(e: io::Error) -> Error {
    Error::InvalidArgument {
        what: "standard output".into(),
        reason: e.to_string(),
    }
}

/// How many lines of an answer that could not be printed are shown at each end.
const SHOWN: usize = 5;

/// A command's answer on its way to standard output: it remembers the first error of the
/// output and the lines given to it since the last flush that succeeded — what the user has
/// not seen. A command prints its lines only after the write they tell of was made, so
/// when the output fails, those lines name what was written.
pub struct Answer<W: Write> {
    inner: W,
    /// The line being written (a `writeln!` arrives in pieces).
    partial: Vec<u8>,
    /// The first lines since the last good flush, and the last ones (at most [`SHOWN`] each).
    head: Vec<String>,
    tail: VecDeque<String>,
    /// How many lines since the last good flush.
    lines: u64,
    /// Whether a flush ever succeeded with something in it.
    printed: bool,
    failed: Option<io::Error>,
}

impl<W: Write> Answer<W> {
    pub fn new(inner: W) -> Self {
        Answer {
            inner,
            partial: Vec::new(),
            head: Vec::new(),
            tail: VecDeque::new(),
            lines: 0,
            printed: false,
            failed: None,
        }
    }

    /// The first error standard output gave, if it failed.
    pub fn failure(&self) -> Option<&io::Error> {
        self.failed.as_ref()
    }

    /// Whether some of the answer reached standard output before.
    pub fn printed_some(&self) -> bool {
        self.printed
    }

    /// The lines not known to be printed, in one line: all of them when they are few, else
    /// the first and the last few and how many.
    pub fn unprinted(&self) -> String {
        let mut all: Vec<String> = self.head.clone();
        let partial = String::from_utf8_lossy(&self.partial).trim().to_owned();
        let lines = self.lines + u64::from(!partial.is_empty());
        if lines <= 2 * SHOWN as u64 {
            all.extend(self.tail.iter().cloned());
            if !partial.is_empty() {
                all.push(partial);
            }
            return all.join(", ");
        }
        let mut tail: Vec<String> = self.tail.iter().cloned().collect();
        if !partial.is_empty() {
            tail.remove(0);
            tail.push(partial);
        }
        format!("{} … {} ({lines} lines)", all.join(", "), tail.join(", "))
    }

    fn remember(&mut self, buf: &[u8]) {
        for &b in buf {
            if b != b'\n' {
                self.partial.push(b);
                continue;
            }
            let line = String::from_utf8_lossy(&self.partial).into_owned();
            self.partial.clear();
            self.lines += 1;
            if self.head.len() < SHOWN {
                self.head.push(line);
            } else {
                if self.tail.len() == SHOWN {
                    self.tail.pop_front();
                }
                self.tail.push_back(line);
            }
        }
    }

    /// Keeps the first error of the output (`e`), and returns one like it for the caller.
    fn fail(&mut self, e: io::Error) -> io::Error {
        let copy = io::Error::new(e.kind(), e.to_string());
        self.failed.get_or_insert(e);
        copy
    }
}

impl<W: Write> Write for Answer<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(e) = &self.failed {
            return Err(io::Error::new(e.kind(), e.to_string()));
        }
        match self.inner.write(buf) {
            Ok(n) => {
                self.remember(&buf[..n]);
                Ok(n)
            }
            Err(e) => {
                self.remember(buf);
                Err(self.fail(e))
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if let Some(e) = &self.failed {
            return Err(io::Error::new(e.kind(), e.to_string()));
        }
        match self.inner.flush() {
            Ok(()) => {
                if self.lines > 0 || !self.partial.is_empty() {
                    self.printed = true;
                }
                self.head.clear();
                self.tail.clear();
                self.lines = 0;
                untold().clear();
                Ok(())
            }
            Err(e) => Err(self.fail(e)),
        }
    }
}

/// What the command wrote whose answer is not printed yet (see [`wrote`]).
static UNTOLD: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn untold() -> std::sync::MutexGuard<'static, Vec<String>> {
    UNTOLD.lock().unwrap_or_else(|p| p.into_inner())
}

/// Notes that the command made the write `what` ("sequence \"orders\" created") before it
/// has its answer: when what comes after fails (reading the answer back), `main` says the
/// write was made. The next flush of the answer that succeeds forgets it. One command runs
/// per process, so the note is the process's.
pub fn wrote(what: impl Into<String>) {
    untold().push(what.into());
}

/// Says on stderr, one line each, the settings an `--if-not-exists` found changed since by an
/// alter: kept as stored, the asked value not applied (the handle's `altered()`).
pub fn kept(kind: dispenser::Kind, name: &str, altered: &[dispenser::sequence::Altered]) {
    for a in altered {
        eprintln!(
            "dispenser: {kind} {} exists with {a}: changed since by an alter; kept as it is",
            one_line_name(name)
        );
    }
}

/// The writes noted by [`wrote`] whose answer was not printed.
pub fn unprinted_writes() -> Vec<String> {
    untold().clone()
}

/// A stored name as shown in line-oriented output: control characters (which no valid name
/// has, but another client may have written one) are escaped, so each sequence stays on its
/// own line.
pub fn one_line_name(name: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that accepts writes and fails every flush (as `/dev/full` behind a buffer).
    struct Full;

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::from_raw_os_error(28))
        }
    }

    #[test]
    fn an_answer_that_cannot_be_printed_keeps_its_lines_and_its_error() {
        let mut a = Answer::new(Full);
        for n in 1..=5 {
            writeln!(a, "{n}").unwrap();
        }
        assert!(a.flush().is_err());
        assert_eq!(a.unprinted(), "1, 2, 3, 4, 5");
        assert_eq!(a.failure().map(io::Error::raw_os_error), Some(Some(28)));
        assert!(!a.printed_some());
        // Once failed, it fails every write.
        assert!(writeln!(a, "6").is_err());
    }

    #[test]
    fn a_long_answer_is_shown_by_its_ends_and_a_printed_one_is_forgotten() {
        let mut a = Answer::new(Vec::new());
        writeln!(a, "printed").unwrap();
        a.flush().unwrap();
        assert!(a.printed_some());
        for n in 1..=100 {
            write!(a, "{n}").unwrap();
            writeln!(a).unwrap();
        }
        assert_eq!(
            a.unprinted(),
            "1, 2, 3, 4, 5 … 96, 97, 98, 99, 100 (100 lines)"
        );
        write!(a, "101").unwrap();
        assert_eq!(
            a.unprinted(),
            "1, 2, 3, 4, 5 … 97, 98, 99, 100, 101 (101 lines)"
        );
    }
}
