//! Who may do what: the tokens file, bearer tokens compared in constant time, permissions
//! by sequence name (globs) and operation.

use std::collections::HashSet;
use std::path::PathBuf;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use dispenser::Error;
use serde::Deserialize;
use subtle::ConstantTimeEq;
use wildmatch::WildMatch;

use super::errors::ApiError;
use super::state::AppState;

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
    /// Take a ticket of a queue.
    Take,
    /// Call the next ticket of a queue.
    Call,
}

impl Op {
    pub(super) fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "next" => Op::Next,
            "create" => Op::Create,
            "peek" => Op::Peek,
            "list" => Op::List,
            "advance" => Op::Advance,
            "reset" => Op::Reset,
            "delete" => Op::Delete,
            "alter" => Op::Alter,
            "void" => Op::Void,
            "take" => Op::Take,
            "call" => Op::Call,
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
    pub(super) sequences: Vec<String>,
    pub(super) operations: Vec<String>,
}

pub(super) struct TokenRule {
    pub(super) name: String,
    pub(super) token: PaddedToken,
    /// The token itself, only to scrub it from error messages.
    pub(super) secret: String,
    pub(super) sequences: Vec<WildMatch>,
    pub(super) operations: HashSet<Op>,
}

impl TokenRule {
    pub(super) fn allows_name(&self, name: &str) -> bool {
        self.sequences.iter().any(|g| g.matches(name))
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

    /// Constant-time equality (contents and length).
    pub(super) fn matches(&self, other: &PaddedToken) -> bool {
        bool::from(self.bytes.ct_eq(&other.bytes) & self.len.ct_eq(&other.len))
    }
}

/// The token of an `Authorization` header value: the scheme `Bearer` (any case), whitespace,
/// the token.
pub(super) fn bearer_token(value: &HeaderValue) -> Option<&str> {
    let value = value.to_str().ok()?.trim();
    let (scheme, rest) = value.split_once([' ', '\t'])?;
    let token = rest.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
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
            "not a valid tokens document (line {}, column {}): expected {{\"tokens\": [{{\"name\", \"token\", \"sequences\", \"operations\"}}]}}",
            e.line(),
            e.column()
        ))
    })?;
    if file.tokens.is_empty() {
        return Err(config_error("no tokens configured".into()));
    }
    let mut rules = Vec::new();
    let mut seen = HashSet::new();
    for t in file.tokens {
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
        if t.sequences.is_empty() || t.sequences.iter().any(String::is_empty) {
            return Err(config_error(format!(
                "token {:?} needs non-empty sequence patterns",
                t.name
            )));
        }
        let mut operations = HashSet::new();
        for o in &t.operations {
            operations.insert(Op::parse(o).ok_or_else(|| {
                config_error(format!(
                    "token {:?} has an unknown operation {o:?} (known: next, create, peek, list, advance, reset, delete, alter, void, take, call)",
                    t.name
                ))
            })?);
        }
        rules.push(TokenRule {
            name: t.name,
            token: PaddedToken::new(t.token.as_bytes()),
            secret: t.token,
            sequences: t.sequences.iter().map(|p| WildMatch::new(p)).collect(),
            operations,
        });
    }
    Ok(rules)
}

pub(super) fn load_tokens(path: Option<&PathBuf>) -> Result<Vec<TokenRule>, Error> {
    let text = match path {
        Some(p) => std::fs::read_to_string(p).map_err(|e| Error::InvalidArgument {
            what: "--tokens".into(),
            reason: format!("cannot read {}: {e}", p.display()),
        })?,
        None => std::env::var("DISPENSER_TOKENS").map_err(|_| Error::InvalidArgument {
            what: "tokens".into(),
            reason: "no tokens configured: pass --tokens FILE or set DISPENSER_TOKENS (JSON)"
                .into(),
        })?,
    };
    parse_tokens(&text)
}

impl AppState {
    /// The token of the request (401 when missing, malformed or unknown).
    pub(super) fn authenticate(&self, headers: &HeaderMap) -> Result<&TokenRule, ApiError> {
        let unauthorized = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", m);
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("missing Authorization: Bearer <token>"))?;
        let presented = bearer_token(value).ok_or_else(|| {
            unauthorized("malformed Authorization header: expected Bearer <token>")
        })?;
        let presented = PaddedToken::new(presented.as_bytes());
        // Compare against every token, without stopping early.
        let mut found = None;
        for rule in &self.tokens {
            if rule.token.matches(&presented) {
                found = Some(rule);
            }
        }
        found.ok_or_else(|| unauthorized("unknown token"))
    }

    /// Whether `rule` may do `op` (on `name`, when given): 403 if not.
    pub(super) fn permit(rule: &TokenRule, op: Op, name: Option<&str>) -> Result<(), ApiError> {
        AppState::permit_on(rule, op, name, "sequence")
    }

    /// [`AppState::permit`] on the name of a `noun` (a sequence, a queue), named so in the
    /// message.
    pub(super) fn permit_on(
        rule: &TokenRule,
        op: Op,
        name: Option<&str>,
        noun: &str,
    ) -> Result<(), ApiError> {
        if !rule.operations.contains(&op) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("token {:?} may not {op:?}", rule.name).to_lowercase(),
            ));
        }
        if let Some(n) = name
            && !rule.allows_name(n)
        {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("token {:?} may not use {noun} {n:?}", rule.name),
            ));
        }
        Ok(())
    }

    /// The token of the request, if it may do `op` (on `name`, when given).
    pub(super) fn authorize(
        &self,
        headers: &HeaderMap,
        op: Op,
        name: Option<&str>,
    ) -> Result<&TokenRule, ApiError> {
        self.authorize_on(headers, op, name, "sequence")
    }

    /// [`AppState::authorize`] on the name of a `noun` (a sequence, a queue).
    pub(super) fn authorize_on(
        &self,
        headers: &HeaderMap,
        op: Op,
        name: Option<&str>,
        noun: &str,
    ) -> Result<&TokenRule, ApiError> {
        let rule = self.authenticate(headers)?;
        AppState::permit_on(rule, op, name, noun)?;
        Ok(rule)
    }
}
