//! A board stream whose client stops reading (issue 37, found 7): the service closes a
//! connection that makes no write progress for 30 s, so a stuck stream gives its place back
//! and a real board gets a stream again.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::common;
use crate::serve::{ADMIN, BOARD, Service, send, stream_request};

/// A connection to `addr` with a 4 KiB receive buffer that sends the stream request of
/// `queue` and then never reads a byte.
async fn stuck_stream(addr: &str, queue: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut c = socket.connect(addr.parse().unwrap()).await.unwrap();
    c.write_all(stream_request(queue, BOARD).as_bytes())
        .await
        .unwrap();
    c
}

/// The status of a fresh stream request of `queue` with the board's token (the connection
/// is dropped at once).
async fn stream_status(addr: &str, queue: &str) -> u16 {
    let (_, status, _) = tokio::time::timeout(
        Duration::from_secs(5),
        crate::serve::raw_answer(addr, &stream_request(queue, BOARD)),
    )
    .await
    .expect("a stream request got no answer within 5 s");
    status
}

/// Two board streams whose clients (4 KiB receive buffers) never read, then takes and calls
/// through the service until the streams' writes stop making progress: within 30 s of that
/// (180 s here from the first call, for a loaded machine; a stream otherwise lives 10 minutes)
/// the service has closed them, so the board's token (`--max-streams-per-token 2`) gets a
/// stream again. Before the fix both stayed open (the
/// stream's 10-minute limit was checked only when the stream was polled, which a blocked
/// socket never lets happen) and every new board got 429 until the service was restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_client_stops_reading_is_closed_and_its_place_comes_back() {
    let svc = Service::start_args(
        "stalled_stream",
        &common::uri(),
        &["--max-streams-per-token", "2"],
    );
    let addr = svc.base.trim_start_matches("http://").to_owned();
    let http = reqwest::Client::new();
    let (status, body) = send(
        http.post(svc.url("/v1/queues"))
            .bearer_auth(ADMIN)
            .json(&json!({ "name": "lobby", "max": 999_999 })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // A long line: every status event lists 50 waiting tickets (several KiB each).
    let (status, body) = send(
        http.post(svc.url("/v1/queues/lobby/take"))
            .bearer_auth(ADMIN)
            .json(&json!({ "count": 60 })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let stuck = [
        stuck_stream(&addr, "lobby").await,
        stuck_stream(&addr, "lobby").await,
    ];
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        stream_status(&addr, "lobby").await,
        429,
        "the two stuck streams should hold the token's places"
    );
    // Every take and call changes the status: an event for each stream. The calls go on
    // until a new board stream is answered: how many events fill a stuck connection's buffers
    // depends on how many the stream coalesces (more on a loaded machine), so the load stops
    // only once the places came back — within 30 s of the writes' last progress.
    let started = Instant::now();
    let bound = Duration::from_secs(180);
    let mut calls = 0;
    loop {
        for _ in 0..50 {
            for op in ["take", "call"] {
                let (status, body) = send(
                    http.post(svc.url(&format!("/v1/queues/lobby/{op}")))
                        .bearer_auth(ADMIN),
                )
                .await;
                assert_eq!(status, 200, "{op} {calls}: {body}");
            }
            calls += 1;
        }
        match stream_status(&addr, "lobby").await {
            200 => break,
            429 => {}
            other => panic!("a new board stream was answered {other}"),
        }
        assert!(
            started.elapsed() < bound,
            "the streams of clients that stopped reading were still open {:?} after the calls \
             began ({calls} takes and calls; a stream lives 10 minutes at most, a stall 30 s)",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!(
        "the stuck streams were closed; a new board got a stream {:?} after the calls began ({calls} takes and calls)",
        started.elapsed()
    );
    drop(stuck);
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}
