//! A private CA and a server certificate for `127.0.0.1` signed by it, generated at test time
//! (rcgen, ECDSA P-256), and the rustls server configuration that presents them.

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

pub struct Pki {
    /// The CA certificate, as a `--cacert` file would hold it.
    pub ca_pem: String,
    pub server: Arc<rustls::ServerConfig>,
}

impl Pki {
    /// `ca_name` is the CA's common name: two CAs with one name would fail as a bad
    /// signature rather than an unknown issuer.
    pub fn generate(ca_name: &str) -> Pki {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, ca_name);
        ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
        let ca_key = rcgen::KeyPair::generate().expect("ca key");
        let ca = ca_params.self_signed(&ca_key).expect("ca certificate");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);

        let mut leaf_params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).expect("leaf params");
        leaf_params.distinguished_name.push(rcgen::DnType::CommonName, "127.0.0.1");
        leaf_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        leaf_params.use_authority_key_identifier_extension = true;
        let leaf_key = rcgen::KeyPair::generate().expect("leaf key");
        let leaf = leaf_params.signed_by(&leaf_key, &issuer).expect("leaf certificate");

        let server = server_config(vec![leaf.der().clone(), ca.der().clone()], &leaf_key);
        Pki { ca_pem: ca.pem(), server }
    }

    /// What `openssl req -x509` makes by default: a self-signed certificate marked CA:TRUE,
    /// presented by the server as its own.
    pub fn ca_as_server_certificate() -> Pki {
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().expect("key");
        let certificate = params.self_signed(&key).expect("certificate");
        Pki { ca_pem: certificate.pem(), server: server_config(vec![certificate.der().clone()], &key) }
    }
}

fn server_config(chain: Vec<CertificateDer<'static>>, key: &rcgen::KeyPair) -> Arc<rustls::ServerConfig> {
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server config");
    Arc::new(config)
}
