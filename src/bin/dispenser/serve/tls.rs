//! TLS for the service (`--tls-cert`, `--tls-key`, `--tls-client-ca`): rustls with the ring
//! provider (the MongoDB driver's), HTTP/1.1 only.
//!
//! The configuration is built from the files at start and again on every reload (SIGHUP,
//! `reload.rs`): a new certificate and key written over the files are served to connections
//! accepted afterwards, while connections already open keep the session they made. A pair that
//! does not load — a file missing or unreadable, no certificate or key in it, a key that is
//! not the certificate's — is refused as a whole and the configuration in use is kept.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};

use dispenser::Error;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig, crypto};

/// The files the TLS configuration is read from.
#[derive(Clone, Debug)]
pub(super) struct TlsFiles {
    /// The certificate chain (PEM), the server's own certificate first.
    pub(super) cert: PathBuf,
    /// Its private key (PEM: PKCS #8, PKCS #1 or SEC1).
    pub(super) key: PathBuf,
    /// The certificate authorities client certificates must chain to (PEM); `None`: clients
    /// present none.
    pub(super) client_ca: Option<PathBuf>,
}

/// The service's TLS: the files and the configuration new connections get.
pub(super) struct Tls {
    files: TlsFiles,
    config: RwLock<Arc<ServerConfig>>,
}

impl Tls {
    /// Reads the files and builds the configuration.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the flag and the file that did not load.
    pub(super) fn load(files: TlsFiles) -> Result<Tls, Error> {
        let config = build(&files)?;
        Ok(Tls {
            files,
            config: RwLock::new(Arc::new(config)),
        })
    }

    /// The acceptor of a connection accepted now (the configuration in use).
    pub(super) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(Arc::clone(
            &self.config.read().unwrap_or_else(PoisonError::into_inner),
        ))
    }

    /// Reads the files again: on success, connections accepted from now on get the new
    /// configuration; on failure the one in use is kept.
    ///
    /// # Errors
    ///
    /// As [`Tls::load`].
    pub(super) fn reload(&self) -> Result<(), Error> {
        let config = build(&self.files)?;
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
        Ok(())
    }

    /// The files, as the log names them.
    pub(super) fn describe(&self) -> String {
        let mut out = format!(
            "certificate {}, key {}",
            self.files.cert.display(),
            self.files.key.display()
        );
        if let Some(ca) = &self.files.client_ca {
            out.push_str(&format!(", client CA {}", ca.display()));
        }
        out
    }
}

fn bad(flag: &str, reason: String) -> Error {
    Error::InvalidArgument {
        what: flag.to_owned(),
        reason,
    }
}

fn read(flag: &str, path: &PathBuf) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| bad(flag, format!("cannot read {}: {e}", path.display())))
}

/// The certificates of a PEM file (at least one).
fn certificates(flag: &str, path: &PathBuf) -> Result<Vec<CertificateDer<'static>>, Error> {
    let pem = read(flag, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            bad(
                flag,
                format!("{} is not a PEM certificate file: {e}", path.display()),
            )
        })?;
    if certs.is_empty() {
        return Err(bad(
            flag,
            format!(
                "{} holds no certificate (-----BEGIN CERTIFICATE-----)",
                path.display()
            ),
        ));
    }
    Ok(certs)
}

/// The configuration the files describe.
fn build(files: &TlsFiles) -> Result<ServerConfig, Error> {
    let chain = certificates("--tls-cert", &files.cert)?;
    let key_pem = read("--tls-key", &files.key)?;
    // The key's own text is never quoted: only the file and what is wrong with it.
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        bad(
            "--tls-key",
            format!(
                "{} holds no PEM private key (PKCS #8, PKCS #1 or SEC1): {e}",
                files.key.display()
            ),
        )
    })?;
    let provider = Arc::new(crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("--tls-cert", format!("TLS versions: {e}")))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for ca in certificates("--tls-client-ca", path)? {
                roots.add(ca).map_err(|e| {
                    bad(
                        "--tls-client-ca",
                        format!("{}: a certificate is not a usable CA: {e}", path.display()),
                    )
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| bad("--tls-client-ca", format!("{}: {e}", path.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        bad(
            "--tls-key",
            format!(
                "{} is not the key of the certificate in {}: {e}",
                files.key.display(),
                files.cert.display()
            ),
        )
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
