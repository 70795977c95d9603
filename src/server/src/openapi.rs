//! `GET /openapi.json`: the OpenAPI 3.1 description of the service, exactly what it does.
//!
//! The operations, their bodies and answers are generated with `utoipa` from the
//! `#[utoipa::path]` annotations on the handlers (and `gapless.rs`); [`document`] then adds
//! what the annotations cannot say: the rules of names and formats (patterns, lengths), the
//! range of `count` (1 to the service's `--max-count`, known only at run time), that a reset
//! takes `next` or `value` (one of them) and an alter at least one change, the status codes
//! each operation answers (no `4XX`/`5XX` wildcards), links for stateful clients, and
//! `/metrics` (with the `metrics_token` scheme when the service has a `--metrics-token`) and
//! `/openapi.json` themselves. Served without a token.

use axum::extract::State;
use axum::{Extension, Json};
use serde_json::{Map, Value, json};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::answers::{
    Created, Drawn, FamilyTicket, FollowedTicket, Gapless, GaplessCreated, GaplessEntry,
    GaplessList, Health, HeldSequence, HistoryItem, HistoryPage, HourCount, Hourly, Lease,
    ListEntry, MaxLeaseAnswer, Overview, OverviewSequence, QueueCallEntry, QueueCreated,
    QueueDeskEntry, QueueEntry, QueueHourEntry, QueueList, QueueState, QueueWaitingEntry,
    ReleaseAnswer, Run, Sequence, SequenceList, StateAnswer, StripeOf, Striped, TakeAnswer,
    TicketAnswer, TicketLink, Unreadable, Usage, VoidAnswer, Voided,
};
use super::errors::{ErrorBody, ErrorDetail};
use super::names::{CREATED_NAME_PATTERN, MAX_NAME_CHARS, NAME_PATTERN, PATH_NAME_PATTERN};
use super::scrape::MetricsToken;
use super::state::Shared;
use super::{draw, gapless, handlers, history, overview, queues, ticket};

/// A serial format (JSON Schema, ECMA 262): text without NUL, `{{` and `}}` for braces,
/// `{scope}`, and at least one `{n}` or `{n:0W}` (W from 1 to 20, as the library parses it).
pub(super) const FORMAT_PATTERN: &str = concat!(
    r"^(?:[^{}\u0000]|\{\{|\}\}|\{scope\}|\{n\}|\{n:0\+?0*(?:[1-9]|1[0-9]|20)\})*",
    r"(?:\{n\}|\{n:0\+?0*(?:[1-9]|1[0-9]|20)\})",
    r"(?:[^{}\u0000]|\{\{|\}\}|\{scope\}|\{n\}|\{n:0\+?0*(?:[1-9]|1[0-9]|20)\})*$"
);

/// What the service refuses of a name in a path (400), as every path parameter `name` says.
const PATH_NAME_RULES: &str = "1 to 200 characters (at most 200 bytes of UTF-8: 422 past them), no control character (U+0000–U+001F, U+007F–U+009F), not starting with `$`. Percent-encode it; the service decodes it once, so the rules hold for the decoded name, and the pattern also rules out the escapes of what it refuses (`%0A`, `%7F`, `%C2%85`, a leading `%24`) for clients that decode a value once before encoding it.";

/// The bearer-token scheme every `/v1` endpoint requires.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "dispenser", description = "Unique numbers from MongoDB sequences: never a duplicate."),
    paths(
        draw::next,
        handlers::create,
        handlers::list,
        handlers::peek,
        handlers::delete,
        handlers::advance,
        handlers::adopt,
        handlers::alter,
        handlers::reset,
        handlers::healthz,
        handlers::hourly,
        gapless::create,
        gapless::list,
        gapless::peek,
        gapless::delete,
        gapless::void,
        gapless::release,
        gapless::alter,
        queues::create,
        queues::peek,
        queues::take,
        queues::call,
        queues::recall,
        queues::finish,
        queues::cancel,
        ticket::give_up,
        ticket::view,
        ticket::ticket_link,
        queues::alter,
        queues::list,
        queues::delete,
        overview::overview,
        history::sequence,
        history::gapless,
        history::queue,
    ),
    components(schemas(
        // The answers (`answers.rs`): the types the handlers return.
        Drawn,
        Run,
        ErrorBody,
        ErrorDetail,
        Unreadable,
        Health,
        Sequence,
        StripeOf,
        Usage,
        Striped,
        StateAnswer,
        Created,
        ListEntry,
        SequenceList,
        Hourly,
        HourCount,
        QueueState,
        QueueCallEntry,
        QueueDeskEntry,
        QueueWaitingEntry,
        QueueHourEntry,
        QueueCreated,
        QueueEntry,
        QueueList,
        TicketAnswer,
        TakeAnswer,
        FamilyTicket,
        FollowedTicket,
        TicketLink,
        Gapless,
        Lease,
        Voided,
        GaplessCreated,
        GaplessEntry,
        GaplessList,
        VoidAnswer,
        ReleaseAnswer,
        MaxLeaseAnswer,
        HeldSequence,
        OverviewSequence,
        Overview,
        HistoryItem,
        HistoryPage,
        // The bodies.
        handlers::CreateBody,
        handlers::AlterBody,
        handlers::AdvanceBody,
        handlers::AdoptBody,
        handlers::AdoptAnswer,
        handlers::AdoptedAnswer,
        handlers::ResetBody,
        gapless::GaplessCreateBody,
        gapless::GaplessDeleteBody,
        gapless::VoidBody,
        gapless::ReleaseBody,
        gapless::GaplessAlterBody,
        queues::TakeBody,
        queues::CallBody,
        queues::RecallBody,
        queues::CancelBody,
        queues::QueueAlterBody,
        queues::QueueDeleteBody,
        queues::QueueCreateBody
    )),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub(super) struct ApiDoc;

/// What each status means, for its description.
fn meaning(status: u16) -> &'static str {
    match status {
        400 => {
            "`invalid_input` (a name, `count` or field the document rules out), `malformed_json` (a body that is not the JSON this operation takes), `bad_request` (not HTTP/1.1)"
        }
        401 => "`unauthorized`: no token, a malformed `Authorization` header, or an unknown token",
        403 => "`forbidden`: the token may not do this operation, or not on this sequence",
        404 => "`no_such_sequence` (`no_such_queue` for a queue)",
        408 => "`request_timeout`: the body did not arrive within the service's --request-timeout",
        409 => {
            "`exhausted`, `already_exists`, `spec_conflict`, `would_go_backwards`, `template` (a scope template is not drawn); for a queue `queue_full` (the tickets asked do not fit beside those waiting and those the desks show: nothing taken), `nobody_waiting` (nothing called), `ticket_not_waiting` (a cancel or a call of a given ticket that does not wait: nothing written), `no_ticket_shown` (the desk shows no ticket), `would_remap` (an alter under which a held ticket would show another number: nothing written), `queue_in_use` (a delete while tickets wait or a desk shows one, without `force`: nothing deleted), `already_exists`; for a gap-free sequence `lease_held` (a release or a delete without `force`, or a void, of a number whose holder's lease runs: nothing written), `already_exists`"
        }
        413 => "`payload_too_large`: a body over 64 KiB",
        429 => {
            "`too_many_takes`: a ticket link's take past its limit per phone or per address (nothing taken); `too_many_reads`: a ticket link's read past its limit per address; `Retry-After` says in how many seconds one more is allowed"
        }
        414 => "`uri_too_long`: a URI over 65 534 bytes",
        415 => "`unsupported_media_type`: a body that is not `application/json`",
        422 => {
            "`invalid_input`: values the document allows that do not fit together or with the sequence (a spec, a format, a count past one cycle, a change to a stripe, a name over 200 bytes)"
        }
        431 => "`headers_too_large`: a request head larger than the service reads",
        500 => "`corrupt_document` (see `dispenser check`), `business_write` or `internal`",
        503 => {
            "`database` (no answer from the database), `timeout` (past --request-timeout, or the database past the operation timeout: a draw cut short is a gap, never a duplicate), `contention` or `closed`: try again"
        }
        _ => "an error",
    }
}

/// The error statuses each operation answers.
fn error_statuses(operation: &str) -> &'static [u16] {
    // Every operation: hyper's own 400 (not HTTP/1.1), 414 and 431, and 500 and 503.
    match operation {
        "next" => &[400, 401, 403, 404, 409, 414, 422, 431, 500, 503],
        "create" => &[400, 401, 403, 408, 409, 413, 414, 415, 422, 431, 500, 503],
        "peek" | "delete" | "gapless_peek" | "hourly" => {
            &[400, 401, 403, 404, 414, 422, 431, 500, 503]
        }
        "list" | "overview" => &[400, 401, 403, 414, 431, 500, 503],
        "history" | "gapless_history" | "queue_history" => {
            &[400, 401, 403, 414, 422, 431, 500, 503]
        }
        "take" => &[
            400, 401, 403, 404, 408, 409, 413, 414, 415, 422, 429, 431, 500, 503,
        ],
        "give_up" => &[400, 401, 403, 404, 409, 414, 422, 429, 431, 500, 503],
        "ticket" | "ticket_link" => &[400, 401, 403, 404, 414, 422, 429, 431, 500, 503],
        "call" | "recall" | "finish" | "cancel" | "queue_alter" => &[
            400, 401, 403, 404, 408, 409, 413, 414, 415, 422, 431, 500, 503,
        ],
        "queue_list" | "gapless_list" => &[400, 401, 403, 414, 431, 500, 503],
        "queue_delete" | "gapless_delete" => &[
            400, 401, 403, 404, 408, 409, 413, 414, 415, 422, 431, 500, 503,
        ],
        "queue_peek" => &[400, 401, 403, 404, 414, 422, 431, 500, 503],
        "queue_create" | "gapless_create" => {
            &[400, 401, 403, 408, 409, 413, 414, 415, 422, 431, 500, 503]
        }
        "advance_to" | "adopt" | "reset" | "alter" | "gapless_void" | "gapless_release"
        | "gapless_alter" => &[
            400, 401, 403, 404, 408, 409, 413, 414, 415, 422, 431, 500, 503,
        ],
        "healthz" => &[400, 414, 431, 503],
        _ => &[400, 414, 431, 500, 503],
    }
}

fn error_response(status: u16) -> Value {
    json!({
        "description": meaning(status),
        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/ErrorBody" } } }
    })
}

/// The schema of a name: 1–200 characters (and bytes), no control character, no leading `$`.
fn name_schema(pattern: &str) -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS, "pattern": pattern })
}

fn format_schema(nullable: bool) -> Value {
    let kind = if nullable {
        json!(["string", "null"])
    } else {
        json!("string")
    };
    json!({
        "type": kind,
        "maxLength": dispenser::Format::MAX_BYTES,
        "pattern": FORMAT_PATTERN,
        "description": "Literal text with `{n}` (the number), `{n:0W}` (zero-padded to W characters, W from 1 to 20), `{scope}`; `{{`/`}}` for braces; at least one `{n}`. At most 200 bytes (422 past them)."
    })
}

/// `schemas.NAME.properties.FIELD`, when there.
fn property<'v>(
    doc: &'v mut Value,
    schema: &str,
    field: &str,
) -> Option<&'v mut Map<String, Value>> {
    doc.pointer_mut(&format!("/components/schemas/{schema}/properties/{field}"))?
        .as_object_mut()
}

/// The whole document, for a service whose `--max-count` is `max_count`, and whose
/// `/metrics` needs a token when `metrics_token`.
pub(super) fn document(max_count: u64, metrics_token: bool) -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or(Value::Null);
    // Bodies.
    if let Some(p) = property(&mut doc, "CreateBody", "name") {
        p.extend(
            name_schema(CREATED_NAME_PATTERN)
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
    }
    for (schema, field, nullable) in [
        ("CreateBody", "format", true),
        ("AlterBody", "format", true),
        ("QueueCreateBody", "format", true),
    ] {
        if let Some(p) = property(&mut doc, schema, field) {
            *p = format_schema(nullable)
                .as_object()
                .cloned()
                .unwrap_or_default();
        }
    }
    if let Some(p) = property(&mut doc, "QueueCreateBody", "name") {
        p.extend(
            name_schema(NAME_PATTERN)
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
    }
    // A desk label, in both bodies: not only spaces (one pattern, beside the service's check).
    for schema in ["CallBody", "RecallBody"] {
        if let Some(p) = property(&mut doc, schema, "desk") {
            p.insert("pattern".into(), json!(queues::DESK_PATTERN));
        }
    }
    for schema in ["VoidBody", "ReleaseBody"] {
        if let Some(p) = property(&mut doc, schema, "reason") {
            p.insert("minLength".into(), json!(1));
            p.insert("maxLength".into(), json!(1000));
        }
    }
    if let Some(p) = property(&mut doc, "GaplessCreateBody", "name") {
        p.extend(
            name_schema(NAME_PATTERN)
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
    }
    if let Some(p) = property(&mut doc, "GaplessCreateBody", "collection") {
        p.insert("pattern".into(), json!(gapless::COLLECTION_PATTERN));
    }
    for field in ["field", "void_field"] {
        if let Some(p) = property(&mut doc, "GaplessCreateBody", field) {
            p.insert("pattern".into(), json!(gapless::FIELD_PATTERN));
        }
    }
    for schema in ["GaplessAlterBody", "GaplessCreateBody"] {
        if let Some(p) = property(&mut doc, schema, "max_lease_seconds") {
            p.insert("minimum".into(), json!(0.001));
            p.insert("maximum".into(), json!(gapless::MAX_LEASE_SECONDS));
        }
    }
    // At most 100 fields (a name MongoDB refuses is 422: JSON Schema's `propertyNames` makes
    // schema-driven generators stumble).
    if let Some(p) = property(&mut doc, "GaplessCreateBody", "void_extra") {
        p.insert("maxProperties".into(), json!(100));
    }
    // A reset takes the next number as `next` (a whole number, not null).
    if let Some(p) = property(&mut doc, "ResetBody", "next") {
        p.insert("type".into(), json!("integer"));
    }
    // An adopt names what its source needs: `id` for the ODM counters, `collection` and `field`
    // (and `filter` for a counter) otherwise; `scoped` is mongoose-sequence's alone.
    for (field, kind) in [
        ("id", "string"),
        ("collection", "string"),
        ("field", "string"),
        ("filter", "object"),
    ] {
        if let Some(p) = property(&mut doc, "AdoptBody", field) {
            p.insert("type".into(), json!(kind));
        }
    }
    if let Some(s) = doc.pointer_mut("/components/schemas/AdoptBody") {
        let not_scoped = json!({ "enum": [false] });
        s["oneOf"] = json!([
            { "properties": { "source": { "const": "mongoose-sequence" } }, "required": ["source", "id"] },
            { "properties": { "source": { "const": "mongoengine" }, "scoped": not_scoped }, "required": ["source", "id"] },
            { "properties": { "source": { "const": "counter" }, "scoped": not_scoped }, "required": ["source", "collection", "filter", "field"] },
            { "properties": { "source": { "const": "highest" }, "scoped": not_scoped }, "required": ["source", "collection", "field"] },
        ]);
    }
    // An alter changes something: a step, min, max or cycle that is not null (null keeps it),
    // or a format (null removes it).
    if let Some(s) = doc.pointer_mut("/components/schemas/AlterBody") {
        let mut any: Vec<Value> = [
            ("step", "integer"),
            ("min", "integer"),
            ("max", "integer"),
            ("cycle", "boolean"),
        ]
        .iter()
        .map(|(f, t)| json!({ "required": [f], "properties": { *f: { "type": t } } }))
        .collect();
        any.push(json!({ "required": ["format"] }));
        s["anyOf"] = Value::Array(any);
    }
    // Operations.
    let mut paths = doc["paths"].take();
    if let Some(paths) = paths.as_object_mut() {
        for item in paths.values_mut() {
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            for (_, op) in item.iter_mut() {
                let Some(op) = op.as_object_mut() else {
                    continue;
                };
                let id = op
                    .get("operationId")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
                    for p in params {
                        match p["name"].as_str() {
                            Some("name") => {
                                p["schema"] = name_schema(PATH_NAME_PATTERN);
                                let what = p["description"].as_str().unwrap_or("The name");
                                p["description"] = json!(format!("{what}. {PATH_NAME_RULES}"));
                            }
                            Some("serial") => {
                                p["schema"] = json!({
                                    "type": "string", "pattern": ticket::SERIAL_PATTERN
                                });
                            }
                            Some("count") => {
                                p["schema"] = json!({
                                    "type": "integer", "minimum": 1, "maximum": max_count, "default": 1
                                });
                            }
                            Some("limit") => {
                                let (max, default) = match id.as_str() {
                                    "overview" => {
                                        (super::overview::MAX_PAGE, super::overview::DEFAULT_PAGE)
                                    }
                                    "history" | "gapless_history" | "queue_history" => (
                                        dispenser::history::MAX_HISTORY_PAGE as u64,
                                        history::DEFAULT_PAGE,
                                    ),
                                    _ => (super::handlers::MAX_PAGE, super::handlers::DEFAULT_PAGE),
                                };
                                p["schema"] = json!({
                                    "type": "integer", "minimum": 1,
                                    "maximum": max, "default": default
                                });
                            }
                            Some("Idempotency-Key") => {
                                // Printable ASCII; no space at either end (HTTP trims them).
                                p["schema"] = json!({
                                    "type": "string", "minLength": 1, "maxLength": 64,
                                    "pattern": "^[!-~]([ -~]{0,62}[!-~])?(?![\\s\\S])"
                                });
                            }
                            Some("after") if id.ends_with("history") => {
                                // A history's cursor: milliseconds, a dash, the record's id.
                                p["schema"] = json!({
                                    "type": "string", "pattern": "^[0-9]{1,18}-[0-9a-f]{24}(?![\\s\\S])"
                                });
                            }
                            Some("after") => {
                                p["schema"] = json!({
                                    "type": "string", "maxLength": super::names::MAX_NAME_CHARS
                                });
                            }
                            Some("since") => {
                                p["schema"] = json!({ "type": "string", "format": "date-time" });
                            }
                            _ => {}
                        }
                    }
                }
                if let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) {
                    responses.retain(|code, _| code != "4XX" && code != "5XX");
                    for &status in error_statuses(&id) {
                        responses
                            .entry(status.to_string())
                            .or_insert_with(|| error_response(status));
                    }
                    if let Some(created) = responses.get_mut("201") {
                        match id.as_str() {
                            "create" => created["links"] = links(),
                            "queue_create" => created["links"] = queue_links(),
                            "gapless_create" => created["links"] = gapless_links(),
                            _ => {}
                        }
                    }
                }
            }
        }
        paths.insert("/metrics".into(), metrics_path(metrics_token));
        paths.insert("/openapi.json".into(), openapi_path());
    }
    doc["paths"] = paths;
    if metrics_token
        && let Some(schemes) = doc
            .pointer_mut("/components/securitySchemes")
            .and_then(Value::as_object_mut)
    {
        schemes.insert(
            "metrics_token".into(),
            json!({
                "type": "http",
                "scheme": "bearer",
                "description": "The service's --metrics-token (DISPENSER_METRICS_TOKEN), which only `/metrics` takes"
            }),
        );
    }
    doc
}

/// From a created sequence to the operations on it (for stateful clients).
fn links() -> Value {
    let mut links = Map::new();
    for op in ["next", "peek", "advance_to", "reset", "alter", "delete"] {
        links.insert(
            format!("{op}_created"),
            json!({ "operationId": op, "parameters": { "name": "$response.body#/name" } }),
        );
    }
    Value::Object(links)
}

/// From a created queue to the operations on it.
fn queue_links() -> Value {
    let mut links = Map::new();
    for op in [
        "take",
        "call",
        "recall",
        "finish",
        "cancel",
        "queue_alter",
        "queue_peek",
    ] {
        links.insert(
            format!("{op}_created"),
            json!({ "operationId": op, "parameters": { "name": "$response.body#/name" } }),
        );
    }
    Value::Object(links)
}

/// From a created gap-free sequence to the operations on it.
fn gapless_links() -> Value {
    let mut links = Map::new();
    for op in [
        "gapless_peek",
        "gapless_void",
        "gapless_release",
        "gapless_alter",
        "gapless_history",
        "gapless_delete",
    ] {
        links.insert(
            format!("{op}_created"),
            json!({ "operationId": op, "parameters": { "name": "$response.body#/name" } }),
        );
    }
    Value::Object(links)
}

/// `/metrics`: without a token, or with the service's metrics token (401 without it).
fn metrics_path(metrics_token: bool) -> Value {
    let mut path = json!({ "get": {
        "operationId": "metrics",
        "tags": ["ops"],
        "summary": "The service's metrics in the OpenMetrics text format (no token)",
        "security": [{}],
        "responses": {
            "200": {
                "description": "OpenMetrics text, ending in `# EOF`",
                "content": { "application/openmetrics-text; version=1.0.0; charset=utf-8": { "schema": { "type": "string" } } }
            },
            "400": error_response(400),
            "414": error_response(414),
            "431": error_response(431),
            "500": error_response(500)
        }
    }});
    if metrics_token {
        let get = &mut path["get"];
        get["summary"] = json!(
            "The service's metrics in the OpenMetrics text format (the service's metrics token)"
        );
        get["security"] = json!([{ "metrics_token": [] }]);
        get["responses"]["401"] = error_response(401);
    }
    path
}

fn openapi_path() -> Value {
    json!({ "get": {
        "operationId": "openapi",
        "tags": ["ops"],
        "summary": "This document (no token)",
        "security": [{}],
        "responses": {
            "200": {
                "description": "The OpenAPI 3.1 document",
                "content": { "application/json": { "schema": { "type": "object" } } }
            },
            "400": error_response(400),
            "414": error_response(414),
            "431": error_response(431)
        }
    }})
}

/// `GET /openapi.json`.
pub(super) async fn openapi(
    State(st): State<Shared>,
    Extension(metrics_token): Extension<MetricsToken>,
    prefix: Option<Extension<super::guard::Prefix>>,
) -> Json<Value> {
    let mut doc = document(st.max_count, metrics_token.is_set());
    // A mounted router's paths are under its prefix: the document's one server says so.
    if let Some(Extension(prefix)) = prefix
        && !prefix.0.is_empty()
    {
        doc["servers"] = json!([{ "url": &*prefix.0 }]);
    }
    Json(doc)
}
