//! Sealing and opening datagrams with the handshake's directional keys.

use crate::wire::{HEADER_LEN, MBECN_OFFSET};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};

/// Bytes the AEAD tag adds to every sealed datagram.
pub const TAG_LEN: usize = 16;

/// The two directions' keys of one session.
pub(crate) struct PacketKeys {
    seal: LessSafeKey,
    open: LessSafeKey,
}

impl std::fmt::Debug for PacketKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PacketKeys(..)")
    }
}

/// A path never reuses a packet number and each direction has its own key,
/// so (path, packet number) never repeats under one key. The nonce takes
/// the full 64-bit number; the header carries only its low bits.
fn nonce(header: &[u8], packet_number: u64) -> Nonce {
    let mut n = [0u8; NONCE_LEN];
    n[3] = header[10]; // path
    n[4..].copy_from_slice(&packet_number.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

/// The header as associated data. The MB-ECN byte is left out: forwarders
/// rewrite it on the way, as routers rewrite IP's ECN bits.
fn aad(header: &[u8]) -> [u8; HEADER_LEN] {
    let mut ad = [0u8; HEADER_LEN];
    ad.copy_from_slice(&header[..HEADER_LEN]);
    ad[MBECN_OFFSET] = 0;
    ad
}

impl PacketKeys {
    pub fn new(seal: [u8; 32], open: [u8; 32]) -> PacketKeys {
        let key =
            |k: [u8; 32]| LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &k).expect("32-byte key"));
        PacketKeys {
            seal: key(seal),
            open: key(open),
        }
    }

    /// Encrypts the datagram that starts at `start` in `buf` (everything
    /// after its header) in place and appends the tag; `packet_number` is
    /// the full number whose low bits the header carries.
    pub fn seal(&self, buf: &mut Vec<u8>, start: usize, packet_number: u64) {
        let (header, payload) = buf[start..].split_at_mut(HEADER_LEN);
        let nonce = nonce(header, packet_number);
        let tag = self
            .seal
            .seal_in_place_separate_tag(nonce, Aad::from(aad(header)), payload)
            .expect("payload within the AEAD's limit");
        buf.extend_from_slice(tag.as_ref());
    }

    /// Opens `datagram` in place, its header's packet number expanded to
    /// `packet_number`; returns the plaintext frames, or `None` if it was
    /// not sealed by the peer for this header and number.
    pub fn open<'a>(&self, datagram: &'a mut [u8], packet_number: u64) -> Option<&'a [u8]> {
        if datagram.len() < HEADER_LEN + TAG_LEN {
            return None;
        }
        let (header, payload) = datagram.split_at_mut(HEADER_LEN);
        let nonce = nonce(header, packet_number);
        let plain = self
            .open
            .open_in_place(nonce, Aad::from(aad(header)), payload)
            .ok()?;
        Some(plain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_datagrams_open_only_intact() {
        let a = PacketKeys::new([1; 32], [2; 32]);
        let b = PacketKeys::new([2; 32], [1; 32]);
        let pn = (1 << 40) + 9;
        let mut d = vec![0u8; HEADER_LEN];
        d[10] = 3;
        d[HEADER_LEN - 1] = 9;
        d.extend_from_slice(b"frames");
        // Sealing a datagram after others in a batch leaves those alone.
        let mut batch = vec![7u8; 5];
        batch.extend_from_slice(&d);
        a.seal(&mut batch, 5, pn);
        assert_eq!(batch[..5], [7; 5]);
        a.seal(&mut d, 0, pn);
        assert_eq!(batch[5..], d[..]);
        assert_eq!(d.len(), HEADER_LEN + 6 + TAG_LEN);
        // The MB-ECN byte may change on the way.
        let mut marked = d.clone();
        marked[MBECN_OFFSET] = 5;
        assert_eq!(b.open(&mut marked, pn).unwrap(), b"frames");
        // Any other bit flipped, in header, payload or tag, fails.
        for i in (0..d.len()).filter(|&i| i != MBECN_OFFSET) {
            let mut bad = d.clone();
            bad[i] ^= 1;
            assert!(b.open(&mut bad, pn).is_none(), "bit flip at {i} opened");
        }
        // The same low bits expanded into another window do not open: the
        // nonce is the full number.
        assert!(b.open(&mut d.clone(), 9).is_none());
        // Our own direction's key does not open what we sealed.
        assert!(a.open(&mut d.clone(), pn).is_none());
    }
}
