//! TLS for the service (`--tls-cert`, `--tls-key`, `--tls-client-ca`): rustls with the ring
//! provider (the MongoDB driver's), HTTP/1.1 only.
//!
//! The configuration is built from the files at start and again on every reload (SIGHUP,
//! `reload.rs`): a new certificate and key written over the files are served to connections
//! accepted afterwards, while connections already open keep the session they made. A pair that
//! does not load — a file missing or unreadable, no certificate or key in it, a key that is
//! not the certificate's — is refused as a whole and the configuration in use is kept.
//!
//! What loads but is wrong is served, with a warning at start and on every reload: a
//! certificate that expired or is not valid yet (by this machine's clock; the file and the
//! dates are named — clients will refuse it), and a key file other users may read (as ssh
//! warns of a private key open to them).

use std::path::{Path, PathBuf};
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
    /// Reads the files and builds the configuration; also what is wrong with files that
    /// loaded (see the module's documentation), one warning a line.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the flag and the file that did not load.
    pub(super) fn load(files: TlsFiles) -> Result<(Tls, Vec<String>), Error> {
        let (config, warnings) = build(&files)?;
        let tls = Tls {
            files,
            config: RwLock::new(Arc::new(config)),
        };
        Ok((tls, warnings))
    }

    /// The acceptor of a connection accepted now (the configuration in use).
    pub(super) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(Arc::clone(
            &self.config.read().unwrap_or_else(PoisonError::into_inner),
        ))
    }

    /// Reads the files again: on success, connections accepted from now on get the new
    /// configuration (and the warnings about it are returned); on failure the one in use is
    /// kept.
    ///
    /// # Errors
    ///
    /// As [`Tls::load`].
    pub(super) fn reload(&self) -> Result<Vec<String>, Error> {
        let (config, warnings) = build(&self.files)?;
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
        Ok(warnings)
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

/// The configuration the files describe, and the warnings about files that loaded.
fn build(files: &TlsFiles) -> Result<(ServerConfig, Vec<String>), Error> {
    let chain = certificates("tls_cert", &files.cert)?;
    let mut warnings = out_of_date(&files.cert, &chain, jiff::Timestamp::now());
    warnings.extend(super::tokens::open_to_others(
        "the TLS key (--tls-key)",
        &files.key,
    ));
    let key_pem = read("tls_key", &files.key)?;
    // The key's own text is never quoted: only the file and what is wrong with it.
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        bad(
            "tls_key",
            format!(
                "{} holds no PEM private key (PKCS #8, PKCS #1 or SEC1): {e}",
                files.key.display()
            ),
        )
    })?;
    let provider = Arc::new(crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("tls_cert", format!("TLS versions: {e}")))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for ca in certificates("tls_client_ca", path)? {
                roots.add(ca).map_err(|e| {
                    bad(
                        "tls_client_ca",
                        format!("{}: a certificate is not a usable CA: {e}", path.display()),
                    )
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| bad("tls_client_ca", format!("{}: {e}", path.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        bad(
            "tls_key",
            format!(
                "{} is not the key of the certificate in {}: {e}",
                files.key.display(),
                files.cert.display()
            ),
        )
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((config, warnings))
}

/// A warning for each certificate of `chain` (read from `path`) that is not valid at `now`:
/// expired, or not valid yet. A certificate whose dates cannot be read gets none (rustls
/// serves it as it is).
fn out_of_date(path: &Path, chain: &[CertificateDer<'_>], now: jiff::Timestamp) -> Vec<String> {
    let mut warnings = Vec::new();
    for (i, cert) in chain.iter().enumerate() {
        let Some((from, to)) = validity(cert) else {
            continue;
        };
        let which = if i == 0 {
            format!("the certificate in {}", path.display())
        } else {
            format!("certificate {} of the chain in {}", i + 1, path.display())
        };
        let dates = format!("valid from {from} to {to}");
        if now > to {
            warnings.push(format!(
                "{which} expired on {to} ({dates}): clients will refuse it; put a valid one in its place and send SIGHUP"
            ));
        } else if now < from {
            warnings.push(format!(
                "{which} is not valid before {from} ({dates}; this machine's clock says {}): clients will refuse it until then",
                now.round(jiff::Unit::Second).unwrap_or(now)
            ));
        }
    }
    warnings
}

/// One DER element at the start of `der`: its tag, its contents and what follows it.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0_usize, |len, &b| (len << 8) | usize::from(b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The validity period (notBefore, notAfter) of an X.509 certificate (RFC 5280, 4.1):
/// `Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL, serialNumber,
/// signature, issuer, validity SEQUENCE { notBefore, notAfter }, … }, … }`.
fn validity(cert: &[u8]) -> Option<(jiff::Timestamp, jiff::Timestamp)> {
    const SEQUENCE: u8 = 0x30;
    let (SEQUENCE, cert, _) = element(cert)? else {
        return None;
    };
    let (SEQUENCE, mut tbs, _) = element(cert)? else {
        return None;
    };
    if tbs.first() == Some(&0xa0) {
        tbs = element(tbs)?.2; // the version
    }
    for _ in 0..3 {
        tbs = element(tbs)?.2; // the serial number, the signature algorithm, the issuer
    }
    let (SEQUENCE, dates, _) = element(tbs)? else {
        return None;
    };
    let (from_tag, from, rest) = element(dates)?;
    let (to_tag, to, _) = element(rest)?;
    Some((time(from_tag, from)?, time(to_tag, to)?))
}

/// An X.509 time: UTCTime `YYMMDDHHMMSSZ` (years 1950–2049) or GeneralizedTime
/// `YYYYMMDDHHMMSSZ`.
fn time(tag: u8, value: &[u8]) -> Option<jiff::Timestamp> {
    let text = std::str::from_utf8(value).ok()?;
    if !text
        .bytes()
        .take(text.len().saturating_sub(1))
        .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let (year, rest) = match tag {
        0x17 => {
            let yy: i16 = text.get(..2)?.parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, text.get(2..)?)
        }
        0x18 => (text.get(..4)?.parse().ok()?, text.get(4..)?),
        _ => return None,
    };
    if rest.len() != 11 || !rest.ends_with('Z') {
        return None;
    }
    let two = |i: usize| rest.get(i..i + 2)?.parse::<i8>().ok();
    jiff::civil::DateTime::new(year, two(0)?, two(2)?, two(4)?, two(6)?, two(8)?, 0)
        .ok()?
        .to_zoned(jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(from: (i32, u8, u8), to: (i32, u8, u8)) -> CertificateDer<'static> {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
        params.not_after = rcgen::date_time_ymd(to.0, to.1, to.2);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    /// The validity dates are read from the DER (UTCTime before 2050, GeneralizedTime from
    /// 2050 on), and a certificate out of date at `now` gets a warning naming the file and its
    /// dates; one in date, none; bytes that are no certificate, none either.
    #[test]
    fn a_certificates_dates_are_read_and_an_out_of_date_one_is_warned_of() {
        let old = cert((2020, 1, 1), (2021, 1, 1));
        let late = cert((2090, 1, 1), (2091, 6, 30));
        assert_eq!(
            validity(&old),
            Some((at("2020-01-01T00:00:00Z"), at("2021-01-01T00:00:00Z")))
        );
        assert_eq!(
            validity(&late),
            Some((at("2090-01-01T00:00:00Z"), at("2091-06-30T00:00:00Z")))
        );
        assert_eq!(
            validity(&CertificateDer::from(vec![0x30, 0x03, 1, 2, 3])),
            None
        );
        assert_eq!(validity(&CertificateDer::from(Vec::new())), None);
        let path = Path::new("/etc/dispenser/server.pem");
        let now = at("2026-06-01T12:00:00Z");
        let w = out_of_date(path, &[old.clone(), late.clone()], now);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with("the certificate in /etc/dispenser/server.pem expired on 2021-01-01T00:00:00Z (valid from 2020-01-01T00:00:00Z to 2021-01-01T00:00:00Z)"),
            "{}",
            w[0]
        );
        assert!(
            w[1].starts_with("certificate 2 of the chain in /etc/dispenser/server.pem is not valid before 2090-01-01T00:00:00Z"),
            "{}",
            w[1]
        );
        assert!(out_of_date(path, &[old], at("2020-06-01T00:00:00Z")).is_empty());
        assert_eq!(
            time(0x17, b"491231235959Z"),
            Some(at("2049-12-31T23:59:59Z"))
        );
        assert_eq!(
            time(0x17, b"500101000000Z"),
            Some(at("1950-01-01T00:00:00Z"))
        );
        assert_eq!(time(0x17, b"5001010000+0Z"), None);
        assert_eq!(time(0x18, b"20261301000000Z"), None);
    }
}
