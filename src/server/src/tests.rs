//! Unit tests of the service's parts that need no server: tokens, permissions, scrubbing,
//! runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode, header};
use dispenser::{
    Dispenser,
    block::{BlockOptions, Pool},
};
use serde_json::json;

use super::draw::as_runs;
use super::metrics::Metrics;
use super::state::AppState;
use super::tokens::{MAX_TOKEN_LEN, Op, PaddedToken, TokenRule, parse_tokens};

fn tokens() -> Vec<TokenRule> {
    parse_tokens(
        r#"{"tokens": [
            {"name": "orders", "token": "orders-token-0123456789", "sequences": ["orders", "invoices@*"], "operations": ["next", "peek"]},
            {"name": "admin", "token": "admin-token-0123456789", "sequences": ["*"], "operations": ["next", "create", "peek", "list", "advance-to", "reset", "delete"]}
        ]}"#,
    )
    .unwrap()
}

async fn state() -> AppState {
    let dispenser = Dispenser::connect("mongodb://127.0.0.1:1", dispenser::Options::default())
        .await
        .unwrap();
    AppState {
        dispenser: dispenser.clone(),
        uri: "mongodb://app:pa55word-in-uri@127.0.0.1:1/".into(),
        tokens: super::tokens::Tokens::new(tokens()),
        pool: Pool::new(dispenser.clone(), BlockOptions::default()).unwrap(),
        max_count: 10,
        request_timeout: std::time::Duration::from_secs(30),
        slots: Mutex::new(HashMap::default()),
        retired: Mutex::new(HashMap::new()),
        metrics: Metrics::new(),
        metrics_max_sequences: 1000,
        queues: Default::default(),
        born: std::time::Instant::now(),
        links: Default::default(),
        origin: Default::default(),
    }
}

fn bearer(t: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::AUTHORIZATION, t.parse().unwrap());
    h
}

#[tokio::test]
async fn permissions_by_token_sequence_and_operation() {
    let st = state().await;
    let orders = bearer("Bearer orders-token-0123456789");
    assert!(st.authorize(&orders, Op::Next, Some("orders")).is_ok());
    assert!(
        st.authorize(&orders, Op::Next, Some("invoices@acme"))
            .is_ok()
    );
    let e = st
        .authorize(&orders, Op::Next, Some("payroll"))
        .err()
        .unwrap();
    assert_eq!(e.status, StatusCode::FORBIDDEN);
    let e = st
        .authorize(&orders, Op::Delete, Some("orders"))
        .err()
        .unwrap();
    assert_eq!(e.status, StatusCode::FORBIDDEN);
    let admin = bearer("Bearer admin-token-0123456789");
    assert!(st.authorize(&admin, Op::Delete, Some("payroll")).is_ok());
    for bad in [
        "",
        "Bearer ",
        "Basic b3JkZXJz",
        "Bearer wrong-token-0123456789",
        "orders-token-0123456789",
    ] {
        let e = st
            .authorize(&bearer(bad), Op::Next, Some("orders"))
            .err()
            .unwrap();
        assert_eq!(e.status, StatusCode::UNAUTHORIZED, "{bad:?}");
        assert!(
            !e.message.contains("token-0123"),
            "a token leaked: {}",
            e.message
        );
    }
    let e = st
        .authorize(&HeaderMap::new(), Op::Next, None)
        .err()
        .unwrap();
    assert_eq!(e.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let st = state().await;
    for good in [
        "Bearer orders-token-0123456789",
        "bearer orders-token-0123456789",
        "BEARER orders-token-0123456789",
        "Bearer \t orders-token-0123456789 ",
    ] {
        let rule = st.authenticate(&bearer(good)).map_err(|e| e.message);
        assert_eq!(
            rule.map(|r| r.name.clone()).as_deref(),
            Ok("orders"),
            "{good:?}"
        );
    }
    for bad in [
        "Bearerorders-token-0123456789",
        "Bearer",
        "Token orders-token-0123456789",
    ] {
        assert!(st.authenticate(&bearer(bad)).is_err(), "{bad:?}");
    }
}

#[test]
fn tokens_compare_over_a_fixed_length() {
    let real = PaddedToken::new(b"orders-token-0123456789");
    assert!(real.matches(&PaddedToken::new(b"orders-token-0123456789")));
    for other in [
        &b"orders-token-012345678"[..],
        b"orders-token-01234567890",
        b"orders-token-0123456789\0",
        b"",
        &[b'o'; MAX_TOKEN_LEN + 10],
    ] {
        assert!(!real.matches(&PaddedToken::new(other)), "{other:?}");
    }
    // Compared eight bytes at a time: a difference in any one byte, whichever word and
    // place in it, makes two tokens of the same length differ.
    let full = [b'k'; MAX_TOKEN_LEN];
    for i in 0..MAX_TOKEN_LEN {
        let mut other = full;
        other[i] ^= 1;
        assert!(
            !PaddedToken::new(&full).matches(&PaddedToken::new(&other)),
            "byte {i}"
        );
    }
    assert!(PaddedToken::new(&full).matches(&PaddedToken::new(&full)));
    // Longer than the limit: never equal to a shorter prefix of it.
    let long = [b'x'; MAX_TOKEN_LEN + 1];
    assert!(!PaddedToken::new(&long[..MAX_TOKEN_LEN]).matches(&PaddedToken::new(&long)));
    let e = parse_tokens(&format!(
        r#"{{"tokens": [{{"name": "a", "token": "{}", "sequences": ["*"], "operations": []}}]}}"#,
        "y".repeat(MAX_TOKEN_LEN + 1)
    ))
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("longer than 256"), "{e}");
}

#[tokio::test]
async fn error_messages_are_scrubbed_of_the_password_and_tokens() {
    let st = state().await;
    let out = st.scrub("sequence \"pa55word-in-uri\" and admin-token-0123456789 here");
    assert_eq!(out, "sequence \"***\" and *** here");
}

#[test]
fn lists_of_numbers_become_runs() {
    // As answered: the runs' JSON.
    let runs = |numbers: &[i64], step| serde_json::to_value(as_runs(numbers, step)).unwrap();
    assert_eq!(
        runs(&[8, 9, 0, 1, 2, 7], 1),
        json!([
            {"first": 8, "last": 9, "step": 1, "count": 2},
            {"first": 0, "last": 2, "step": 1, "count": 3},
            {"first": 7, "last": 7, "step": 1, "count": 1},
        ])
    );
    assert_eq!(
        runs(&[i64::MIN + 1, i64::MIN], -1),
        json!([{"first": i64::MIN + 1, "last": i64::MIN, "step": -1, "count": 2}])
    );
}

#[test]
fn token_files_are_checked_without_echoing_tokens() {
    for (bad, needle) in [
        ("{", "not a valid tokens document"),
        (r#"{"tokens": []}"#, "no tokens"),
        (
            r#"{"tokens": [{"name": "a", "token": "short", "sequences": ["*"], "operations": []}]}"#,
            "shorter than 16",
        ),
        (
            r#"{"tokens": [{"name": "a", "token": "0123456789abcdefg", "sequences": [], "operations": []}]}"#,
            "sequence patterns",
        ),
        (
            r#"{"tokens": [{"name": "a", "token": "0123456789abcdefg", "sequences": ["*"], "operations": ["fly"]}]}"#,
            "unknown operation \"fly\"",
        ),
        (
            r#"{"tokens": [{"name": "a", "token": "0123456789abcdefg", "sequences": ["*"], "operations": ["advance"]}]}"#,
            "`advance` is now spelled `advance-to`",
        ),
        (
            r#"{"tokens": [{"name": "a", "token": "0123456789abcdefg", "sequences": ["*"], "operations": [], "extra": 1}]}"#,
            "not a valid tokens document",
        ),
    ] {
        let err = parse_tokens(bad).err().unwrap().to_string();
        assert!(err.contains(needle), "{bad}: {err}");
        assert!(!err.contains("0123456789abcdefg"), "{err}");
    }
}

/// The glob fast paths (`*`, a plain name, `prefix*`) answer as the general matcher does, for
/// patterns and names drawn from a small alphabet with the wildcards in every position.
#[test]
fn globs_match_as_the_general_matcher_does() {
    use super::tokens::Glob;
    let alphabet = ['a', 'b', '*', '?', '@', 'é'];
    // Every string of up to 3 characters over the alphabet, as pattern and as name.
    let mut strings = vec![String::new()];
    let mut last = vec![String::new()];
    for _ in 0..3 {
        let next: Vec<String> = last
            .iter()
            .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
            .collect();
        strings.extend(next.iter().cloned());
        last = next;
    }
    let mut fast = 0;
    for pattern in strings.iter().filter(|p| !p.is_empty()) {
        let glob = Glob::new(pattern);
        if !matches!(glob, Glob::Pattern(_)) {
            fast += 1;
        }
        let general = wildmatch::WildMatch::new(pattern);
        for name in &strings {
            assert_eq!(
                glob.matches(name),
                general.matches(name),
                "pattern {pattern:?}, name {name:?} ({glob:?})"
            );
        }
    }
    assert!(fast > 50, "the fast paths were taken for {fast} patterns");
}

/// A token's operations are a set: each one it lists, no other.
#[test]
fn a_tokens_operations_are_exactly_those_it_lists() {
    use super::tokens::Ops;
    let all = [
        Op::Next,
        Op::Create,
        Op::Peek,
        Op::List,
        Op::Advance,
        Op::Reset,
        Op::Delete,
        Op::Alter,
        Op::Void,
        Op::Release,
        Op::History,
        Op::Take,
        Op::Call,
    ];
    for (i, listed) in all.iter().enumerate() {
        let mut ops = Ops::default();
        ops.insert(*listed);
        ops.insert(all[(i + 3) % all.len()]);
        for op in all {
            assert_eq!(
                ops.contains(op),
                op == *listed || op == all[(i + 3) % all.len()],
                "{listed:?}: {op:?}"
            );
        }
    }
}

/// Token rights are named by the acts they allow (issue 60): `release` for a gap-free release,
/// `history` for a history read. For one release `void` still allows a release and `peek` a
/// history read, each warning once, on its first use, naming the token and the operation to
/// add; a token that names the new operation (or never does the act) is never warned, and
/// one that lists neither gets no more than it lists.
#[test]
fn rights_are_named_by_their_acts_and_the_old_names_warn_on_first_use_for_one_release() {
    use super::tokens::parse_tokens;
    let rules = parse_tokens(
        r#"{"tokens": [
            {"name": "clerk", "token": "clerk-token-0123456789", "sequences": ["inv"], "operations": ["void", "peek"]},
            {"name": "ops", "token": "ops-token-0123456789", "sequences": ["inv"], "operations": ["release", "history"]},
            {"name": "both", "token": "both-token-0123456789", "sequences": ["inv"], "operations": ["void", "release", "peek", "history"]},
            {"name": "reader", "token": "reader-token-0123456789", "sequences": ["inv"], "operations": ["next"]}
        ]}"#,
    )
    .unwrap();
    let may = |i: usize, op: Op| rules[i].operations.contains(op);
    assert!(may(0, Op::Release) && may(0, Op::History) && may(0, Op::Void));
    assert!(may(1, Op::Release) && may(1, Op::History));
    assert!(
        !may(1, Op::Void) && !may(1, Op::Peek),
        "release and history allow only themselves"
    );
    assert!(!may(3, Op::Release) && !may(3, Op::History));
    // The clerk's acts through the old names: each warned of once.
    let release = rules[0].warn_implied(Op::Release).expect("a warning");
    assert!(
        release.contains("\"clerk\"") && release.contains("add \"release\""),
        "{release}"
    );
    assert_eq!(rules[0].warn_implied(Op::Release), None);
    let history = rules[0].warn_implied(Op::History).expect("a warning");
    assert!(history.contains("add \"history\""), "{history}");
    assert_eq!(rules[0].warn_implied(Op::Void), None);
    for (i, op) in [
        (1, Op::Release),
        (1, Op::History),
        (2, Op::Release),
        (2, Op::History),
    ] {
        assert_eq!(rules[i].warn_implied(op), None, "{}", rules[i].name);
    }
}

/// `bearer_token` reads the bytes of the header as `HeaderValue::to_str` and `str::trim`
/// would: the same token, or none, for every value over an alphabet of the scheme's letters
/// in both cases, spaces, tabs, a control and non-ASCII bytes.
#[test]
fn bearer_tokens_are_read_as_the_text_would_be() {
    use super::auth::bearer_token;
    fn by_text(value: &axum::http::HeaderValue) -> Option<&str> {
        let value = value.to_str().ok()?.trim();
        let (scheme, rest) = value.split_once([' ', '\t'])?;
        let token = rest.trim();
        (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
    }
    let pieces: [&[u8]; 9] = [
        b"Bearer",
        b"bEaReR",
        b"bear",
        b" ",
        b"\t",
        b"tok",
        b"\x7f",
        "é".as_bytes(),
        b"\x01",
    ];
    let mut values: Vec<Vec<u8>> = vec![Vec::new()];
    let mut last = values.clone();
    for _ in 0..4 {
        let next: Vec<Vec<u8>> = last
            .iter()
            .flat_map(|v| pieces.iter().map(move |p| [v.as_slice(), p].concat()))
            .collect();
        values.extend(next.iter().cloned());
        last = next;
    }
    let mut tokens = 0;
    for v in &values {
        let Ok(value) = axum::http::HeaderValue::from_bytes(v) else {
            continue;
        };
        let expected = by_text(&value);
        tokens += usize::from(expected.is_some());
        assert_eq!(bearer_token(&value), expected, "{v:?}");
    }
    assert!(tokens > 100, "{tokens} values carried a token");
}

/// A reload keeps a token whose entry is unchanged (the same token: its streams go on),
/// revokes one removed or changed, and puts the new ones in use (issue 39).
#[test]
fn a_reload_revokes_only_the_tokens_it_removes_or_changes() {
    let table = super::tokens::Tokens::new(tokens());
    let before = table.current();
    let (orders, admin) = (Arc::clone(&before[0]), Arc::clone(&before[1]));
    let (orders_revoked, admin_revoked) = (orders.revoked(), admin.revoked());
    let replaced = table.replace(
        parse_tokens(
            r#"{"tokens": [
                {"name": "orders", "token": "orders-token-0123456789", "sequences": ["orders", "invoices@*"], "operations": ["next", "peek"]},
                {"name": "admin", "token": "admin-token-0123456789", "sequences": ["*"], "operations": ["next"]},
                {"name": "kiosk", "token": "kiosk-token-0123456789", "sequences": ["lobby"], "operations": ["take"]}
            ]}"#,
        )
        .unwrap(),
    );
    assert_eq!(replaced.kept, ["orders"]);
    assert_eq!(replaced.added, ["admin", "kiosk"]);
    assert_eq!(replaced.removed, ["admin"]);
    assert!(!*orders_revoked.borrow());
    assert!(*admin_revoked.borrow());
    let after = table.current();
    assert!(Arc::ptr_eq(&after[0], &orders));
    let find = |t: &str| table.find(&PaddedToken::new(t.as_bytes()));
    assert!(find("kiosk-token-0123456789").is_some());
    assert!(
        !find("admin-token-0123456789")
            .unwrap()
            .operations
            .contains(Op::Create)
    );
}

/// A ticket link's token may take on its one queue (its name as it is, not a glob) and nothing
/// else; its entry is checked, naming the token and the field, never echoing the token.
#[test]
fn a_ticket_link_may_only_take_on_its_one_queue() {
    use super::tokens::{LIMIT_WINDOW_S, TAKES_PER_ADDRESS, TAKES_PER_PHONE};
    let rules = parse_tokens(
        r#"{"tokens": [
            {"name": "phones", "token": "phones-token-0123456789", "ticket_link": {"queue": "lobby*"}},
            {"name": "tight", "token": "tight-token-0123456789", "ticket_link": {"queue": "hall", "takes_per_phone": 1, "takes_per_address": 5, "per_seconds": 600}}
        ]}"#,
    )
    .unwrap();
    let phones = &rules[0];
    let link = phones.link.as_ref().unwrap();
    assert_eq!(
        (
            link.queue.as_str(),
            link.per_phone,
            link.per_address,
            link.window.as_secs()
        ),
        ("lobby*", TAKES_PER_PHONE, TAKES_PER_ADDRESS, LIMIT_WINDOW_S)
    );
    let tight = rules[1].link.as_ref().unwrap();
    assert_eq!(
        (tight.per_phone, tight.per_address, tight.window.as_secs()),
        (1, 5, 600)
    );
    assert!(AppState::permit_on(phones, Op::Take, Some("lobby*"), "queue").is_ok());
    // The `*` is a character of the queue's name, not a glob.
    assert!(AppState::permit_on(phones, Op::Take, Some("lobby-b"), "queue").is_err());
    for op in [
        Op::Peek,
        Op::Call,
        Op::List,
        Op::Next,
        Op::Create,
        Op::Delete,
        Op::Alter,
    ] {
        assert!(
            AppState::permit_on(phones, op, Some("lobby*"), "queue").is_err(),
            "{op:?}"
        );
    }
    assert!(phones.patterns().is_empty(), "a link lists nothing");
    for (bad, needle) in [
        (
            r#"{"name": "a", "token": "0123456789abcdefg", "sequences": ["*"], "operations": ["take"], "ticket_link": {"queue": "q"}}"#,
            "token \"a\" is a ticket link",
        ),
        (
            r#"{"name": "a", "token": "0123456789abcdefg"}"#,
            "needs \"sequences\" (name globs) and \"operations\", or a \"ticket_link\"",
        ),
        (
            r#"{"name": "a", "token": "0123456789abcdefg", "ticket_link": {"queue": ""}}"#,
            "ticket_link.queue \"\" is not a queue name",
        ),
        (
            r#"{"name": "a", "token": "0123456789abcdefg", "ticket_link": {"queue": "q", "takes_per_phone": 0}}"#,
            "ticket_link.takes_per_phone 0 must be from 1 to 10000",
        ),
        (
            r#"{"name": "a", "token": "0123456789abcdefg", "ticket_link": {"queue": "q", "per_seconds": 86401}}"#,
            "ticket_link.per_seconds 86401 must be from 1 to 86400",
        ),
        (
            r#"{"name": "a", "token": "0123456789abcdefg", "ticket_link": {"queue": "q", "per_phone": 1}}"#,
            "not a valid tokens document",
        ),
    ] {
        let doc = format!(r#"{{"tokens": [{bad}]}}"#);
        let err = parse_tokens(&doc).err().unwrap().to_string();
        assert!(err.contains(needle), "{bad}: {err}");
        assert!(!err.contains("0123456789abcdefg"), "{err}");
    }
}
