//! quinn without packet protection, the counterpart of braid's `--insecure`
//! (and of quinn's own `perf --no-protection`): the TLS 1.3 handshake runs
//! as usual, with real Initial and Handshake keys, but 1-RTT packets are
//! neither encrypted nor authenticated and their headers are not masked.
//! Both ends must use these wrappers; the peers of one transfer always do.

use bytes::BytesMut;
use quinn::crypto::{
    self, CryptoError, ExportKeyingMaterialError, HeaderKey, KeyPair, Keys, PacketKey,
    UnsupportedVersion,
};
use quinn::{ConnectError, ConnectionId, Side};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::TransportError;
use std::any::Any;
use std::sync::Arc;

/// Wraps a client crypto config (rustls's `QuicClientConfig`).
pub struct ClientConfig(pub Arc<dyn crypto::ClientConfig>);

/// Wraps a server crypto config (rustls's `QuicServerConfig`).
pub struct ServerConfig(pub Arc<dyn crypto::ServerConfig>);

impl crypto::ClientConfig for ClientConfig {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &TransportParameters,
    ) -> Result<Box<dyn crypto::Session>, ConnectError> {
        let inner = self.0.clone().start_session(version, server_name, params)?;
        Ok(Session::wrap(inner))
    }
}

impl crypto::ServerConfig for ServerConfig {
    // Initial packets keep their real protection: only the session's 1-RTT
    // keys change.
    fn initial_keys(
        &self,
        version: u32,
        dst_cid: &ConnectionId,
    ) -> Result<Keys, UnsupportedVersion> {
        self.0.initial_keys(version, dst_cid)
    }

    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.0.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(
        self: Arc<Self>,
        version: u32,
        params: &TransportParameters,
    ) -> Box<dyn crypto::Session> {
        Session::wrap(self.0.clone().start_session(version, params))
    }
}

/// The TLS session as it is, except for the 1-RTT keys it hands out.
struct Session {
    inner: Box<dyn crypto::Session>,
    /// Whether `write_handshake` already gave the Handshake keys: quinn
    /// takes keys from it exactly twice, Handshake then 1-RTT (rustls's
    /// `KeyChange` order), and `is_handshaking` cannot tell them apart since
    /// the server has its 1-RTT keys before the client's Finished.
    had_handshake_keys: bool,
}

impl Session {
    fn wrap(inner: Box<dyn crypto::Session>) -> Box<dyn crypto::Session> {
        Box::new(Session {
            inner,
            had_handshake_keys: false,
        })
    }
}

/// Swaps a pair of 1-RTT packet keys for pass-through ones, keeping their
/// limits so key updates come when they would with quinn-tls.
fn plain(keys: KeyPair<Box<dyn PacketKey>>) -> KeyPair<Box<dyn PacketKey>> {
    let wrap = |k: Box<dyn PacketKey>| -> Box<dyn PacketKey> {
        Box::new(PlainPacket {
            confidentiality_limit: k.confidentiality_limit(),
            integrity_limit: k.integrity_limit(),
        })
    };
    KeyPair {
        local: wrap(keys.local),
        remote: wrap(keys.remote),
    }
}

impl crypto::Session for Session {
    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        let keys = self.inner.write_handshake(buf)?;
        if !self.had_handshake_keys {
            self.had_handshake_keys = true;
            return Some(keys);
        }
        Some(Keys {
            header: KeyPair {
                local: Box::new(PlainHeader),
                remote: Box::new(PlainHeader),
            },
            packet: plain(keys.packet),
        })
    }

    // Key updates derive from the real next secrets (so both ends stay in
    // step) but again protect nothing.
    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        self.inner.next_1rtt_keys().map(plain)
    }

    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        self.inner.initial_keys(dst_cid, side)
    }

    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        self.inner.handshake_data()
    }

    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }

    // 0-RTT (never used here: each transfer is a fresh process) stays real.
    fn early_crypto(&self) -> Option<(Box<dyn HeaderKey>, Box<dyn PacketKey>)> {
        self.inner.early_crypto()
    }

    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }

    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }

    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        self.inner.read_handshake(buf)
    }

    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        self.inner.transport_parameters()
    }

    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }

    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

/// Payload as it is. No tag (`tag_len` 0), so quinn reserves no room for
/// one and `decrypt` has nothing to strip or check.
struct PlainPacket {
    confidentiality_limit: u64,
    integrity_limit: u64,
}

impl PacketKey for PlainPacket {
    fn encrypt(&self, _packet: u64, _buf: &mut [u8], _header_len: usize) {}

    fn decrypt(
        &self,
        _packet: u64,
        _header: &[u8],
        _payload: &mut BytesMut,
    ) -> Result<(), CryptoError> {
        Ok(())
    }

    fn tag_len(&self) -> usize {
        0
    }

    fn confidentiality_limit(&self) -> u64 {
        self.confidentiality_limit
    }

    fn integrity_limit(&self) -> u64 {
        self.integrity_limit
    }
}

/// Header as it is: first byte and packet number go out unmasked. A sample
/// size of 0 means quinn pads short packets only to its 4-byte minimum.
struct PlainHeader;

impl HeaderKey for PlainHeader {
    fn decrypt(&self, _pn_offset: usize, _packet: &mut [u8]) {}

    fn encrypt(&self, _pn_offset: usize, _packet: &mut [u8]) {}

    fn sample_size(&self) -> usize {
        0
    }
}
