//! The pages people look at, served by `dispenser serve`: plain HTML, CSS and JavaScript
//! embedded in the binary (`include_str!`), no front-end build chain.
//!
//! - `/ui`: for operators — each queue's desks and what each serves, waiting, cancelled,
//!   today's counts, average and p90 wait, buttons to call next, recall and cancel from a
//!   desk, a chart of waiting per hour; every sequence (share used, left, rate, forecast,
//!   numbers held by the service's block clients) with a chart of numbers issued per hour;
//!   the gap-free sequences with their voids. Charts are SVG drawn by the page.
//! - `/ui/queues/{name}/kiosk`: one big "Take a ticket" button that shows the ticket, its
//!   position and estimated wait, printable; one ticket per tap (a request id per tap).
//! - `/ui/queues/{name}/board`, and `/ui/board?queues=a,b` for several queues: the current
//!   call large ("A-042 → Desk 3"), the last calls, how many wait and the estimated wait,
//!   live (see [`events`]), each call announced (a chime and speech, queued, once sound is
//!   switched on) and mirrored as text in an aria-live region.
//! - `/ui/queues/{name}/ticket`: the page a person keeps on their own phone, from the queue's
//!   ticket link or its QR code (which the board and the kiosk show): take a ticket, follow
//!   it live (see [`follow`]: how many are before it, the estimated wait), the call (the
//!   desk, the title, sound and vibration), give it up; a reload finds the same ticket.
//!
//! **How pages authenticate.** The pages themselves hold no data and need no token; the data
//! comes from the API (`/v1/overview`, `/v1/queues/{name}/take`, the board's event stream),
//! which needs a bearer token like every other call. A page asks for the token once (or
//! takes it from the address's fragment, `#token=…`, which browsers never send to a server),
//! keeps it in the tab's `sessionStorage` (gone when the tab closes), removes the fragment
//! from the address bar, and sends it as `Authorization: Bearer` — never in a URL, so it
//! appears in no access log or history. A 401 forgets it and asks again. Give each screen
//! a token of its own with only what it needs: a kiosk `take` on its queue, a board `peek`
//! on the queues it shows, an operator `list` (and `call` for the desk buttons). The ticket
//! page is the exception: its token is a ticket link's, public by design (it may only take
//! and follow tickets of its queue), kept in `localStorage` with the ticket so that the page
//! can be reopened.
//!
//! **Under a prefix.** A router mounted under a prefix (`Server::router` nested at
//! `/numbers`) serves its pages with the prefix written into them: before the paths of the
//! files they load, and in `<meta name="dispenser-base">`, which `common.js` puts before every
//! path the pages call or link to (`Dispenser.base`). At the root both are empty, and each
//! page is served as it is embedded.
//!
//! Every page is sent with a Content-Security-Policy that allows only this service's own
//! scripts, styles and API (no inline script, no other origin, no framing), and the scripts
//! put text into the page as text, never as HTML.

pub(super) mod events;
pub(super) mod follow;

use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};

use super::errors::ApiError;
use super::guard::Prefix;
use super::state::Shared;

const OVERVIEW_HTML: &str = include_str!("overview.html");
const KIOSK_HTML: &str = include_str!("kiosk.html");
const BOARD_HTML: &str = include_str!("board.html");
const TICKET_HTML: &str = include_str!("ticket.html");

/// The assets under `/ui/assets/`: name, content type, body.
const ASSETS: [(&str, &str, &str); 8] = [
    ("ui.css", "text/css; charset=utf-8", include_str!("ui.css")),
    (
        "common.js",
        "text/javascript; charset=utf-8",
        include_str!("common.js"),
    ),
    (
        "overview.js",
        "text/javascript; charset=utf-8",
        include_str!("overview.js"),
    ),
    (
        "kiosk.js",
        "text/javascript; charset=utf-8",
        include_str!("kiosk.js"),
    ),
    (
        "board.js",
        "text/javascript; charset=utf-8",
        include_str!("board.js"),
    ),
    (
        "announce.js",
        "text/javascript; charset=utf-8",
        include_str!("announce.js"),
    ),
    (
        "chart.js",
        "text/javascript; charset=utf-8",
        include_str!("chart.js"),
    ),
    (
        "ticket.js",
        "text/javascript; charset=utf-8",
        include_str!("ticket.js"),
    ),
];

/// What a page may load: this service's scripts, styles and API, nothing inline, no frames.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The routes of the pages (merged into the service's router).
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/ui", get(overview))
        .route("/ui/queues/{name}/kiosk", get(kiosk))
        .route("/ui/queues/{name}/board", get(board))
        .route("/ui/board", get(boards))
        .route("/ui/queues/{name}/events", get(events::events))
        .route("/ui/queues/{name}/ticket", get(ticket))
        .route(
            "/ui/queues/{name}/tickets/{serial}/events",
            get(follow::ticket_events),
        )
        .route("/ui/assets/{file}", get(asset))
}

/// `body` as `content_type`, with the headers every page and asset carries.
fn page(content_type: &'static str, body: impl IntoResponse) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

const HTML: &str = "text/html; charset=utf-8";

/// The mount prefix of a request, if any.
type Mounted = Option<Extension<Prefix>>;

/// An HTML page: as embedded at the root; under a prefix, with the prefix before the paths of
/// its files and in its `dispenser-base` meta tag (HTML-escaped: it comes from the request's
/// path).
fn html(body: &'static str, prefix: &Mounted) -> Response {
    let prefix = prefix.as_ref().map_or("", |p| &p.0.0);
    if prefix.is_empty() {
        return page(HTML, body);
    }
    let mut escaped = String::with_capacity(prefix.len());
    for c in prefix.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    let body = body
        .replace("\"/ui/assets/", &format!("\"{escaped}/ui/assets/"))
        .replace(
            "<meta name=\"dispenser-base\" content=\"\">",
            &format!("<meta name=\"dispenser-base\" content=\"{escaped}\">"),
        );
    page(HTML, body)
}

async fn overview(prefix: Mounted) -> Response {
    html(OVERVIEW_HTML, &prefix)
}

/// The kiosk of any queue: the page reads the name from its address.
async fn kiosk(prefix: Mounted, Path(_name): Path<String>) -> Response {
    html(KIOSK_HTML, &prefix)
}

/// The board of any queue: the page reads the name from its address.
async fn board(prefix: Mounted, Path(_name): Path<String>) -> Response {
    html(BOARD_HTML, &prefix)
}

/// The ticket page of any queue: the page reads the name from its address.
async fn ticket(prefix: Mounted, Path(_name): Path<String>) -> Response {
    html(TICKET_HTML, &prefix)
}

/// The board of several queues (`/ui/board?queues=a,b`): the page reads the names from its
/// address.
async fn boards(prefix: Mounted) -> Response {
    html(BOARD_HTML, &prefix)
}

async fn asset(Path(file): Path<String>) -> Result<Response, ApiError> {
    ASSETS
        .iter()
        .find(|(name, _, _)| *name == file)
        .map(|(_, content_type, body)| page(content_type, *body))
        .ok_or_else(|| {
            ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                "not_found",
                "no such asset",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under a prefix, a page loads its files and calls the API under it; at the root it is
    /// served as embedded.
    #[test]
    fn a_page_under_a_prefix_names_it_before_its_files_and_in_its_base() {
        let body = |r: Response| {
            let bytes = futures::executor::block_on(axum::body::to_bytes(r.into_body(), 1 << 20));
            String::from_utf8(bytes.unwrap().to_vec()).unwrap()
        };
        for page in [OVERVIEW_HTML, KIOSK_HTML, BOARD_HTML, TICKET_HTML] {
            assert_eq!(body(html(page, &None)), page);
            let under = body(html(page, &Some(Extension(Prefix("/n\"x".into())))));
            assert!(under.contains("<meta name=\"dispenser-base\" content=\"/n&quot;x\">"));
            assert!(!under.contains("\"/ui/"), "{under}");
            assert!(under.contains("src=\"/n&quot;x/ui/assets/common.js\""));
        }
    }

    /// The pages load only what is served, and put no data into the page as HTML.
    #[test]
    fn pages_load_only_served_assets_and_never_write_html() {
        for html in [OVERVIEW_HTML, KIOSK_HTML, BOARD_HTML, TICKET_HTML] {
            assert!(!html.contains("<script>"), "no inline script");
            for src in html
                .split("src=\"")
                .skip(1)
                .chain(html.split("href=\"").skip(1))
            {
                let url = &src[..src.find('"').unwrap()];
                if url == "data:," {
                    continue; // the empty icon: no request for /favicon.ico
                }
                let file = url
                    .strip_prefix("/ui/assets/")
                    .unwrap_or_else(|| panic!("{url}"));
                assert!(ASSETS.iter().any(|(n, _, _)| *n == file), "{url}");
            }
        }
        for (name, _, body) in ASSETS {
            for forbidden in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
            ] {
                assert!(!body.contains(forbidden), "{name} uses {forbidden}");
            }
            if name.ends_with(".js") {
                // No token in a URL, and never printed.
                assert!(!body.contains("?token"), "{name}");
                assert!(!body.contains("console.log"), "{name}");
            }
        }
    }
}
