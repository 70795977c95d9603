//! Drawing over HTTP, `POST /v1/sequences/{name}/next?count=N`: every kind of sequence the
//! CLI draws. A plain sequence (or a stripe, or a scope that exists) is drawn through its
//! block client; a scope `T@KEY` that does not exist yet is made from its template `T` first
//! (as `next --scope KEY` does); a striped sequence is drawn from its stripes, one stripe per
//! request in turn (the next stripe when one runs out). A scope template itself is refused.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dispenser::{Error, source::NumberSource};

use super::answers::{Drawn, Run};
use super::errors::ApiError;
use super::names::check_name;
use super::state::{AppState, Era, Shape, Shared, Slot, Target};
use super::tokens::{Op, TokenRule};

/// Counts up to this many are answered as a list of numbers drawn from the block client;
/// larger counts as contiguous runs reserved directly (`{first, last, step, count}`).
pub(super) const LIST_LIMIT: u64 = 1000;

/// Where the next striped draw starts (round robin over the stripes, as the library does).
static STRIPE_CURSOR: AtomicUsize = AtomicUsize::new(0);

/// Runs of consecutive numbers (`step` apart) as `{first, last, step, count}`.
pub(super) fn as_runs(numbers: &[i64], step: i64) -> Vec<Run> {
    let mut runs: Vec<(i64, i64, u64)> = Vec::new();
    for &n in numbers {
        match runs.last_mut() {
            Some((_, last, count)) if i128::from(*last) + i128::from(step) == i128::from(n) => {
                *last = n;
                *count += 1;
            }
            _ => runs.push((n, n, 1)),
        }
    }
    runs.into_iter()
        .map(|(first, last, count)| Run {
            first,
            last,
            step,
            count,
        })
        .collect()
}

/// The `count` of a draw's query: absent is 1; a whole number from 1 to `max`, given once;
/// no other parameter.
pub(super) fn parse_count(query: &[(String, String)], max: u64) -> Result<u64, ApiError> {
    if let Some((unknown, _)) = query.iter().find(|(k, _)| k != "count") {
        return Err(ApiError::invalid_input(format!(
            "unknown query parameter {unknown:?} (known: count)"
        )));
    }
    match query {
        [] => Ok(1),
        [(_, c)] => super::json::exact_integer(c)
            .and_then(|n| u64::try_from(n).ok())
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                ApiError::invalid_input(format!(
                    "count {c:?} must be a whole number from 1 to {max}"
                ))
            }),
        _ => Err(ApiError::invalid_input(format!(
            "count is given {} times: give it once",
            query.len()
        ))),
    }
}

/// What one request draws, as it will be answered (`'n`: the names of the documents drawn
/// from, held by the request).
struct Out<'n> {
    /// Whether the answer is a list of numbers (else runs).
    list: bool,
    numbers: Vec<i64>,
    runs: Vec<Run>,
    /// How many numbers came from each document, for the metrics.
    by_document: Vec<(&'n str, u64)>,
}

impl<'n> Out<'n> {
    fn drawn(&self) -> u64 {
        self.by_document.iter().map(|(_, n)| n).sum()
    }

    fn took(&mut self, name: &'n str, n: u64) {
        if n > 0 {
            self.by_document.push((name, n));
        }
    }
}

/// The answer `{"numbers":[…]}`, written as `serde_json` would write it, without building a
/// `serde_json::Value` first (this is the answer of almost every draw).
fn numbers_answer(numbers: &[i64]) -> Response {
    let mut body = String::with_capacity(14 + 21 * numbers.len());
    body.push_str("{\"numbers\":[");
    let mut digits = itoa::Buffer::new();
    for (i, &n) in numbers.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(digits.format(n));
    }
    body.push_str("]}");
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

#[utoipa::path(post, path = "/v1/sequences/{name}/next", operation_id = "next", tag = "draw",
    params(("name" = String, Path, description = "The sequence: a plain sequence, a scope `T@KEY` (made from its template `T` on first use), a stripe `S~i`, or a striped sequence `S` (drawn from its stripes in turn). A scope template itself is refused (409 `template`)."),
        ("count" = Option<u64>, Query, description = "How many numbers: a whole number from 1 to the service's `--max-count` (default 1); at most one cycle of a cyclic sequence (422 past it)")),
    responses((status = 200, description = "The numbers drawn: `{numbers}` for counts up to 1000, `{count, runs}` above", body = Drawn)))]
pub(super) async fn next(
    State(st): State<Shared>,
    Path(name): Path<String>,
    // The request itself (its body is empty), so that its headers are read where they are
    // (the `HeaderMap` extractor copies them) and its query only when it has one.
    req: axum::extract::Request,
) -> Result<Response, ApiError> {
    let rule = st.authorize(req.headers(), Op::Next, Some(&name))?;
    // The query is parsed only when there is one (most draws have none).
    let count = match req.uri().query() {
        None => 1,
        Some(_) => match Query::<Vec<(String, String)>>::try_from_uri(req.uri()) {
            Ok(Query(query)) => parse_count(&query, st.max_count)?,
            Err(rejection) => return Ok(rejection.into_response()),
        },
    };
    check_name(&name, false)?;
    // The stripes of a striped sequence, when it is one (declared before `out`, which
    // borrows their names).
    let stripes: Vec<String>;
    let mut out = Out {
        list: count <= LIST_LIMIT,
        numbers: Vec::new(),
        runs: Vec::new(),
        by_document: Vec::new(),
    };
    let slot = st.slot(&name);
    // Shared: an admin operation of the service waits for this draw, or this draw for it.
    let era = slot.era.read().await;
    // The rare paths (the era's first draw, which reads the database; a striped sequence; a
    // cyclic one; runs) are boxed, so that the future of the common draw stays small (axum
    // moves it into a box of its own for every request).
    let known = era.target.get().map(Ok);
    let resolved = match known {
        Some(known) => known,
        None => {
            Box::pin(st.target(&era, &name, |template, key, already| {
                may_make_scope(&rule, template, key, already, &name)?;
                st.acting(&rule)
            }))
            .await
        }
    };
    let target = match resolved {
        Ok(target) => target,
        Err(e) => {
            // Nothing is kept for a name that does not resolve.
            drop(era);
            st.forget_if_unused(&name, slot);
            return Err(e);
        }
    };
    let drawn = match target {
        Target::Plain(shape) => {
            if shape.template || era.scoped.load(Relaxed) {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "template",
                    format!(
                        "sequence {name:?} is a scope template (it has scopes, or its format uses {{scope}}): it is not drawn itself; draw one of its scopes, POST /v1/sequences/{name}@KEY/next"
                    ),
                ));
            }
            draw_document(&st, &slot, &era, &name, shape, count, &mut out).await
        }
        Target::Striped(names) => {
            stripes = names.clone();
            drop(era);
            Box::pin(draw_striped(&st, &stripes, count, &mut out)).await
        }
    };
    // Numbers drawn before a failure are a gap: never answered, not counted.
    drawn?;
    for (doc, n) in &out.by_document {
        if *doc == name {
            slot.issued(&st.metrics, &name, *n);
        } else {
            // A stripe of a striped sequence.
            st.metrics.issued(doc, *n);
        }
    }
    if out.list {
        return Ok(numbers_answer(&out.numbers));
    }
    Ok(Json(Drawn::Runs {
        count,
        runs: out.runs,
    })
    .into_response())
}

/// Whether `rule` may make the scope `name` (`template@key`) on its first draw.
///
/// A new scope is a new document, and it starts where its template stands (so making it
/// shows the template's counter and shape): it needs `create` on the scope and `peek` on the
/// template. One exception, so that daily numbering needs no administrator each morning:
/// today's scope of a template that is one already (it has scopes, or its format uses
/// `{scope}`) — a date key within a day of today's UTC date, today in some time zone — is
/// made by a draw with `next` alone, as `DailySequence` does. A draw never turns a sequence
/// into a template.
fn may_make_scope(
    rule: &TokenRule,
    template: &str,
    key: &str,
    already: bool,
    name: &str,
) -> Result<(), ApiError> {
    let refuse = |why: &str| {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "token {:?} may not make scope {name:?} on its first draw: {why}; ask for a token with these rights, or have the scope created",
                rule.name
            ),
        ))
    };
    if already && is_todays_date(key) {
        return Ok(());
    }
    if AppState::permit(rule, Op::Create, Some(name)).is_err() {
        return refuse("making a scope needs `create` on it");
    }
    if AppState::permit(rule, Op::Peek, Some(template)).is_err() {
        return refuse(&format!(
            "a scope starts where its template {template:?} stands, so making it needs `peek` on the template"
        ));
    }
    Ok(())
}

/// Whether `key` is a date (`YYYY-MM-DD`) that is today somewhere: within a day of today's
/// UTC date.
fn is_todays_date(key: &str) -> bool {
    let Ok(date) = key.parse::<jiff::civil::Date>() else {
        return false;
    };
    if date.to_string() != key {
        return false;
    }
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    // Between dates, `since` counts whole days.
    date.since(today)
        .is_ok_and(|span| span.get_days().abs() <= 1)
}

/// A striped sequence: `want` numbers from one stripe, the next stripe in turn when one runs
/// out (numbers of several stripes in one answer then).
async fn draw_striped<'n>(
    st: &AppState,
    stripes: &'n [String],
    want: u64,
    out: &mut Out<'n>,
) -> Result<(), ApiError> {
    let first = STRIPE_CURSOR.fetch_add(1, Relaxed);
    let mut exhausted = None;
    for k in 0..stripes.len() {
        let left = want - out.drawn();
        if left == 0 {
            break;
        }
        let name = &stripes[first.wrapping_add(k) % stripes.len()];
        let slot = st.slot(name);
        let era = slot.era.read().await;
        // A stripe is never a scope: nothing is made here.
        let Target::Plain(shape) = st
            .target(&era, name, |_, _, _| Ok(st.dispenser.clone()))
            .await?
        else {
            return Err(Error::NotFound {
                kind: dispenser::error::Kind::Sequence,
                name: name.clone(),
            }
            .into());
        };
        match draw_document(st, &slot, &era, name, shape, left, out).await {
            Err(e) if e.code == "exhausted" => exhausted = Some(e),
            other => other?,
        }
    }
    match exhausted {
        Some(e) if out.drawn() < want => Err(e),
        _ => Ok(()),
    }
}

/// `want` numbers from the sequence document `name` (under its era lock, held shared by the
/// caller), added to `out`. On an error, what was drawn stays in `out`.
async fn draw_document<'n>(
    st: &AppState,
    slot: &Slot,
    era: &Era,
    name: &'n str,
    shape: &Shape,
    want: u64,
    out: &mut Out<'n>,
) -> Result<(), ApiError> {
    // The cyclic and the runs paths are boxed: the common draw's future stays small.
    if let Some(cycle) = shape.cycle {
        return Box::pin(draw_cyclic(st, slot, era, name, shape, cycle, want, out)).await;
    }
    if out.list {
        slot.touch(st.now_ms());
        let blocks = st.blocks(era, name).await?;
        let mut taken = 0;
        let result = async {
            for _ in 0..want {
                let n = match blocks.next().await {
                    Err(Error::Closed { .. }) => {
                        // Closed by another way than the service's own (which clear what the
                        // era keeps): the pool's fresh client, for this draw.
                        Box::pin(async { st.pool.get(name).await?.next().await }).await?
                    }
                    other => other?,
                };
                out.numbers.push(n);
                taken += 1;
            }
            Ok::<(), Error>(())
        }
        .await;
        out.took(name, taken);
        return result.map_err(ApiError::from);
    }
    Box::pin(draw_runs(st, era, name, want, out)).await
}

/// [`draw_document`] of a cyclic sequence: one request at a time, nothing repeated within an
/// answer.
#[allow(clippy::too_many_arguments)]
async fn draw_cyclic<'n>(
    st: &AppState,
    slot: &Slot,
    era: &Era,
    name: &'n str,
    shape: &Shape,
    cycle: u64,
    want: u64,
    out: &mut Out<'n>,
) -> Result<(), ApiError> {
    if want > cycle {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!(
                "count {want} is more than one cycle of sequence {name:?} holds: ask for at most {cycle}"
            ),
        ));
    }
    slot.touch(st.now_ms());
    let kept = st.blocks(era, name).await?;
    // Closed by another way than the service's own (which clear what the era keeps): the
    // pool's fresh client, for this draw.
    let blocks = if kept.is_closed() {
        std::borrow::Cow::Owned(st.pool.get(name).await?)
    } else {
        std::borrow::Cow::Borrowed(kept)
    };
    // One request of a cyclic sequence at a time, so that the numbers of one answer
    // follow each other in the block client (and so repeat nothing within a cycle).
    let _serial = slot.serial.lock().await;
    let mut numbers = Vec::new();
    let mut seen = HashSet::new();
    for _ in 0..want {
        let n = blocks.next().await?;
        if !seen.insert(n) {
            // Other clients of the sequence drew a whole cycle while this request drew.
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "contention",
                format!(
                    "other clients drew a whole cycle of sequence {name:?} during this request, so {n} came round again; the numbers drawn are a gap; try again"
                ),
            ));
        }
        numbers.push(n);
    }
    out.took(name, want);
    if out.list {
        out.numbers.extend(numbers);
    } else {
        out.runs.extend(as_runs(&numbers, shape.step));
    }
    Ok(())
}

/// [`draw_document`] of a large count: contiguous runs reserved directly.
async fn draw_runs<'n>(
    st: &AppState,
    era: &Era,
    name: &'n str,
    want: u64,
    out: &mut Out<'n>,
) -> Result<(), ApiError> {
    let seq = era
        .direct
        .get_or_try_init(|| st.dispenser.open(name))
        .await?;
    let mut left = want;
    while left > 0 {
        let run = match NumberSource::next_n(seq, left).await {
            Ok(run) => run,
            Err(e) => {
                out.took(name, want - left);
                return Err(e.into());
            }
        };
        out.runs.push(Run {
            first: run.first(),
            last: run.last(),
            step: run.step(),
            count: run.count(),
        });
        left = left.saturating_sub(run.count());
    }
    out.took(name, want);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer written by hand is the one `serde_json` writes, for every sign and size.
    #[test]
    fn the_numbers_answer_is_what_serde_json_writes() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut lists: Vec<Vec<i64>> = vec![
            vec![],
            vec![0],
            vec![i64::MIN, -1, 1, i64::MAX],
            vec![9, 10, 99, 100, -9, -10],
        ];
        for len in 1..40 {
            lists.push(
                (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // Every magnitude: shift a random word by a random amount.
                        (x as i64) >> (x % 64)
                    })
                    .collect(),
            );
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        for numbers in lists {
            let resp = numbers_answer(&numbers);
            assert_eq!(
                resp.headers()[header::CONTENT_TYPE],
                "application/json",
                "{numbers:?}"
            );
            let body = rt
                .block_on(axum::body::to_bytes(resp.into_body(), usize::MAX))
                .expect("body");
            let expected = serde_json::to_string(&Drawn::List { numbers }).expect("json");
            assert_eq!(std::str::from_utf8(&body).expect("utf-8"), expected);
        }
    }
}
