//! Whom the HTTPS client trusts: Mozilla's roots, the roots of a PEM file (a private CA), or
//! nobody (`--insecure`), turned into one rustls client configuration per run.
//!
//! No I/O: PEM comes in as bytes (the CLI reads the file), and nothing here opens a
//! connection. What it deliberately does not do: client certificates, the host's certificate
//! store, CRLs or OCSP, and mixing a PEM file's roots with Mozilla's (see [`Trust::Roots`]).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// The roots a run trusts.
#[derive(Debug, Clone)]
pub enum Trust {
    /// Mozilla's root program as compiled into webpki-roots, so results do not depend on the
    /// host's certificate store.
    WebpkiRoots,
    /// Only these roots; Mozilla's are *not* trusted as well. This is curl's `--cacert`
    /// meaning: a probe of a private endpoint checks the server against exactly the CA it
    /// was given, and a certificate from any public CA fails instead of passing unnoticed.
    Roots {
        certificates: Vec<CertificateDer<'static>>,
        /// Where they came from, for messages ("ca.pem").
        source: String,
    },
    /// Accept any certificate chain for any name. The handshake still checks the server's
    /// signature over the transcript, so the server holds the key of the certificate it sent
    /// and the TLS phase does the same work as a verified one, minus the chain check.
    Insecure,
}

/// A ready client configuration plus what it promises; shared by all workers of a run.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    pub rustls: Arc<rustls::ClientConfig>,
    /// False under [`Trust::Insecure`]: every record and report of the run says so.
    pub verifies_certificates: bool,
    /// The trusted roots in words, for handshake failure messages.
    pub trusting: String,
}

/// Why a trust setting could not be turned into a configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{source_name}: not valid PEM: {error}")]
    Pem { source_name: String, error: rustls::pki_types::pem::Error },
    #[error("{source_name}: no certificate in it (expected a -----BEGIN CERTIFICATE----- block)")]
    NoCertificates { source_name: String },
    #[error("{source_name}: certificate {number} cannot be a trusted root: {error}")]
    BadRoot { source_name: String, number: usize, error: rustls::Error },
    #[error("cannot set up TLS: {0}")]
    Setup(#[from] rustls::Error),
}

/// Every `CERTIFICATE` block of a PEM file, in order; other blocks (keys, CRLs) are skipped.
pub fn parse_pem_certificates(pem: &[u8], source_name: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsError::Pem { source_name: source_name.to_string(), error })?;
    if certificates.is_empty() {
        return Err(TlsError::NoCertificates { source_name: source_name.to_string() });
    }
    Ok(certificates)
}

impl TlsConfig {
    /// TLS 1.2 and 1.3 with ring's primitives; ALPN offers only `http/1.1`. Sessions are
    /// resumed across the run's connections (rustls's in-memory cache), as a browser or curl
    /// would, so with `--no-reuse` the later handshakes are the shorter resumed kind.
    pub fn new(trust: Trust) -> Result<TlsConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder =
            rustls::ClientConfig::builder_with_provider(Arc::clone(&provider)).with_safe_default_protocol_versions()?;
        let (builder, verifies_certificates, trusting) = match trust {
            Trust::WebpkiRoots => {
                let roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
                (builder.with_root_certificates(roots), true, "Mozilla's roots (webpki-roots)".to_string())
            }
            Trust::Roots { certificates, source } => {
                let mut roots = RootCertStore::empty();
                let count = certificates.len();
                for (index, certificate) in certificates.into_iter().enumerate() {
                    roots.add(certificate).map_err(|error| TlsError::BadRoot {
                        source_name: source.clone(),
                        number: index + 1,
                        error,
                    })?;
                }
                if roots.is_empty() {
                    return Err(TlsError::NoCertificates { source_name: source });
                }
                let trusting = format!("only the {count} root{} in {source}", if count == 1 { "" } else { "s" });
                (builder.with_root_certificates(roots), true, trusting)
            }
            Trust::Insecure => {
                let verifier = Arc::new(AcceptAnyCertificate { provider });
                (
                    builder.dangerous().with_custom_certificate_verifier(verifier),
                    false,
                    "nothing: certificates are not verified".to_string(),
                )
            }
        };
        let mut config = builder.with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsConfig { rustls: Arc::new(config), verifies_certificates, trusting })
    }
}

/// `--insecure`: any chain, any name, any date; handshake signatures are still verified with
/// the provider's algorithms (see [`Trust::Insecure`]).
#[derive(Debug)]
struct AcceptAnyCertificate {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, certificate, signature, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, certificate, signature, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn self_signed_ca_pem() -> String {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().expect("key");
        params.self_signed(&key).expect("self-signed").pem()
    }

    #[test]
    fn pem_roots_are_parsed_in_order_and_other_blocks_skipped() {
        let first = self_signed_ca_pem();
        let second = self_signed_ca_pem();
        let key = rcgen::KeyPair::generate().expect("key").serialize_pem();
        let bundle = format!("# comment\n{first}{key}{second}");
        let parsed = parse_pem_certificates(bundle.as_bytes(), "bundle.pem").expect("two certificates");
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0], parse_pem_certificates(first.as_bytes(), "first").expect("one")[0]);
        let config =
            TlsConfig::new(Trust::Roots { certificates: parsed, source: "bundle.pem".into() }).expect("config");
        assert!(config.verifies_certificates);
        assert_eq!(config.trusting, "only the 2 roots in bundle.pem");
    }

    #[test]
    fn a_file_without_certificates_is_an_error_naming_the_file() {
        let key = rcgen::KeyPair::generate().expect("key").serialize_pem();
        let err = parse_pem_certificates(key.as_bytes(), "key.pem").expect_err("no certificate");
        assert_eq!(err.to_string(), "key.pem: no certificate in it (expected a -----BEGIN CERTIFICATE----- block)");
        let broken = "-----BEGIN CERTIFICATE-----\nnot base64 ***\n-----END CERTIFICATE-----\n";
        let err = parse_pem_certificates(broken.as_bytes(), "broken.pem").expect_err("bad base64");
        assert!(err.to_string().starts_with("broken.pem: not valid PEM"), "{err}");
    }

    #[test]
    fn a_block_that_is_not_a_certificate_cannot_be_a_root() {
        let garbage = CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x05]);
        let err = TlsConfig::new(Trust::Roots { certificates: vec![garbage], source: "odd.pem".into() })
            .expect_err("not a certificate");
        assert!(err.to_string().starts_with("odd.pem: certificate 1 cannot be a trusted root"), "{err}");
    }

    #[test]
    fn insecure_says_so() {
        let config = TlsConfig::new(Trust::Insecure).expect("config");
        assert!(!config.verifies_certificates);
        let mozilla = TlsConfig::new(Trust::WebpkiRoots).expect("config");
        assert!(mozilla.verifies_certificates);
        assert_eq!(mozilla.rustls.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }
}
