//! The admin endpoints (create, peek, list, advance, reset, alter, delete) and healthz; drawing
//! is in `draw.rs`.

use axum::Json;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use dispenser::sequence::SequenceState;
use dispenser::stripe::{StripedSequence, stripe_name};
use dispenser::{Dispenser, Error, Format, Spec};
use serde::{Deserialize, Serialize};
use std::future::IntoFuture;
use utoipa::ToSchema;

use super::answers::{
    Created, Health, HourCount, Hourly, ListEntry, Sequence, SequenceList, StateAnswer, Unreadable,
    of_library,
};
use super::errors::ApiError;
use super::json::{json_body, whole, whole_or_null};
use super::make::{Making, create_or_ensure};
use super::names::check_name;
use super::state::{AppState, Shared, scope_of};
use super::tokens::{Op, TokenRule};

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateBody {
    /// The new sequence's name (no `@` or `~`: scopes and stripes are made by the service).
    pub(super) name: String,
    /// The first number (default 1).
    #[serde(default, deserialize_with = "whole_or_null")]
    pub(super) start: Option<i64>,
    /// The step between numbers, not 0 (default 1).
    #[serde(default, deserialize_with = "whole_or_null")]
    pub(super) step: Option<i64>,
    /// The lowest number (default 0).
    #[serde(default, deserialize_with = "whole_or_null")]
    pub(super) min: Option<i64>,
    /// The highest number (default 2^63-1).
    #[serde(default, deserialize_with = "whole_or_null")]
    pub(super) max: Option<i64>,
    /// Wrap at the bound.
    #[serde(default)]
    pub(super) cycle: bool,
    /// An existing sequence of the same start, shape and format is no error (nothing is
    /// written); another is 409 `spec_conflict`.
    #[serde(default)]
    pub(super) if_not_exists: bool,
    /// A serial format such as `INV-{scope}-{n:06}`.
    #[serde(default)]
    pub(super) format: Option<String>,
}

#[utoipa::path(post, path = "/v1/sequences", operation_id = "create", tag = "admin", request_body = CreateBody,
    responses((status = 201, description = "Created: the state, `created: true`", body = Created), (status = 200, description = "`if_not_exists` found it with the same start (else 409 `spec_conflict`): the state, `created: false`, and in `altered` each setting asked that an alter changed since (bounds, step, cycle, format), kept as stored", body = Created)))]
pub(super) async fn create(
    State(st): State<Shared>,
    req: Request,
) -> Result<(StatusCode, Json<Created>), ApiError> {
    let rule = st.authenticate(req.headers())?;
    AppState::permit(&rule, Op::Create, None)?;
    let b: CreateBody = json_body(req).await?;
    AppState::permit(&rule, Op::Create, Some(&b.name))?;
    let may_read = AppState::permit(&rule, Op::Peek, Some(&b.name)).is_ok();
    let d = Spec::default();
    let spec = d
        .with_start(b.start.unwrap_or(d.start))
        .with_step(b.step.unwrap_or(d.step))
        .with_min(b.min.unwrap_or(d.min))
        .with_max(b.max.unwrap_or(d.max))
        .with_cycle(b.cycle);
    check_name(&b.name, true)?;
    dispenser::sequence::validate_plain_name(&b.name)?;
    spec.validate(&b.name)?;
    let format = b.format.as_deref().map(Format::parse).transpose()?;
    // With `if_not_exists`, a look first: a sequence that exists is found without its lock
    // (whose taking would retire the service's block clients of it).
    let taken = || Error::AlreadyExists {
        kind: dispenser::error::Kind::Sequence,
        name: b.name.clone(),
    };
    let exists = match b.if_not_exists {
        true => match st.dispenser.peek(&b.name).await {
            Ok(_) => true,
            Err(e) if e.kind() == dispenser::error::ErrorKind::NotFound => false,
            Err(e) => return Err(e.into()),
        },
        false => false,
    };
    let acting = st.acting(&rule)?;
    // The format is written in the same insert as the sequence.
    let make = async {
        acting.create(&b.name, spec).format(format.clone()).await?;
        let created = format!("sequence {:?} created", b.name);
        st.dispenser
            .peek(&b.name)
            .await
            .map(|s| (s, Vec::new()))
            .map_err(|e| e.after_write(&created))
    };
    let create = async {
        match exists {
            true => Err(taken()),
            false => st.exclusive(&b.name, make).await,
        }
    };
    // The library's ensure compares everything a create writes (start, shape, format); on a
    // sequence that exists it only reads (no lock taken).
    let ensure = || async {
        let s = acting.ensure(&b.name, spec).format(format.clone()).await?;
        let altered = s.altered().to_vec();
        st.dispenser.peek(&b.name).await.map(|s| (s, altered))
    };
    let making = Making {
        noun: "sequence",
        name: &b.name,
        path: "/v1/sequences",
        if_not_exists: b.if_not_exists,
        may_read,
    };
    let ((state, altered), status) = create_or_ensure(making, create, ensure).await?;
    Ok((status, Json(Created::of(&state, status, &altered)?)))
}

#[utoipa::path(get, path = "/v1/sequences/{name}", operation_id = "peek", tag = "admin", params(("name" = String, Path, description = "The sequence name")),
    responses((status = 200, description = "The state (for a striped sequence `{name, stripes: [state, …]}`)", body = StateAnswer)))]
pub(super) async fn peek(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<StateAnswer>, ApiError> {
    st.authorize(&headers, Op::Peek, Some(&name))?;
    check_name(&name, false)?;
    match st.dispenser.peek(&name).await {
        Err(e @ Error::NotFound { .. }) => {
            let (ids, _) = stripes_or(&st.dispenser, &name, e).await?;
            Ok(Json(StateAnswer::striped(&name, &ids.peek().await?)?))
        }
        other => Ok(Json(StateAnswer::plain(&other?)?)),
    }
}

/// When `name` has no document of its own but is a striped sequence, the striped sequence and
/// the names of its stripes (the admin endpoints then act on every stripe, each within its
/// residue class); otherwise `no_such`, the plain operation's error. The decision
/// `Dispenser::open_either` makes (plain first; a layout that cannot be opened is none; a
/// database that does not answer is that error), after the plain operation found no document.
async fn stripes_or(
    d: &Dispenser,
    name: &str,
    no_such: Error,
) -> Result<(StripedSequence, Vec<String>), ApiError> {
    match d.open_striped(name).await {
        Ok(ids) => {
            let names = (0..ids.stripes()).map(|i| stripe_name(name, i)).collect();
            Ok((ids, names))
        }
        Err(e) if e.kind() == dispenser::error::ErrorKind::Unavailable => Err(e.into()),
        Err(_) => Err(no_such.into()),
    }
}

/// The largest page `GET /v1/sequences` answers.
pub(super) const MAX_PAGE: u64 = 10_000;
/// The page size when none is asked for.
pub(super) const DEFAULT_PAGE: u64 = 1000;

/// `limit` (from 1 to `max`; `default` when not given) and `after` of a list's query: each
/// at most once, nothing else.
pub(super) fn page_query(
    query: &[(String, String)],
    default: u64,
    max: u64,
) -> Result<(u64, Option<String>), ApiError> {
    let mut limit = None;
    let mut after = None;
    for (k, v) in query {
        match k.as_str() {
            "limit" if limit.is_none() => {
                limit = Some(
                    super::json::exact_integer(v)
                        .and_then(|n| u64::try_from(n).ok())
                        .filter(|n| (1..=max).contains(n))
                        .ok_or_else(|| {
                            ApiError::invalid_input(format!(
                                "limit {v:?} must be a whole number from 1 to {max}"
                            ))
                        })?,
                );
            }
            "after" if after.is_none() => {
                if v.chars().count() > super::names::MAX_NAME_CHARS {
                    return Err(ApiError::invalid_input(format!(
                        "after must be a sequence name (at most {} characters)",
                        super::names::MAX_NAME_CHARS
                    )));
                }
                after = Some(v.clone());
            }
            "limit" | "after" => {
                return Err(ApiError::invalid_input(format!(
                    "{k} is given more than once: give it once"
                )));
            }
            other => {
                return Err(ApiError::invalid_input(format!(
                    "unknown query parameter {other:?} (known: limit, after)"
                )));
            }
        }
    }
    Ok((limit.unwrap_or(default), after))
}

/// One page of the sequences `rule` may use, after `after` (see [`page_of`]).
pub(super) async fn sequence_page<E>(
    st: &AppState,
    rule: &TokenRule,
    limit: usize,
    after: Option<String>,
    show: impl Fn(&SequenceState) -> Result<E, ApiError>,
    unreadable: impl Fn(Unreadable) -> E,
) -> Result<(Vec<E>, Option<String>), ApiError> {
    let d = &st.dispenser;
    page_of(
        st,
        rule,
        limit,
        after,
        |a, patterns| async move {
            let mut list = d.list().matching(patterns).limit(limit);
            if let Some(a) = a {
                list = list.after(a);
            }
            list.await
        },
        |s: &SequenceState| &s.name,
        show,
        unreadable,
    )
    .await
}

/// One page of a listing by name, for the names `rule` may use, after `after`: up to `limit`
/// entries, each `show(item)` (a document that cannot be read is `unreadable({name, error})`
/// in its place), and the cursor of the next page (`None` after the last). `fetch(after, patterns)`
/// reads, in one query, the next `limit` documents whose names match the token's patterns:
/// the server never returns (and the service never reads) a name the token may not use, so
/// the cursor — the last name of the page — is always one the token may see.
#[allow(clippy::too_many_arguments)] // the parts of one listing, each a plain closure
pub(super) async fn page_of<'p, T, E, Fut>(
    st: &AppState,
    rule: &'p TokenRule,
    limit: usize,
    after: Option<String>,
    fetch: impl FnOnce(Option<String>, Vec<&'p str>) -> Fut,
    name_of: impl Fn(&T) -> &str,
    show: impl Fn(&T) -> Result<E, ApiError>,
    unreadable: impl Fn(Unreadable) -> E,
) -> Result<(Vec<E>, Option<String>), ApiError>
where
    Fut: Future<Output = Result<Vec<Result<T, Error>>, Error>>,
{
    let page = fetch(after, rule.patterns()).await?;
    let full = page.len() >= limit;
    let mut out = Vec::with_capacity(page.len());
    let mut last = None;
    for item in page {
        let name = match &item {
            Ok(t) => name_of(t).to_owned(),
            Err(Error::CorruptDocument { name, .. }) => name.clone(),
            Err(_) => continue,
        };
        if !rule.allows_name(&name) {
            // The query matched the token's patterns; the service's own matcher disagreeing
            // is a bug: the name is neither shown nor used as a cursor.
            tracing::error!("a listing by the token's patterns returned a name they do not match");
            continue;
        }
        match item {
            Ok(t) => out.push(show(&t)?),
            // In its place, as the library and the CLI report it.
            Err(e) => out.push(unreadable(Unreadable::new(&name, &e, |m| st.scrub(m)))),
        }
        last = Some(name);
    }
    Ok((out, if full { last } else { None }))
}

#[utoipa::path(get, path = "/v1/sequences", operation_id = "list", tag = "admin",
    params(("limit" = Option<u64>, Query, description = "How many sequences at most (1 to 10 000; default 1000)"),
        ("after" = Option<String>, Query, description = "The cursor: list the names after this one (the `next` of the previous page)")),
    responses((status = 200, description = "`{\"sequences\": […], \"next\"}`: one page of the sequences the token may use, by name (a document that cannot be read as `{name, error}` in its place); `next` is the cursor of the next page, `null` after the last", body = SequenceList)))]
pub(super) async fn list(
    State(st): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<SequenceList>, ApiError> {
    let rule = st.authorize(&headers, Op::List, None)?;
    let (limit, after) = page_query(&query, DEFAULT_PAGE, MAX_PAGE)?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let show = |s: &SequenceState| Ok(ListEntry::Sequence(of_library::<Sequence>(s.to_json())?));
    let (sequences, next) =
        sequence_page(&st, &rule, limit, after, show, ListEntry::Unreadable).await?;
    Ok(Json(SequenceList { sequences, next }))
}

/// `GET /v1/sequences/{name}/hourly`: the numbers this service handed out from `name` in
/// each of the last 24 hours (since the service started; other clients' draws are not in
/// it). 404 when `name` has no document of its own.
#[utoipa::path(get, path = "/v1/sequences/{name}/hourly", operation_id = "hourly", tag = "admin", params(("name" = String, Path, description = "The sequence name")),
    responses((status = 200, description = "`{name, hours: [{hour, issued}]}`: every one of the last 24 hours (RFC 3339, start of the hour, UTC), oldest first, with the numbers this service handed out from the sequence in it (0 when none; since the service started)", body = Hourly)))]
pub(super) async fn hourly(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Hourly>, ApiError> {
    st.authorize(&headers, Op::Peek, Some(&name))?;
    check_name(&name, false)?;
    // A name without a document is 404, as for a peek (a deleted sequence's hours go too).
    st.dispenser.peek(&name).await?;
    let hours: Vec<HourCount> = st
        .metrics
        .issued_per_hour(&name)
        .into_iter()
        .map(|(hour, issued)| {
            let start = i64::try_from(hour.saturating_mul(3600))
                .ok()
                .and_then(|s| jiff::Timestamp::from_second(s).ok())
                .map(|t| t.to_string());
            HourCount {
                hour: start,
                issued,
            }
        })
        .collect();
    Ok(Json(Hourly { name, hours }))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AlterBody {
    /// The new step (not 0; a stripe keeps its step).
    #[serde(default, deserialize_with = "whole_or_null")]
    step: Option<i64>,
    /// The new lower bound.
    #[serde(default, deserialize_with = "whole_or_null")]
    min: Option<i64>,
    /// The new upper bound.
    #[serde(default, deserialize_with = "whole_or_null")]
    max: Option<i64>,
    /// Whether to wrap at the bound (`null`: keep).
    #[serde(default)]
    cycle: Option<bool>,
    /// Absent: keep; `null`: remove; a string: set.
    #[serde(default, deserialize_with = "some_or_null")]
    #[schema(value_type = Option<String>)]
    format: Option<Option<String>>,
    /// Allow a bound that leaves the last issued number outside it.
    #[serde(default)]
    force: bool,
}

/// Tells an absent field (`None`) from `null` (`Some(None)`).
fn some_or_null<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// `POST /v1/sequences/{name}/alter`: under the sequence's exclusive lock (the service's
/// block client is retired first, so nothing reserved under the old shape is served after).
/// A striped sequence is altered as a whole (`StripedSequence::alter`: its bounds; a stripe
/// keeps its step, never cycles and has no format; planned for every stripe before any write).
#[utoipa::path(post, path = "/v1/sequences/{name}/alter", operation_id = "alter", tag = "admin", params(("name" = String, Path, description = "The sequence name")), request_body = AlterBody,
    responses((status = 200, description = "The new state (for a striped sequence `{name, stripes: [state, …]}`)", body = StateAnswer)))]
pub(super) async fn alter(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<StateAnswer>, ApiError> {
    let acting = st.acting(&st.authorize(req.headers(), Op::Alter, Some(&name))?)?;
    let b: AlterBody = json_body(req).await?;
    check_name(&name, false)?;
    if b.step.is_none()
        && b.min.is_none()
        && b.max.is_none()
        && b.cycle.is_none()
        && b.format.is_none()
    {
        return Err(ApiError::invalid_input(format!(
            "nothing to change for sequence {name:?}: give a step, min, max, cycle or format"
        )));
    }
    let mut change = dispenser::sequence::Alter::default();
    change.step = b.step;
    change.min = b.min;
    change.max = b.max;
    change.cycle = b.cycle;
    change.format = match b.format {
        None => None,
        Some(None) => Some(None),
        Some(Some(f)) => Some(Some(Format::parse(&f)?)),
    };
    match st
        .exclusive(&name, async {
            acting
                .open(&name)
                .await?
                .alter(change.clone())
                .force(b.force)
                .await
        })
        .await
    {
        Err(e @ Error::NotFound { .. }) => {
            let (ids, stripes) = stripes_or(&acting, &name, e).await?;
            let states = st
                .exclusive_all(&stripes, ids.alter(change).force(b.force).into_future())
                .await?;
            Ok(Json(StateAnswer::striped(&name, &states)?))
        }
        other => Ok(Json(StateAnswer::plain(&other?)?)),
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AdvanceBody {
    /// Every number from now on is past this one.
    #[serde(deserialize_with = "whole")]
    pub(super) to: i64,
}

#[utoipa::path(post, path = "/v1/sequences/{name}/advance-to", operation_id = "advance_to", tag = "admin", params(("name" = String, Path, description = "The sequence name")), request_body = AdvanceBody,
    responses((status = 200, description = "The new state (for a striped sequence `{name, stripes: [state, …]}`)", body = StateAnswer)))]
pub(super) async fn advance(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<StateAnswer>, ApiError> {
    let acting = st.acting(&st.authorize(req.headers(), Op::Advance, Some(&name))?)?;
    let b: AdvanceBody = json_body(req).await?;
    check_name(&name, false)?;
    let advance = async { acting.open(&name).await?.advance_to(b.to).await };
    match st.exclusive(&name, advance).await {
        Err(e @ Error::NotFound { .. }) => {
            let (ids, stripes) = stripes_or(&acting, &name, e).await?;
            let states = st.exclusive_all(&stripes, ids.advance_to(b.to)).await?;
            Ok(Json(StateAnswer::striped(&name, &states)?))
        }
        other => Ok(Json(StateAnswer::plain(&other?)?)),
    }
}

/// The body of `POST /v1/sequences/{name}/adopt`: where the numbers were issued before.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AdoptBody {
    /// `mongoose-sequence` (its counter of `id`; with `scoped`, each of its scoped counters into
    /// a scope of the name, a template), `mongoengine` (its counter `id`,
    /// `"<sequence_name>.<field>"`), `counter` (the document `filter` matches in `collection`
    /// holds the last number in `field`) or `highest` (the highest number the documents of
    /// `collection` carry in `field`; the lowest for a sequence counting down).
    #[schema(pattern = "^(mongoose-sequence|mongoengine|counter|highest)$")]
    pub(super) source: String,
    /// The counter's id (`mongoose-sequence`, `mongoengine`).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200)]
    pub(super) id: Option<String>,
    /// mongoose-sequence's counters kept per `reference_fields`, each into a scope.
    #[serde(default)]
    pub(super) scoped: bool,
    /// The collection holding the source (required for `counter` and `highest`; for the
    /// others, where the counters were kept when not their default). It is read in the
    /// service's own database only.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200)]
    pub(super) collection: Option<String>,
    /// With `counter`: the filter matching the counter document.
    #[serde(default)]
    pub(super) filter: Option<serde_json::Map<String, serde_json::Value>>,
    /// With `counter` and `highest`: the field holding the number.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200)]
    pub(super) field: Option<String>,
}

impl AdoptBody {
    /// The library's source (400 naming what is missing).
    fn source(&self) -> Result<dispenser::sequence::AdoptSource, ApiError> {
        use dispenser::sequence::AdoptSource;
        let need = |v: &Option<String>, what: &str| {
            v.clone().ok_or_else(|| {
                ApiError::invalid_input(format!("an adopt from `{}` needs `{what}`", self.source))
            })
        };
        if self.scoped && self.source != "mongoose-sequence" {
            return Err(ApiError::invalid_input(
                "`scoped` is for `mongoose-sequence` only (it alone keeps scoped counters)",
            ));
        }
        let kept = |s: AdoptSource| match &self.collection {
            Some(c) => s.in_collection(c.clone()),
            None => s,
        };
        Ok(match self.source.as_str() {
            "mongoose-sequence" if self.scoped => {
                kept(AdoptSource::mongoose_sequence_scoped(need(&self.id, "id")?))
            }
            "mongoose-sequence" => kept(AdoptSource::mongoose_sequence(need(&self.id, "id")?)),
            "mongoengine" => kept(AdoptSource::mongoengine(need(&self.id, "id")?)),
            "counter" => {
                let filter = self.filter.clone().ok_or_else(|| {
                    ApiError::invalid_input("an adopt from `counter` needs `filter`")
                })?;
                let filter = dispenser::mongodb::bson::to_document(&filter).map_err(|e| {
                    ApiError::invalid_input(format!("`filter` is not a document: {e}"))
                })?;
                AdoptSource::counter(
                    need(&self.collection, "collection")?,
                    filter,
                    need(&self.field, "field")?,
                )
            }
            "highest" => AdoptSource::highest(
                need(&self.collection, "collection")?,
                need(&self.field, "field")?,
            ),
            other => {
                return Err(ApiError::invalid_input(format!(
                    "source {other:?} is not one of mongoose-sequence, mongoengine, counter, highest"
                )));
            }
        })
    }
}

/// What an adopt did to one sequence.
#[derive(Serialize, ToSchema)]
pub(super) struct AdoptedAnswer {
    /// The sequence (for a scoped source, the scope `template@key`).
    pub(super) name: String,
    /// The last number the source issued; `null` when it holds none.
    pub(super) highest: Option<i64>,
    /// Whether the sequence moved (false: it was past the source already).
    pub(super) moved: bool,
    /// Its state afterwards.
    pub(super) state: super::answers::Sequence,
}

/// The answer of an adopt: one entry per sequence.
#[derive(Serialize, ToSchema)]
pub(super) struct AdoptAnswer {
    pub(super) adopted: Vec<AdoptedAnswer>,
}

#[utoipa::path(post, path = "/v1/sequences/{name}/adopt", operation_id = "adopt", tag = "admin", params(("name" = String, Path, description = "The sequence name (a template, for a scoped source)")), request_body = AdoptBody,
    responses((status = 200, description = "What was done to each sequence: `{adopted: [{name, highest, moved, state}]}`; each is past every number its source issued (never moved backwards), and each move is recorded in the history as `adopt`", body = AdoptAnswer)))]
pub(super) async fn adopt(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<AdoptAnswer>, ApiError> {
    let rule = st.authorize(req.headers(), Op::Adopt, Some(&name))?;
    let acting = st.acting(&rule)?;
    check_name(&name, false)?;
    let b: AdoptBody = json_body(req).await?;
    let source = b.source()?;
    // A scoped adopt writes scopes named by what the source holds, unknown before it is read:
    // the token must cover them all, never only the template.
    if b.scoped && !rule.allows_every_name_from(&format!("{name}@")) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "token {:?} may not adopt every scope of {name:?}: a scoped adopt writes the scopes the source holds, so the token needs a pattern such as \"{name}@*\"",
                rule.name
            ),
        ));
    }
    // As every admin operation: the block clients of what it moves are retired first (a
    // block reserved before would hand out numbers below the source's) — for a scoped
    // source, the template's and every scope's this service draws from.
    let done = if b.scoped {
        let prefix = format!("{name}@");
        let mut names: Vec<String> = st
            .all_slots()
            .into_iter()
            .map(|(n, _)| n)
            .filter(|n| n.starts_with(&prefix))
            .collect();
        names.push(name.clone());
        names.sort();
        st.exclusive_all(&names, acting.adopt(&name, source).into_future())
            .await?
    } else {
        st.exclusive(&name, acting.adopt(&name, source).into_future())
            .await?
    };
    let adopted = done
        .iter()
        .map(|a| {
            Ok(AdoptedAnswer {
                name: a.name.clone(),
                highest: a.highest,
                moved: a.moved,
                state: of_library(a.state.to_json())?,
            })
        })
        .collect::<Result<_, ApiError>>()?;
    Ok(Json(AdoptAnswer { adopted }))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ResetBody {
    /// The next number to issue.
    #[serde(deserialize_with = "whole")]
    pub(super) next: i64,
    /// Allow a next number at or below one already issued (numbers may repeat).
    #[serde(default)]
    pub(super) force: bool,
}

#[utoipa::path(post, path = "/v1/sequences/{name}/reset", operation_id = "reset", tag = "admin", params(("name" = String, Path, description = "The sequence name")), request_body = ResetBody,
    responses((status = 200, description = "The new state (for a striped sequence `{name, stripes: [state, …]}`)", body = StateAnswer)))]
pub(super) async fn reset(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<StateAnswer>, ApiError> {
    let acting = st.acting(&st.authorize(req.headers(), Op::Reset, Some(&name))?)?;
    let b: ResetBody = json_body(req).await?;
    let next = b.next;
    check_name(&name, false)?;
    match st
        .exclusive(&name, async {
            acting.open(&name).await?.reset(next).force(b.force).await
        })
        .await
    {
        Err(e @ Error::NotFound { .. }) => {
            let (ids, stripes) = stripes_or(&acting, &name, e).await?;
            let states = st
                .exclusive_all(&stripes, ids.reset(next).force(b.force).into_future())
                .await?;
            Ok(Json(StateAnswer::striped(&name, &states)?))
        }
        other => Ok(Json(StateAnswer::plain(&other?)?)),
    }
}

#[utoipa::path(delete, path = "/v1/sequences/{name}", operation_id = "delete", tag = "admin", params(("name" = String, Path, description = "The sequence name")),
    responses((status = 204, description = "Deleted")))]
pub(super) async fn delete(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let acting = st.acting(&st.authorize(&headers, Op::Delete, Some(&name))?)?;
    check_name(&name, false)?;
    match st.exclusive(&name, acting.delete(&name)).await {
        Err(e @ Error::NotFound { .. }) => {
            // A striped sequence, whole or left part way by an interrupted delete: its layout
            // is read from stripe 0, which goes last.
            let count = match acting.peek(&stripe_name(&name, 0)).await {
                Ok(first) => match first.stripe {
                    Some(s) if s.index == 0 => s.count,
                    _ => return Err(e.into()),
                },
                Err(_) => return Err(e.into()),
            };
            let stripes: Vec<String> = (0..count).map(|i| stripe_name(&name, i)).collect();
            st.exclusive_all(&stripes, acting.delete_striped(&name))
                .await?;
        }
        other => {
            other?;
            // The template's "has scopes" follows the scopes that exist.
            if let Some((template, _)) = scope_of(&name) {
                st.rescan_template(template).await;
            }
        }
    }
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/healthz", operation_id = "healthz", tag = "ops", security(()),
    responses((status = 200, description = "The database answers", body = Health), (status = 503, description = "The database does not answer", body = super::errors::ErrorBody)))]
pub(super) async fn healthz(State(st): State<Shared>) -> Result<Json<Health>, ApiError> {
    st.dispenser.ping().await?;
    Ok(Json(Health { status: "ok" }))
}
