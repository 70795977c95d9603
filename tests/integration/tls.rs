//! `serve --tls-cert/--tls-key` (issue 39): HTTPS only on its port, the pages, streams and
//! `/metrics` over it, the certificate reloaded on SIGHUP for new connections while open ones
//! go on, a bad pair refused with one line, and client certificates (`--tls-client-ca`) in
//! addition to tokens. The certificates are made here (rcgen).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::{Value, json};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::pki_types::UnixTime;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{
    ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme, crypto,
};

use crate::common;
use crate::serve::{ADMIN, BOARD, ORDERS, Service};

/// A certificate authority made for a test.
pub(crate) struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate and its key, in PEM.
pub(crate) struct Pair {
    pub(crate) cert: String,
    pub(crate) key: String,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    fn leaf(&self, names: &[&str], purpose: ExtendedKeyUsagePurpose) -> Pair {
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![purpose];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Pair {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    /// A server certificate for `localhost` valid from `from` to `to` (year, month, day).
    fn server_valid(&self, from: (i32, u8, u8), to: (i32, u8, u8)) -> Pair {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
        params.not_after = rcgen::date_time_ymd(to.0, to.1, to.2);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Pair {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    /// A server certificate for `localhost` and `127.0.0.1`.
    pub(crate) fn server(&self) -> Pair {
        self.leaf(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate named `name`.
    pub(crate) fn client(&self, name: &str) -> Pair {
        self.leaf(&[name], ExtendedKeyUsagePurpose::ClientAuth)
    }

    pub(crate) fn pem(&self) -> &str {
        &self.pem
    }
}

/// A directory of its own for a test's files.
pub(crate) fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(common::unique(test));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `pair` to `dir/server.pem` and `dir/server.key`; returns their paths.
pub(crate) fn write_pair(dir: &Path, pair: &Pair) -> (String, String) {
    let cert = dir.join("server.pem");
    let key = dir.join("server.key");
    std::fs::write(&cert, &pair.cert).unwrap();
    std::fs::write(&key, &pair.key).unwrap();
    (
        cert.to_string_lossy().into_owned(),
        key.to_string_lossy().into_owned(),
    )
}

/// A client configuration trusting `roots` (PEM), presenting `identity` when given.
pub(crate) fn client_config(roots: &[&str], identity: Option<&Pair>) -> Arc<ClientConfig> {
    let mut store = RootCertStore::empty();
    for pem in roots {
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            store.add(cert.unwrap()).unwrap();
        }
    }
    let builder = ClientConfig::builder_with_provider(Arc::new(crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some(p) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(p.cert.as_bytes())
                    .map(Result::unwrap)
                    .collect(),
                PrivateKeyDer::from_pem_slice(p.key.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    Arc::new(config)
}

/// An HTTPS connection: its request sender and the certificate the server presented.
pub(crate) struct Https {
    sender: SendRequest<Full<Bytes>>,
    pub(crate) served: CertificateDer<'static>,
}

/// Connects to `addr` over TLS (server name `localhost`).
pub(crate) async fn connect(addr: &str, config: &Arc<ClientConfig>) -> std::io::Result<Https> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let tls = TlsConnector::from(Arc::clone(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await?;
    let served = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(conn);
    Ok(Https { sender, served })
}

impl Https {
    /// Sends a request; the answer's head and body stream.
    pub(crate) async fn send(
        &mut self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Result<hyper::Response<Incoming>, hyper::Error> {
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "localhost");
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let body = match body {
            Some(b) => {
                req = req.header("content-type", "application/json");
                Full::new(Bytes::from(b.to_string()))
            }
            None => Full::new(Bytes::new()),
        };
        self.sender.ready().await?;
        self.sender.send_request(req.body(body).unwrap()).await
    }

    /// Sends a request and reads its whole answer: the status and the body (JSON when it
    /// is, else a string).
    pub(crate) async fn call(
        &mut self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Result<(u16, Value), hyper::Error> {
        let resp = self.send(method, path, token, body).await?;
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await?.to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        Ok((
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        ))
    }
}

/// Reads `body` until it has carried one more `event: status` (within `wait`).
pub(crate) async fn next_event(body: &mut Incoming, wait: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + wait;
    let mut seen = String::new();
    loop {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    seen.push_str(&String::from_utf8_lossy(data));
                    if seen.contains("event: status") {
                        return true;
                    }
                }
            }
            _ => return false,
        }
    }
}

/// Sends SIGHUP to the service.
pub(crate) fn hang_up(svc: &Service) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &svc.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The service's `host:port`.
pub(crate) fn addr_of(svc: &Service) -> String {
    svc.base
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .to_owned()
}

/// `serve --tls-cert/--tls-key` prints an https URL and answers only TLS: draws, `/metrics`
/// and a board's event stream work over it, while plain HTTP on the port gets no HTTP answer.
/// A new certificate and key written over the files are served after SIGHUP to new
/// connections (a client trusting only the old authority is refused, one trusting the new is
/// served), while a stream opened before goes on; then a certificate written with a key that
/// is not its own is refused on the next SIGHUP with one line on stderr, and the certificate
/// in use stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_only_with_the_certificate_reloaded_on_sighup() {
    let dir = scratch("tls");
    let (ca1, ca2, ca3) = (Ca::new("ca one"), Ca::new("ca two"), Ca::new("ca three"));
    let first = ca1.server();
    let (cert, key) = write_pair(&dir, &first);
    let svc = Service::start_args(
        "tls",
        &common::uri(),
        &["--tls-cert", &cert, "--tls-key", &key],
    );
    assert!(svc.base.starts_with("https://127.0.0.1:"), "{}", svc.base);
    let addr = addr_of(&svc);
    let old = client_config(&[ca1.pem()], None);

    let mut c = connect(&addr, &old).await.unwrap();
    assert_eq!(
        (c.call("GET", "/healthz", None, None).await.unwrap()).0,
        200
    );
    let (status, body) = c
        .call(
            "POST",
            "/v1/sequences",
            Some(ADMIN),
            Some(json!({ "name": "orders" })),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{body}");
    let (status, body) = c
        .call("POST", "/v1/sequences/orders/next", Some(ORDERS), None)
        .await
        .unwrap();
    assert_eq!((status, &body["numbers"]), (200, &json!([1])), "{body}");
    let (status, metrics) = c.call("GET", "/metrics", None, None).await.unwrap();
    assert_eq!(status, 200);
    assert!(
        metrics
            .as_str()
            .unwrap()
            .contains("dispenser_numbers_issued_total"),
        "{metrics}"
    );
    let (status, page) = c.call("GET", "/ui", None, None).await.unwrap();
    assert_eq!(status, 200, "{page}");
    let (status, body) = c
        .call(
            "POST",
            "/v1/queues",
            Some(ADMIN),
            Some(json!({ "name": "lobby" })),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{body}");
    // A board's stream, on a connection of its own, kept across the reloads.
    let mut board = connect(&addr, &old).await.unwrap();
    let resp = board
        .send("GET", "/ui/queues/lobby/events", Some(BOARD), None)
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut events = resp.into_body();
    assert!(next_event(&mut events, Duration::from_secs(5)).await);

    // Plain HTTP on the TLS port: no HTTP answer (at most a TLS alert), then the close.
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut plain = tokio::net::TcpStream::connect(&addr).await.unwrap();
        plain
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), plain.read_to_end(&mut got)).await;
        assert!(read.is_ok(), "plain HTTP: the connection stayed open");
        let text = String::from_utf8_lossy(&got);
        assert!(
            !text.contains("HTTP/") && got.len() < 64,
            "plain HTTP got an answer: {text:?}"
        );
    }

    // A new pair over the files, then SIGHUP.
    let second = ca2.server();
    write_pair(&dir, &second);
    hang_up(&svc);
    let new = client_config(&[ca2.pem()], None);
    let asked = Instant::now();
    let mut fresh = loop {
        if let Ok(c) = connect(&addr, &new).await {
            break c;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "the new certificate was not served within 10 s of SIGHUP"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let second_der = CertificateDer::pem_slice_iter(second.cert.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(fresh.served, second_der);
    assert!(
        connect(&addr, &old).await.is_err(),
        "a client trusting only the old authority was still served"
    );
    let (status, body) = fresh
        .call("POST", "/v1/queues/lobby/take", Some(ADMIN), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        next_event(&mut events, Duration::from_secs(5)).await,
        "the stream opened before the reload saw no event after it"
    );
    // The connection opened before the reload still answers too.
    assert_eq!(c.call("GET", "/healthz", None, None).await.unwrap().0, 200);

    // A certificate with a key that is not its own: refused, the second pair stays.
    let third = ca3.server();
    std::fs::write(dir.join("server.pem"), &third.cert).unwrap();
    std::fs::write(dir.join("server.key"), ca3.server().key).unwrap();
    hang_up(&svc);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut after = connect(&addr, &new).await.unwrap();
    assert_eq!(after.served, second_der);
    assert_eq!(
        after.call("GET", "/healthz", None, None).await.unwrap().0,
        200
    );
    assert!(
        connect(&addr, &client_config(&[ca3.pem()], None))
            .await
            .is_err()
    );

    drop((c, fresh, after, board, events));
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
    let refused: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("TLS not reloaded"))
        .collect();
    assert_eq!(refused.len(), 1, "{stderr}");
    assert!(refused[0].contains("--tls-key"), "{}", refused[0]);
    assert!(!stderr.contains("PRIVATE KEY"), "{stderr}");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("TLS reloaded"))
            .count(),
        1,
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// `--tls-client-ca`: a client without a certificate, or with one of another authority, is
/// refused; one with a certificate of the authority is served — and still needs its token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_in_addition_to_tokens() {
    let dir = scratch("tls_clients");
    let (ca, clients, other) = (Ca::new("server ca"), Ca::new("clients"), Ca::new("other"));
    let (cert, key) = write_pair(&dir, &ca.server());
    let client_ca = dir.join("clients.pem");
    std::fs::write(&client_ca, clients.pem()).unwrap();
    let svc = Service::start_args(
        "tls_clients",
        &common::uri(),
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-client-ca",
            client_ca.to_str().unwrap(),
        ],
    );
    let addr = addr_of(&svc);
    // TLS 1.3: a refused client certificate shows on the first request, not the handshake.
    async fn refused(addr: &str, config: &Arc<ClientConfig>) -> bool {
        match connect(addr, config).await {
            Err(_) => true,
            Ok(mut c) => c.call("GET", "/healthz", None, None).await.is_err(),
        }
    }
    assert!(
        refused(&addr, &client_config(&[ca.pem()], None)).await,
        "a client without a certificate was served"
    );
    assert!(
        refused(
            &addr,
            &client_config(&[ca.pem()], Some(&other.client("intruder")))
        )
        .await,
        "a client with a certificate of another authority was served"
    );
    let mut kiosk = connect(
        &addr,
        &client_config(&[ca.pem()], Some(&clients.client("kiosk-7"))),
    )
    .await
    .unwrap();
    let (status, body) = kiosk
        .call("GET", "/v1/sequences", Some(ADMIN), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, body) = kiosk
        .call("GET", "/v1/sequences", None, None)
        .await
        .unwrap();
    assert_eq!(status, 401, "{body}");
    drop(kiosk);
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A certificate or key that does not load stops `serve` at start, naming the flag and the
/// file, never quoting the key.
#[test]
fn a_bad_certificate_or_key_is_refused_at_start() {
    common::ready();
    let dir = scratch("tls_bad");
    let ca = Ca::new("ca");
    let (cert, key) = write_pair(&dir, &ca.server());
    let other_key = dir.join("other.key");
    std::fs::write(&other_key, ca.server().key).unwrap();
    let not_pem = dir.join("not.pem");
    std::fs::write(&not_pem, "hello").unwrap();
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "--tls-cert",
                &cert,
                "--tls-key",
                other_key.to_str().unwrap(),
            ],
            "--tls-key",
        ),
        (
            &["--tls-cert", not_pem.to_str().unwrap(), "--tls-key", &key],
            "--tls-cert",
        ),
        (&["--tls-cert", &cert], "--tls-key"),
    ];
    for (args, flag) in cases {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
            .env("MONGODB_URI", common::uri())
            .env(
                "DISPENSER_TOKENS",
                json!({"tokens": [{"name": "a", "token": ADMIN, "sequences": ["*"], "operations": ["next"]}]})
                    .to_string(),
            )
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(!stderr.contains("PRIVATE KEY"), "{stderr}");
        assert!(out.stdout.is_empty(), "{args:?} printed a URL");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// `bench --http --tls-cert/--tls-key` measures the service over HTTPS beside the same
/// service over plain HTTP and the floor, every request answered with one number, none twice;
/// `--url https://…` with `--tls-ca` measures a service over TLS elsewhere.
#[test]
fn bench_http_runs_over_tls() {
    common::ready();
    let dir = scratch("tls_bench");
    let ca = Ca::new("bench ca");
    let (cert, key) = write_pair(&dir, &ca.server());
    let bench = |extra: &[&str], collection: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
            .env("MONGODB_URI", common::uri())
            .args(["--db", crate::common::DB, "--collection", collection])
            .args(["bench", "--http", "--connections", "2", "--count", "200"])
            .args(["--rounds", "2", "--warmup", "10", "--json"])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["runs"].as_array().unwrap().clone()
    };
    let runs = bench(
        &["--tls-cert", &cert, "--tls-key", &key],
        &common::unique("tls_bench"),
    );
    let labels: Vec<&str> = runs.iter().map(|r| r["run"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        [
            "service over HTTPS (TLS)",
            "service over HTTP",
            "floor (same stack, constant)"
        ]
    );
    assert!(runs[0]["url"].as_str().unwrap().starts_with("https://"));
    assert!(runs[1]["url"].as_str().unwrap().starts_with("http://"));
    for run in &runs {
        assert_eq!(
            (run["requests"].as_u64(), run["numbers"].as_u64()),
            (Some(200), Some(200)),
            "{run}"
        );
        assert_eq!(
            (run["errors"].as_u64(), run["duplicates"].as_u64()),
            (Some(0), Some(0)),
            "{run}"
        );
    }

    let svc = Service::start_args(
        "tls_bench_url",
        &common::uri(),
        &["--tls-cert", &cert, "--tls-key", &key],
    );
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let runs = bench(
        &[
            "--url",
            &svc.base.replace("127.0.0.1", "localhost"),
            "--token",
            ADMIN,
            "--tls-ca",
            ca_file.to_str().unwrap(),
        ],
        &svc.collection,
    );
    assert_eq!(runs.len(), 2);
    assert!(
        runs[0]["url"]
            .as_str()
            .unwrap()
            .starts_with("https://localhost:")
    );
    assert_eq!(runs[0]["errors"], 0, "{}", runs[0]);
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A server certificate verifier that accepts any certificate (its signatures still checked):
/// to see which certificate a service serves when no client would trust it.
#[derive(Debug)]
struct AnyCertificate(Arc<crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, tokio_rustls::rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A client configuration that accepts any server certificate ([`AnyCertificate`]).
fn any_certificate() -> Arc<ClientConfig> {
    let provider = Arc::new(crypto::ring::default_provider());
    Arc::new(
        ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
    )
}

/// Waits (10 s at most) until the service at `addr` serves the certificate of `pair`.
async fn served(addr: &str, pair: &Pair) {
    let any = any_certificate();
    let want = CertificateDer::pem_slice_iter(pair.cert.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    let asked = Instant::now();
    loop {
        if let Ok(c) = connect(addr, &any).await
            && c.served == want
        {
            return;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "the new certificate was not served within 10 s of SIGHUP"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A token added to the tokens file by a reload.
const EXTRA: &str = "extra-token-for-tests-00005";

/// Waits (10 s at most) until `GET /v1/sequences/none` with [`EXTRA`] answers `status` (404:
/// the token is in use; 401: it is not), over a connection that accepts any certificate.
async fn extra_answers(addr: &str, status: u16) {
    let any = any_certificate();
    let asked = Instant::now();
    loop {
        let mut c = connect(addr, &any).await.unwrap();
        let (got, _) = c
            .call("GET", "/v1/sequences/none", Some(EXTRA), None)
            .await
            .unwrap();
        if got == status {
            return;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "the tokens were not reloaded within 10 s of SIGHUP ({got})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sets the mode of `path` (permission bits).
fn chmod(path: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Regression (issue 49, item 10): a TLS key or tokens file other users may read was used
/// without a word, and a certificate that had expired or was not valid yet was served without
/// one (clients refuse it). Each is still served, with a warning naming the file (and the
/// certificate's dates) at start and on every SIGHUP; a valid certificate and private files get
/// none. The files: at start an expired certificate and a key of mode 0644 (the tokens file is
/// private); then a certificate not valid before 2090, a private key, tokens of mode 0644; then
/// a valid certificate and every file private.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_secrets_and_out_of_date_certificates_are_warned_of_at_start_and_on_reload() {
    let dir = scratch("tls_warnings");
    let ca = Ca::new("ca warnings");
    let expired = ca.server_valid((2020, 1, 1), (2021, 1, 1));
    let (cert, key) = write_pair(&dir, &expired);
    chmod(&key, 0o644);
    let svc = Service::start_args(
        "tls_warnings",
        &common::uri(),
        &["--tls-cert", &cert, "--tls-key", &key],
    );
    let addr = addr_of(&svc);
    let tokens = svc.tokens_path().to_string_lossy().into_owned();
    served(&addr, &expired).await;

    // Each reload is seen done when its certificate is served and its tokens answer (the
    // warnings are found before either is put in use).
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&tokens).unwrap()).unwrap();
    let mut more = written.clone();
    more["tokens"].as_array_mut().unwrap().push(json!({
        "name": "extra", "token": EXTRA, "sequences": ["*"], "operations": ["peek"]
    }));
    let early = ca.server_valid((2090, 1, 1), (2091, 1, 1));
    write_pair(&dir, &early);
    chmod(&key, 0o600);
    std::fs::write(&tokens, more.to_string()).unwrap();
    chmod(&tokens, 0o644);
    hang_up(&svc);
    served(&addr, &early).await;
    extra_answers(&addr, 404).await;

    let valid = ca.server();
    write_pair(&dir, &valid);
    chmod(&key, 0o600);
    std::fs::write(&tokens, written.to_string()).unwrap();
    chmod(&tokens, 0o600);
    hang_up(&svc);
    served(&addr, &valid).await;
    extra_answers(&addr, 401).await;

    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning:")).collect();
    let expected = [
        format!(
            "dispenser: warning: the certificate in {cert} expired on 2021-01-01T00:00:00Z (valid from 2020-01-01T00:00:00Z to 2021-01-01T00:00:00Z): clients will refuse it"
        ),
        format!(
            "dispenser: warning: the TLS key (--tls-key) {key} can be read or changed by other users of this machine (mode 0644); make it private: chmod 600 {key}"
        ),
        format!(
            "dispenser: SIGHUP: warning: the certificate in {cert} is not valid before 2090-01-01T00:00:00Z (valid from 2090-01-01T00:00:00Z to 2091-01-01T00:00:00Z; this machine's clock says "
        ),
        format!(
            "dispenser: SIGHUP: warning: the tokens file (--tokens) {tokens} can be read or changed by other users of this machine (mode 0644); make it private: chmod 600 {tokens}"
        ),
    ];
    assert_eq!(warnings.len(), expected.len(), "{stderr}");
    for (got, want) in warnings.iter().zip(&expected) {
        assert!(got.starts_with(want.as_str()), "{got}\nwanted {want}…");
    }
    let _ = std::fs::remove_dir_all(dir);
}
