//! A throwaway PKI for TLS tests, generated with rcgen on every run: a CA, server certificates
//! for `127.0.0.1` and `localhost`, and client certificates. Also used by the unit tests of
//! `crates/service/src/web`, so it depends on nothing but rcgen.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// A certificate and its private key, PEM.
pub struct Leaf {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PKCS#8 PEM.
    pub key_pem: String,
}

impl Leaf {
    /// Certificate then key, the form `reqwest::Identity::from_pem` reads.
    #[allow(dead_code)]
    pub fn identity_pem(&self) -> String {
        format!("{}{}", self.cert_pem, self.key_pem)
    }
}

/// A certificate authority that signs leaves.
pub struct Pki {
    /// The CA certificate, PEM.
    pub ca_pem: String,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    /// A fresh CA named `name`.
    pub fn new(name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Pki {
            ca_pem: ca.pem(),
            ca,
        }
    }

    fn leaf(&self, names: Vec<String>, cn: &str, usage: ExtendedKeyUsagePurpose) -> Leaf {
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A server certificate valid for `127.0.0.1` (IP SAN) and `localhost`.
    pub fn server(&self) -> Leaf {
        self.leaf(
            vec!["127.0.0.1".into(), "localhost".into()],
            "vllm-corrector",
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate with common name `name`.
    #[allow(dead_code)]
    pub fn client(&self, name: &str) -> Leaf {
        self.leaf(
            vec![format!("{name}.test")],
            name,
            ExtendedKeyUsagePurpose::ClientAuth,
        )
    }
}
