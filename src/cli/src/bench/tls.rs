//! `bench --http` over TLS: the client configurations of the load — one that trusts exactly
//! the certificate the service started here serves (`--tls-cert`, pinned), one that trusts
//! the authorities of `--tls-ca` (a service at `--url https://…`).

use std::path::Path;
use std::sync::Arc;

use dispenser::Error;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::{self, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

fn bad(flag: &str, reason: String) -> Error {
    Error::InvalidArgument {
        what: flag.to_owned(),
        reason,
    }
}

/// The certificates of the PEM file `path` (at least one).
fn certificates(flag: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let pem = std::fs::read(path)
        .map_err(|e| bad(flag, format!("cannot read {}: {e}", path.display())))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(flag, format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(bad(
            flag,
            format!("{} holds no certificate", path.display()),
        ));
    }
    Ok(certs)
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(crypto::ring::default_provider())
}

fn config(
    build: impl FnOnce(
        tokio_rustls::rustls::ConfigBuilder<ClientConfig, tokio_rustls::rustls::WantsVerifier>,
    ) -> ClientConfig,
) -> Result<Arc<ClientConfig>, Error> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("--tls-cert", format!("TLS versions: {e}")))?;
    let mut config = build(builder);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A client that trusts exactly the first certificate of `cert` (the service's own).
pub(super) fn pinned(cert: &Path) -> Result<Arc<ClientConfig>, Error> {
    let expected = certificates("--tls-cert", cert)?.remove(0);
    let verifier = Arc::new(Pinned {
        expected,
        provider: provider(),
    });
    config(|b| {
        b.dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth()
    })
}

/// A client that trusts the authorities of `ca`.
pub(super) fn trusting(ca: &Path) -> Result<Arc<ClientConfig>, Error> {
    let mut roots = RootCertStore::empty();
    for c in certificates("--tls-ca", ca)? {
        roots.add(c).map_err(|e| {
            bad(
                "--tls-ca",
                format!("{}: not a usable authority: {e}", ca.display()),
            )
        })?;
    }
    config(|b| b.with_root_certificates(roots).with_no_client_auth())
}

/// The server name a client of `host` asks for.
pub(super) fn server_name(host: &str) -> Result<ServerName<'static>, Error> {
    ServerName::try_from(
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
    )
    .map_err(|e| bad("--url", format!("{host:?} is not a host name: {e}")))
}

/// Accepts exactly one certificate (whatever name it is asked under) and checks the
/// handshake's signatures against it.
#[derive(Debug)]
struct Pinned {
    expected: CertificateDer<'static>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, tokio_rustls::rustls::Error> {
        if end_entity.as_ref() == self.expected.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(tokio_rustls::rustls::Error::General(
                "not the certificate of --tls-cert".into(),
            ))
        }
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
            &self.provider.signature_verification_algorithms,
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
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
