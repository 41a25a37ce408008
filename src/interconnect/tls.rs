//! TLS on the interconnect's connections (feature `tls`), as YDB runs it: after the
//! handshake's last frame (a resume: after the initial packets), on the same socket, the
//! lower node id as the TLS server. Both sides present a certificate signed by the
//! cluster's CA (mutual TLS), and each checks that the other's chains to the CA, as YDB
//! does (its certificates need not name the host). With
//! [`TlsSetup::check_host_names`] each also checks that the other's is for the host name
//! its name service gives the peer: the client through TLS's server-name check, the
//! server on the client's certificate once the TLS handshake is done.
//!
//! [`TlsStream`] shares one rustls connection between the session's reader and writer:
//! each takes the connection's lock only to move bytes in or out of it, never across a
//! socket read or write, so a writer blocked on a full socket never stops the reader. The
//! writer is the only thread that writes TLS records to the socket (the reader's replies
//! at the TLS level, a key update's, go out with the next write), so records leave in the
//! order rustls made them.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{
    ClientConfig, ClientConnection, Connection, DigitallySignedStruct, RootCertStore, ServerConfig,
    ServerConnection, SignatureScheme,
};
use thiserror::Error;

use super::encryption::EncryptionMode;
use super::error::HandshakeError;

/// Why a [`TlsSetup`] could not be made.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A PEM input has no item of the kind wanted, or a malformed one.
    #[error("{what}: {reason}")]
    Pem {
        /// Which input: "certificate chain", "private key" or "CA".
        what: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// rustls refused the certificates or the key (a key that does not match the
    /// certificate, an unsupported key type, a CA that is not a certificate).
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// What a node runs TLS with: its [`EncryptionMode`], its certificate chain and private key,
/// and the cluster's CA ([`InterconnectSetup::tls`](super::InterconnectSetup::tls)).
///
/// Every node's certificate must be signed by the CA (its chain, presented in the TLS
/// handshake, leads to one of the CA certificates): a peer checks that, as YDB does. A
/// certificate need not name the node's host, unless the peers check host names too
/// ([`check_host_names`](Self::check_host_names)).
///
/// # Examples
///
/// ```no_run
/// use agentbox::interconnect::{EncryptionMode, InterconnectSetup, NameService, TlsSetup};
///
/// let tls = TlsSetup::from_pem_files(
///     EncryptionMode::Required,
///     "/etc/agentbox/node.crt",
///     "/etc/agentbox/node.key",
///     "/etc/agentbox/ca.crt",
/// )?;
/// let setup = InterconnectSetup::new(NameService::new()).tls(tls);
/// # let _ = setup;
/// # Ok::<(), agentbox::interconnect::TlsError>(())
/// ```
#[derive(Clone)]
pub struct TlsSetup {
    pub(crate) mode: EncryptionMode,
    pub(crate) context: Arc<TlsContext>,
}

impl std::fmt::Debug for TlsSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSetup")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// The rustls configurations of both roles.
#[derive(Clone)]
pub(crate) struct TlsContext {
    /// The client that checks the server's chain only (YDB's check).
    client: Arc<ClientConfig>,
    /// The client that also checks the server's host name.
    client_named: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
    /// Whether the peer's certificate must name its host ([`TlsSetup::check_host_names`]).
    check_host_names: bool,
}

/// The client's check of the server's certificate as YDB makes it: the chain leads to the
/// CA (validity dates, signatures and key usages included); the name is not looked at.
#[derive(Debug)]
struct ChainOnly {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
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
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
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

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn certificates(what: &'static str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            what,
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            what,
            reason: "no certificate".into(),
        });
    }
    Ok(certs)
}

impl TlsSetup {
    /// A setup from PEM files: the node's certificate chain (its own certificate first),
    /// its private key (PKCS#8, PKCS#1 or SEC1), and the cluster's CA certificates.
    ///
    /// # Errors
    ///
    /// [`TlsError`]: a file cannot be read, has no certificate or key, or rustls refuses
    /// them.
    pub fn from_pem_files(
        mode: EncryptionMode,
        cert_chain: impl AsRef<Path>,
        private_key: impl AsRef<Path>,
        ca: impl AsRef<Path>,
    ) -> Result<TlsSetup, TlsError> {
        let chain = read(cert_chain.as_ref())?;
        let key = read(private_key.as_ref())?;
        let ca = read(ca.as_ref())?;
        TlsSetup::from_pem(mode, &chain, &key, &ca)
    }

    /// A setup from PEM text in memory (see [`from_pem_files`](Self::from_pem_files)).
    ///
    /// # Errors
    ///
    /// [`TlsError`]: no certificate or key in the text, or rustls refuses them.
    pub fn from_pem(
        mode: EncryptionMode,
        cert_chain: &[u8],
        private_key: &[u8],
        ca: &[u8],
    ) -> Result<TlsSetup, TlsError> {
        let chain = certificates("certificate chain", cert_chain)?;
        let key = PrivateKeyDer::from_pem_slice(private_key).map_err(|e| TlsError::Pem {
            what: "private key",
            reason: e.to_string(),
        })?;
        let mut roots = RootCertStore::empty();
        for c in certificates("CA", ca)? {
            roots.add(c).map_err(|e| TlsError::Config(e.to_string()))?;
        }
        let roots = Arc::new(roots);
        let config = |e: rustls::Error| TlsError::Config(e.to_string());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(config)?;
        // No tickets: nothing for the server to write once the handshake is done.
        server.send_tls13_tickets = 0;
        let chain_only = Arc::new(ChainOnly {
            roots: roots.clone(),
            provider: provider.clone(),
        });
        let client = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .dangerous()
            .with_custom_certificate_verifier(chain_only)
            .with_client_auth_cert(chain.clone(), key.clone_key())
            .map_err(config)?;
        let client_named = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(config)?;
        Ok(TlsSetup {
            mode,
            context: Arc::new(TlsContext {
                client: Arc::new(client),
                client_named: Arc::new(client_named),
                server: Arc::new(server),
                check_host_names: false,
            }),
        })
    }

    /// The mode this setup runs in.
    pub fn mode(&self) -> EncryptionMode {
        self.mode
    }

    /// Also checks that a peer's certificate names the peer's host: the `host` of its
    /// [`NodeAddress`](super::NodeAddress) (a DNS name or an IP address) must be among the
    /// certificate's subject alternative names, on both sides (the TLS client checks the
    /// server's, the TLS server the client's), else the handshake fails
    /// ([`HandshakeError::Tls`]) and is retried.
    ///
    /// Off by default: YDB checks only that the chain leads to the cluster's CA, and a YDB
    /// cluster's certificates often do not name the hosts' addresses. Turn it on when every
    /// node's certificate names its host, so that a certificate of the CA stolen from one
    /// host cannot be used from another.
    pub fn check_host_names(mut self) -> TlsSetup {
        let mut context = (*self.context).clone();
        context.check_host_names = true;
        self.context = Arc::new(context);
        self
    }

    /// Whether peers' certificates must name their hosts
    /// ([`check_host_names`](Self::check_host_names)).
    pub fn checks_host_names(&self) -> bool {
        self.context.check_host_names
    }
}

fn tls_error(e: impl std::fmt::Display) -> HandshakeError {
    HandshakeError::Tls(e.to_string())
}

/// Runs the TLS handshake on `sock` by `deadline`, as the server or the client, with the
/// peer whose name service host is `peer_host` (checked if the setup checks host names).
///
/// # Errors
///
/// `Tls` for a refused certificate or a protocol failure, `Timeout`, `Io` for a broken
/// connection.
pub(crate) fn establish(
    ctx: &TlsContext,
    server: bool,
    peer_host: &str,
    sock: TcpStream,
    deadline: Instant,
) -> Result<TlsStream, HandshakeError> {
    let name = match ServerName::try_from(peer_host.to_owned()) {
        Ok(name) => name,
        Err(e) if ctx.check_host_names => {
            return Err(tls_error(format!(
                "the peer's host name {peer_host:?}: {e}"
            )));
        }
        // Only sent (SNI), never checked: any valid name does.
        Err(_) => ServerName::try_from("interconnect").map_err(tls_error)?,
    };
    let mut conn: Connection = if server {
        ServerConnection::new(ctx.server.clone())
            .map_err(tls_error)?
            .into()
    } else {
        let config = if ctx.check_host_names {
            &ctx.client_named
        } else {
            &ctx.client
        };
        ClientConnection::new(config.clone(), name.clone())
            .map_err(tls_error)?
            .into()
    };
    // The writer takes out everything it puts in (see `write_all`).
    conn.set_buffer_limit(None);
    let mut io = &sock;
    while conn.is_handshaking() || conn.wants_write() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HandshakeError::Timeout);
        }
        sock.set_read_timeout(Some(left))
            .map_err(|e| HandshakeError::io(&e))?;
        sock.set_write_timeout(Some(left))
            .map_err(|e| HandshakeError::io(&e))?;
        if let Err(e) = conn.complete_io(&mut io) {
            return Err(match e.kind() {
                io::ErrorKind::InvalidData => tls_error(e),
                io::ErrorKind::Interrupted => continue,
                _ => HandshakeError::io(&e),
            });
        }
    }
    if server && ctx.check_host_names {
        // The client's certificate chains to the CA (rustls checked); it must also be
        // the peer's.
        let cert = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .ok_or_else(|| tls_error("the peer sent no certificate"))?;
        let cert = webpki::EndEntityCert::try_from(cert).map_err(tls_error)?;
        cert.verify_is_valid_for_subject_name(&name).map_err(|e| {
            tls_error(format!(
                "the peer's certificate is not for {peer_host:?}: {e}"
            ))
        })?;
    }
    Ok(TlsStream {
        sock,
        conn: Mutex::new(conn),
        rx: Mutex::new(Vec::new()),
        tx: Mutex::new(Vec::new()),
    })
}

/// A TLS connection shared by a reader and a writer (see the module docs).
pub(crate) struct TlsStream {
    sock: TcpStream,
    conn: Mutex<Connection>,
    /// TLS bytes read from the socket that rustls has not taken yet (the reader's).
    rx: Mutex<Vec<u8>>,
    /// TLS bytes on their way to the socket (the writer's).
    tx: Mutex<Vec<u8>>,
}

/// How many bytes the reader asks of the socket at a time.
const READ_CHUNK: usize = 32 << 10;

impl TlsStream {
    pub(crate) fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// Reads plaintext; `Ok(0)` when the peer closed the connection.
    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut rx = self.rx.lock();
        loop {
            {
                let mut c = self.conn.lock();
                let mut stuck = None;
                while !rx.is_empty() {
                    let mut src: &[u8] = &rx;
                    match c.read_tls(&mut src) {
                        Ok(0) => break,
                        Ok(n) => {
                            rx.drain(..n);
                            c.process_new_packets()
                                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                        }
                        // Its plaintext buffer is full: read some out first.
                        Err(e) => {
                            stuck = Some(e);
                            break;
                        }
                    }
                }
                match c.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if let Some(e) = stuck {
                            return Err(e);
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            // More TLS bytes are needed: read them without the connection's lock.
            let at = rx.len();
            rx.resize(at + READ_CHUNK, 0);
            let got = (&self.sock).read(&mut rx[at..]);
            rx.truncate(at + *got.as_ref().unwrap_or(&0));
            match got {
                Ok(0) => return Ok(0),
                Ok(_) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes all of `buf` (and whatever TLS records the reader left to send).
    pub(crate) fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        let mut tx = self.tx.lock();
        tx.clear();
        {
            let mut c = self.conn.lock();
            c.writer().write_all(buf)?;
            while c.wants_write() {
                c.write_tls(&mut *tx)?;
            }
        }
        (&self.sock).write_all(&tx)
    }
}

#[cfg(all(test, feature = "tls-tests"))]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, KeyPair};

    /// A self-signed certificate for `host` and its key, as PEM.
    fn self_signed(host: &str) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![host.to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn a_setup_loads_from_pem_files_and_says_what_is_wrong_with_bad_ones() {
        let dir = std::env::temp_dir().join(format!("agentbox-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = self_signed("node-1");
        let (other_cert, _) = self_signed("node-2");
        let write = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let (c, k, junk) = (
            write("c.pem", &cert),
            write("k.pem", &key),
            write("j.pem", "junk"),
        );
        let setup = TlsSetup::from_pem_files(EncryptionMode::Required, &c, &k, &c).unwrap();
        assert_eq!(setup.mode(), EncryptionMode::Required);

        let missing = dir.join("missing.pem");
        assert!(matches!(
            TlsSetup::from_pem_files(EncryptionMode::Optional, &missing, &k, &c),
            Err(TlsError::Read { path, .. }) if path == missing
        ));
        assert!(matches!(
            TlsSetup::from_pem_files(EncryptionMode::Optional, &junk, &k, &c),
            Err(TlsError::Pem {
                what: "certificate chain",
                ..
            })
        ));
        assert!(matches!(
            TlsSetup::from_pem_files(EncryptionMode::Optional, &c, &c, &c),
            Err(TlsError::Pem {
                what: "private key",
                ..
            })
        ));
        assert!(matches!(
            TlsSetup::from_pem_files(EncryptionMode::Optional, &c, &k, &junk),
            Err(TlsError::Pem { what: "CA", .. })
        ));
        // A key that is not the certificate's.
        let o = write("o.pem", &other_cert);
        assert!(matches!(
            TlsSetup::from_pem_files(EncryptionMode::Optional, &o, &k, &c),
            Err(TlsError::Config(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
