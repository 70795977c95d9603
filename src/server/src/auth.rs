//! Who may do what: the request's bearer token checked against the configured tokens (in
//! constant time, against every token), then its permissions by name and operation.

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};

use super::errors::ApiError;
use super::state::AppState;
use super::tokens::{Op, PaddedToken, TokenRule};

/// The token of an `Authorization` header value: the scheme `Bearer` (any case), whitespace,
/// the token.
pub(super) fn bearer_token(value: &HeaderValue) -> Option<&str> {
    // On the bytes (read on every request): visible ASCII, spaces and tabs only, as
    // `HeaderValue::to_str` asks, so trimming ASCII whitespace is trimming all of it. The
    // check folds every byte without stopping early, which the compiler turns into a few
    // vector instructions for a token's length (an early stop keeps it a byte-by-byte loop).
    let bytes = value.as_bytes();
    let text = bytes.iter().fold(true, |ok, &b| {
        ok & (b == b'\t' || (0x20..0x7f).contains(&b))
    });
    if !text {
        return None;
    }
    let bytes = bytes.trim_ascii();
    let at = bytes.iter().position(|&b| b == b' ' || b == b'\t')?;
    let (scheme, token) = (&bytes[..at], bytes[at + 1..].trim_ascii());
    if !scheme.eq_ignore_ascii_case(b"bearer") || token.is_empty() {
        return None;
    }
    std::str::from_utf8(token).ok()
}

impl AppState {
    /// The token of the request (401 when missing, malformed or unknown).
    pub(super) fn authenticate(&self, headers: &HeaderMap) -> Result<Arc<TokenRule>, ApiError> {
        let unauthorized = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", m);
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("missing Authorization: Bearer <token>"))?;
        let presented = bearer_token(value).ok_or_else(|| {
            unauthorized("malformed Authorization header: expected Bearer <token>")
        })?;
        let presented = PaddedToken::new(presented.as_bytes());
        // Compared against every token, without stopping early.
        self.tokens
            .find(&presented)
            .ok_or_else(|| unauthorized("unknown token"))
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
        if !rule.operations.contains(op) {
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
        if let Some(warning) = rule.warn_implied(op) {
            tracing::warn!("{warning}");
        }
        Ok(())
    }

    /// The token of the request, if it may do `op` (on `name`, when given).
    pub(super) fn authorize(
        &self,
        headers: &HeaderMap,
        op: Op,
        name: Option<&str>,
    ) -> Result<Arc<TokenRule>, ApiError> {
        self.authorize_on(headers, op, name, "sequence")
    }

    /// [`AppState::authorize`] on the name of a `noun` (a sequence, a queue).
    pub(super) fn authorize_on(
        &self,
        headers: &HeaderMap,
        op: Op,
        name: Option<&str>,
        noun: &str,
    ) -> Result<Arc<TokenRule>, ApiError> {
        let rule = self.authenticate(headers)?;
        AppState::permit_on(&rule, op, name, noun)?;
        Ok(rule)
    }
}
