//! The tokens of the service: the tokens file (or DISPENSER_TOKENS), each token's allowed
//! sequence names (globs) and operations, and tokens held padded for comparisons in constant
//! time; the table in use, which a reload of the file replaces ([`Tokens`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use tokio::sync::watch;

use dispenser::Error;
use serde::Deserialize;
use subtle::ConstantTimeEq;
use wildmatch::WildMatch;

/// The shortest token accepted.
pub(super) const MIN_TOKEN_LEN: usize = 16;
/// The longest token accepted: every comparison covers this many bytes, whatever the lengths.
pub(super) const MAX_TOKEN_LEN: usize = 256;

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Op {
    Next,
    Create,
    Peek,
    List,
    Advance,
    Reset,
    Delete,
    Alter,
    /// Void the next number of a gap-free sequence.
    Void,
    /// End a gap-free holder's lease (release).
    Release,
    /// Read a history.
    History,
    /// Take a ticket of a queue.
    Take,
    /// Call the next ticket of a queue.
    Call,
    /// Move a sequence past what another numbering issued, read from the database
    /// (`POST /v1/sequences/{name}/adopt`).
    Adopt,
}

/// The operations a token may be given, as the tokens file names them: each the verb of the
/// act it allows.
pub(super) const OPERATIONS: &str = "next, create, peek, list, advance-to, reset, delete, alter, void, release, history, take, call";

/// The operations that once allowed another act too, for one release: a token given the
/// first and not the second may still do what the second allows, and its first such act
/// warns (`void` allowed `release`, `peek` allowed `history`). Only on use: a token that never
/// does the act is never told to take a right it does not need.
const IMPLIED: [(&str, Op, &str); 2] = [
    ("void", Op::Release, "release"),
    ("peek", Op::History, "history"),
];

impl Op {
    pub(super) fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "next" => Op::Next,
            "create" => Op::Create,
            "peek" => Op::Peek,
            "list" => Op::List,
            "advance-to" => Op::Advance,
            "reset" => Op::Reset,
            "delete" => Op::Delete,
            "alter" => Op::Alter,
            "void" => Op::Void,
            "release" => Op::Release,
            "history" => Op::History,
            "take" => Op::Take,
            "call" => Op::Call,
            "adopt" => Op::Adopt,
            _ => return None,
        })
    }
}

/// The tokens file (or `DISPENSER_TOKENS`): `{"tokens": [{"name", "token", "sequences",
/// "operations"}]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TokenFile {
    pub(super) tokens: Vec<TokenEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TokenEntry {
    pub(super) name: String,
    pub(super) token: String,
    /// The name globs (a ticket link has none: its queue is its one name).
    #[serde(default)]
    pub(super) sequences: Option<Vec<String>>,
    /// The operations (a ticket link has none: it takes and follows).
    #[serde(default)]
    pub(super) operations: Option<Vec<String>>,
    /// A ticket link's queue and limits: the token of the link people open on their phones.
    #[serde(default)]
    pub(super) ticket_link: Option<LinkEntry>,
}

/// `"ticket_link": {"queue", "takes_per_phone", "takes_per_address", "per_seconds",
/// "reads_per_minute_per_address"}` in a token's entry.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LinkEntry {
    pub(super) queue: String,
    #[serde(default)]
    pub(super) takes_per_phone: Option<u64>,
    #[serde(default)]
    pub(super) takes_per_address: Option<u64>,
    #[serde(default)]
    pub(super) per_seconds: Option<u64>,
    #[serde(default)]
    pub(super) reads_per_minute_per_address: Option<u64>,
}

/// The default of a ticket link's `takes_per_phone`.
pub(super) const TAKES_PER_PHONE: u64 = 3;
/// The default of a ticket link's `takes_per_address`.
pub(super) const TAKES_PER_ADDRESS: u64 = 60;
/// The default of a ticket link's `per_seconds`.
pub(super) const LIMIT_WINDOW_S: u64 = 3600;
/// The default of a ticket link's `reads_per_minute_per_address`: a phone's page reads its
/// ticket every few seconds when it cannot stream, so a room of phones behind one address
/// (a venue's Wi-Fi) stays well under it.
pub(super) const READS_PER_MINUTE_PER_ADDRESS: u64 = 1200;

/// A ticket link: the token of a link (or QR code) that people open on their own phones. It
/// may only take tickets of its one queue — one at a time, each with a request id that names
/// the phone — follow them and give its own up, and each phone and each address may take only
/// so many in a window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Link {
    /// The queue.
    pub(super) queue: String,
    /// Takes one phone may make per window.
    pub(super) per_phone: u64,
    /// Takes one address may make per window.
    pub(super) per_address: u64,
    /// The window.
    pub(super) window: std::time::Duration,
    /// Reads (a ticket's view, the link itself) one address may make per minute.
    pub(super) reads_per_address: u64,
}

pub(super) struct TokenRule {
    pub(super) name: String,
    pub(super) token: PaddedToken,
    /// The token itself, only to scrub it from error messages.
    pub(super) secret: String,
    pub(super) sequences: Vec<Glob>,
    pub(super) operations: Ops,
    /// The sequence patterns as written: for the library's listings by pattern, and a reload
    /// keeps a token whose entry is unchanged.
    pub(super) patterns: Vec<String>,
    /// Raised when a reload removes or changes the token: its event streams end.
    revoked: watch::Sender<bool>,
    /// Set for a ticket link (its queue is then its one name, `take` its one operation).
    pub(super) link: Option<Link>,
    /// The operations it has only through an old name (`IMPLIED`), each warned of once.
    implied: Ops,
    /// The implied operations already warned of (a bit per `Op`).
    warned: std::sync::atomic::AtomicU16,
}

impl TokenRule {
    pub(super) fn allows_name(&self, name: &str) -> bool {
        self.sequences.iter().any(|g| g.matches(name))
    }

    /// Whether every name starting with `prefix` is one of this token's: one of its patterns
    /// is `*` or `P*` with `P` a start of `prefix` (a pattern with wildcards inside is not
    /// taken to cover a set of names, even when it would).
    pub(super) fn allows_every_name_from(&self, prefix: &str) -> bool {
        self.sequences.iter().any(|g| match g {
            Glob::Any => true,
            Glob::Prefix(p) => prefix.starts_with(p.as_str()),
            Glob::Exact(_) | Glob::Pattern(_) => false,
        })
    }

    /// The name patterns, as the library's `…_matching` listings take them.
    pub(super) fn patterns(&self) -> Vec<&str> {
        self.patterns.iter().map(String::as_str).collect()
    }

    /// Becomes `true` when a reload removes or changes this token.
    pub(super) fn revoked(&self) -> watch::Receiver<bool> {
        self.revoked.subscribe()
    }

    /// The warning the first time the token does `op` through an old name only (`void` for a
    /// release, `peek` for a history read), else `None`.
    pub(super) fn warn_implied(&self, op: Op) -> Option<String> {
        use std::sync::atomic::Ordering;
        if !self.implied.contains(op) {
            return None;
        }
        let bit = 1 << op as u16;
        if self.warned.fetch_or(bit, Ordering::Relaxed) & bit != 0 {
            return None;
        }
        let (old, _, new) = IMPLIED.into_iter().find(|(_, o, _)| *o == op)?;
        Some(format!(
            "token {:?}: operation {old:?} allowed {new} for this release only; add {new:?} to its operations (from the next release {old:?} allows {old} alone)",
            self.name
        ))
    }

    /// The same entry: name, token, sequence patterns and operations.
    fn same_entry(&self, other: &TokenRule) -> bool {
        self.name == other.name
            && self.secret == other.secret
            && self.patterns == other.patterns
            && self.operations == other.operations
            && self.link == other.link
    }
}

/// The tokens in use: replaced as a whole by a reload of the tokens file (SIGHUP).
pub(super) struct Tokens {
    rules: RwLock<Arc<Vec<Arc<TokenRule>>>>,
}

/// What a reload changed, by token name.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Replaced {
    /// Unchanged: their streams go on.
    pub(super) kept: Vec<String>,
    /// New, or changed (a new token, sequences or operations under the name).
    pub(super) added: Vec<String>,
    /// Gone, or changed: their requests are refused from now on, their streams end.
    pub(super) removed: Vec<String>,
}

impl Tokens {
    pub(super) fn new(rules: Vec<TokenRule>) -> Tokens {
        Tokens {
            rules: RwLock::new(Arc::new(rules.into_iter().map(Arc::new).collect())),
        }
    }

    /// The tokens in use now.
    pub(super) fn current(&self) -> Arc<Vec<Arc<TokenRule>>> {
        Arc::clone(&self.rules.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The token `presented` is, compared in constant time against every token (without
    /// stopping early).
    pub(super) fn find(&self, presented: &PaddedToken) -> Option<Arc<TokenRule>> {
        let rules = self.rules.read().unwrap_or_else(PoisonError::into_inner);
        let mut found = None;
        for rule in rules.iter() {
            if rule.token.matches(presented) {
                found = Some(rule);
            }
        }
        found.map(Arc::clone)
    }

    /// Puts `rules` in use: a token whose entry is unchanged stays the same token (its
    /// streams go on); every other token in use is revoked.
    pub(super) fn replace(&self, rules: Vec<TokenRule>) -> Replaced {
        let mut table = self.rules.write().unwrap_or_else(PoisonError::into_inner);
        let mut replaced = Replaced::default();
        let mut next = Vec::with_capacity(rules.len());
        for rule in rules {
            match table.iter().find(|old| old.same_entry(&rule)) {
                Some(old) => {
                    replaced.kept.push(rule.name.clone());
                    next.push(Arc::clone(old));
                }
                None => {
                    replaced.added.push(rule.name.clone());
                    next.push(Arc::new(rule));
                }
            }
        }
        for old in table.iter() {
            if !next.iter().any(|n| Arc::ptr_eq(n, old)) {
                replaced.removed.push(old.name.clone());
                old.revoked.send_replace(true);
            }
        }
        *table = Arc::new(next);
        replaced
    }
}

/// A set of operations (one bit each): asked on every request, so no hashing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Ops(u16);

impl Ops {
    pub(super) fn insert(&mut self, op: Op) {
        self.0 |= 1 << op as u16;
    }

    pub(super) fn contains(self, op: Op) -> bool {
        self.0 & (1 << op as u16) != 0
    }
}

/// A pattern of sequence names (`*` any run of characters, `?` one character), with the
/// common shapes — `*`, a name without wildcards, `prefix*` — matched without the general
/// matcher, since a pattern is matched on every request.
#[derive(Debug)]
pub(super) enum Glob {
    Any,
    Exact(String),
    Prefix(String),
    Pattern(WildMatch),
}

impl Glob {
    pub(super) fn new(pattern: &str) -> Glob {
        let wild = |c: char| c == '*' || c == '?';
        match pattern.find(wild) {
            None => Glob::Exact(pattern.to_owned()),
            Some(at) if at + 1 == pattern.len() && pattern.ends_with('*') => {
                if at == 0 {
                    Glob::Any
                } else {
                    Glob::Prefix(pattern[..at].to_owned())
                }
            }
            Some(_) => Glob::Pattern(WildMatch::new(pattern)),
        }
    }

    pub(super) fn matches(&self, name: &str) -> bool {
        match self {
            Glob::Any => true,
            Glob::Exact(n) => n == name,
            Glob::Prefix(p) => name.starts_with(p.as_str()),
            Glob::Pattern(w) => w.matches(name),
        }
    }
}

/// A token as compared: zero-padded to [`MAX_TOKEN_LEN`] bytes, with its length beside it, so
/// that a comparison takes the same time whatever the lengths of the two tokens.
pub(super) struct PaddedToken {
    pub(super) bytes: [u8; MAX_TOKEN_LEN],
    pub(super) len: u64,
}

impl PaddedToken {
    /// `token` padded; a token longer than [`MAX_TOKEN_LEN`] keeps its real length, so it
    /// equals no configured token.
    pub(super) fn new(token: &[u8]) -> Self {
        let mut bytes = [0; MAX_TOKEN_LEN];
        let n = token.len().min(MAX_TOKEN_LEN);
        bytes[..n].copy_from_slice(&token[..n]);
        PaddedToken {
            bytes,
            len: token.len() as u64,
        }
    }

    /// Constant-time equality (contents and length): the differences of all the bytes, eight
    /// at a time, are gathered with OR into one word, without a branch, and that word (and
    /// the lengths) compared with `subtle`. (`subtle` over the 256 bytes one by one costs a
    /// fence per byte, twice per request.)
    pub(super) fn matches(&self, other: &PaddedToken) -> bool {
        let mut diff = 0_u64;
        for (a, b) in self.bytes.chunks_exact(8).zip(other.bytes.chunks_exact(8)) {
            let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().unwrap_or([0xff; 8]));
            diff |= word(a) ^ word(b);
        }
        bool::from(diff.ct_eq(&0) & self.len.ct_eq(&other.len))
    }
}

/// Checks a ticket link's entry: a queue name, and limits within their ranges (defaults
/// [`TAKES_PER_PHONE`] and [`TAKES_PER_ADDRESS`] per [`LIMIT_WINDOW_S`]).
fn check_link(token: &str, l: LinkEntry) -> Result<Link, Error> {
    dispenser::sequence::validate_name(&l.queue).map_err(|e| {
        config_error(format!(
            "token {token:?}: ticket_link.queue {:?} is not a queue name ({e})",
            l.queue
        ))
    })?;
    let within = |field: &str, v: Option<u64>, default: u64, max: u64| match v {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(config_error(format!(
            "token {token:?}: ticket_link.{field} {n} must be from 1 to {max}"
        ))),
    };
    let per_phone = within(
        "takes_per_phone",
        l.takes_per_phone,
        TAKES_PER_PHONE,
        10_000,
    )?;
    let per_address = within(
        "takes_per_address",
        l.takes_per_address,
        TAKES_PER_ADDRESS,
        1_000_000,
    )?;
    let window = within("per_seconds", l.per_seconds, LIMIT_WINDOW_S, 86_400)?;
    let reads_per_address = within(
        "reads_per_minute_per_address",
        l.reads_per_minute_per_address,
        READS_PER_MINUTE_PER_ADDRESS,
        1_000_000,
    )?;
    Ok(Link {
        queue: l.queue,
        per_phone,
        per_address,
        window: std::time::Duration::from_secs(window),
        reads_per_address,
    })
}

pub(super) fn config_error(reason: String) -> Error {
    Error::InvalidArgument {
        what: "tokens".into(),
        reason,
    }
}

/// Parses and checks the token configuration. Messages name tokens by their `name`, never
/// by their value.
pub(super) fn parse_tokens(text: &str) -> Result<Vec<TokenRule>, Error> {
    let file: TokenFile = serde_json::from_str(text).map_err(|e| {
        // serde's message may quote a value: keep only where it failed.
        config_error(format!(
            "not a valid tokens document (line {}, column {}): expected {{\"tokens\": [{{\"name\", \"token\", \"sequences\", \"operations\"}}]}} (or, for a ticket link, {{\"name\", \"token\", \"ticket_link\": {{\"queue\"}}}})",
            e.line(),
            e.column()
        ))
    })?;
    if file.tokens.is_empty() {
        return Err(config_error("no tokens configured".into()));
    }
    let mut rules = Vec::new();
    let mut seen = HashSet::new();
    let mut names = HashSet::new();
    for t in file.tokens {
        // The name is who acts: the scope of a queue take's request ids and the name the
        // history of admin operations records, so it is printable and names one token.
        if !(1..=dispenser::sequence::MAX_CALLER).contains(&t.name.len())
            || !t.name.bytes().all(|b| (0x20..=0x7e).contains(&b))
        {
            return Err(config_error(format!(
                "token name {:?} must be 1 to {} printable ASCII characters (it is who acts: the scope of request ids and the name the history records)",
                t.name,
                dispenser::sequence::MAX_CALLER
            )));
        }
        if !names.insert(t.name.clone()) {
            return Err(config_error(format!(
                "token name {:?} names two tokens; give each token its own name",
                t.name
            )));
        }
        if t.token.len() < MIN_TOKEN_LEN {
            return Err(config_error(format!(
                "token {:?} is shorter than {MIN_TOKEN_LEN} characters",
                t.name
            )));
        }
        if t.token.len() > MAX_TOKEN_LEN {
            return Err(config_error(format!(
                "token {:?} is longer than {MAX_TOKEN_LEN} bytes",
                t.name
            )));
        }
        if !seen.insert(t.token.clone()) {
            return Err(config_error(format!(
                "token {:?} repeats another token",
                t.name
            )));
        }
        let (sequences, operations, link) = match (t.sequences, t.operations, t.ticket_link) {
            (None, None, Some(l)) => {
                let link = check_link(&t.name, l)?;
                (vec![link.queue.clone()], Vec::new(), Some(link))
            }
            (_, _, Some(_)) => {
                return Err(config_error(format!(
                    "token {:?} is a ticket link: it takes and follows tickets of its one queue only; leave out \"sequences\" and \"operations\" (or give them, without \"ticket_link\", for a token of another kind)",
                    t.name
                )));
            }
            (Some(s), Some(o), None) => (s, o, None),
            (_, _, None) => {
                return Err(config_error(format!(
                    "token {:?} needs \"sequences\" (name globs) and \"operations\", or a \"ticket_link\"",
                    t.name
                )));
            }
        };
        if sequences.is_empty() || sequences.iter().any(String::is_empty) {
            return Err(config_error(format!(
                "token {:?} needs non-empty sequence patterns",
                t.name
            )));
        }
        let mut ops = Ops::default();
        if link.is_some() {
            ops.insert(Op::Take);
        }
        for o in &operations {
            ops.insert(Op::parse(o).ok_or_else(|| {
                config_error(format!(
                    "token {:?} has an unknown operation {o:?} (known: {OPERATIONS}){}",
                    t.name,
                    if o == "advance" {
                        "; `advance` is now spelled `advance-to`, as on the command line"
                    } else {
                        ""
                    }
                ))
            })?);
        }
        let mut implied = Ops::default();
        for (old, op, _) in IMPLIED {
            if operations.iter().any(|o| o == old) && !ops.contains(op) {
                ops.insert(op);
                implied.insert(op);
            }
        }
        let (globs, patterns) = match &link {
            // The queue's name as it is (a `*` in it is a character, not a glob); a link lists
            // nothing, so it has no patterns to list by.
            Some(l) => (vec![Glob::Exact(l.queue.clone())], Vec::new()),
            None => (sequences.iter().map(|p| Glob::new(p)).collect(), sequences),
        };
        rules.push(TokenRule {
            name: t.name,
            token: PaddedToken::new(t.token.as_bytes()),
            secret: t.token,
            sequences: globs,
            patterns,
            operations: ops,
            revoked: watch::Sender::new(false),
            link,
            implied,
            warned: Default::default(),
        });
    }
    Ok(rules)
}

/// A warning when the file `path` (`what`: its role, naming the flag) can be read or changed
/// by users other than its owner (any of the mode bits 077, as ssh checks a private key): its
/// secrets are open to every account on the machine. `None` when it is private, or cannot be
/// looked at (reading it then fails with its own error).
pub(super) fn open_to_others(what: &str, path: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then(|| {
            format!(
                "{what} {} can be read or changed by other users of this machine (mode {mode:04o}); make it private: chmod 600 {}",
                path.display(),
                path.display()
            )
        })
    }
    #[cfg(not(unix))]
    {
        let _ = (what, path);
        None
    }
}

/// The warnings about the tokens file (`--tokens`), if one was given.
pub(super) fn tokens_warnings(path: Option<&PathBuf>) -> Vec<String> {
    path.and_then(|p| open_to_others("the tokens file (--tokens)", p))
        .into_iter()
        .collect()
}

/// The tokens of the file at `path`.
pub(super) fn load_tokens(path: &Path) -> Result<Vec<TokenRule>, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::InvalidArgument {
        what: "tokens_file".into(),
        reason: format!("cannot read {}: {e}", path.display()),
    })?;
    parse_tokens(&text)
}
