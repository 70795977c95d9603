//! `GET /openapi.json`: the OpenAPI 3 description of the service, generated with `utoipa`
//! from the `#[utoipa::path]` annotations on the handlers (and `gapless.rs` when it exists),
//! built once per request (it is small), served without a token.

use axum::Json;
use serde_json::Value;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use super::handlers;

/// `{"numbers": […]}`, or for large counts `{"count", "runs": [{first, last, step, count}]}`.
#[derive(ToSchema)]
#[allow(dead_code)] // only described, never built: the handlers answer `serde_json::Value`
pub(super) struct Drawn {
    numbers: Option<Vec<i64>>,
    count: Option<u64>,
    runs: Option<Vec<Run>>,
}

/// A contiguous run of numbers, `step` apart.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct Run {
    first: i64,
    last: i64,
    step: i64,
    count: u64,
}

/// A sequence's state, as `peek`, `create`, `advance`, `reset` and `alter` answer it.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct Sequence {
    name: String,
    /// The last number issued.
    value: i64,
    /// The next number, `null` when a non-cyclic sequence is exhausted.
    next: Option<i64>,
    /// Numbers left before the wrap or exhaustion.
    remaining: u64,
    step: i64,
    min: i64,
    max: i64,
    cycle: bool,
    cycles: i64,
    /// Goes up by 1 on every write.
    version: i64,
    created_at: Option<String>,
    updated_at: Option<String>,
    format: Option<String>,
    /// The first number, as created (`null` for documents older than the field).
    start: Option<i64>,
    /// `{index, count}` on the stripes of a striped sequence.
    #[schema(value_type = Option<Object>)]
    stripe: Option<Value>,
    incarnation: Option<String>,
    /// Share used, remaining, rate, forecast, issued per UTC day.
    #[schema(value_type = Object)]
    usage: Value,
}

/// Every error answer: `{"error": {"kind", "message"}}`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct ErrorBody {
    error: ErrorDetail,
}

/// What went wrong: a stable `kind` (`invalid_input`, `no_such_sequence`, `exhausted`, …)
/// and a readable message.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct ErrorDetail {
    kind: String,
    message: String,
}

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
        handlers::next,
        handlers::create,
        handlers::list,
        handlers::peek,
        handlers::delete,
        handlers::advance,
        handlers::alter,
        handlers::reset,
        handlers::healthz,
    ),
    components(schemas(
        Drawn,
        Run,
        ErrorBody,
        ErrorDetail,
        Sequence,
        handlers::CreateBody,
        handlers::AlterBody,
        handlers::AdvanceBody,
        handlers::ResetBody
    )),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub(super) struct ApiDoc;

/// `GET /openapi.json`.
pub(super) async fn openapi() -> Json<Value> {
    Json(serde_json::to_value(ApiDoc::openapi()).unwrap_or(Value::Null))
}
