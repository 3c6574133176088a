//! The session's packet protection and the buffers around it: the keys
//! once the handshake made them, the datagram being written (where it
//! starts in the caller's buffer and its full packet number, the nonce;
//! the header carries only the low bits), and the datagrams built but held
//! for a later GSO batch.

use super::batch::Held;
use crate::crypto::PacketKeys;
use crate::PathId;

/// See the module documentation.
#[derive(Debug, Default)]
pub(super) struct Packets {
    /// Sealed sessions: the keys once the handshake produced them.
    keys: Option<Box<PacketKeys>>,
    /// Where the datagram being written starts in the caller's buffer.
    start: usize,
    /// The full packet number of the datagram being written.
    number: u64,
    /// The connection it goes on: the nonce names it.
    path: PathId,
    /// Datagrams sealed and sent but not yet handed out, for a later batch.
    held: Held,
}

impl Packets {
    /// The keys, once the handshake made them.
    pub fn keys(&self) -> Option<&PacketKeys> {
        self.keys.as_deref()
    }

    /// The keys, once the handshake made them.
    pub fn keys_mut(&mut self) -> Option<&mut PacketKeys> {
        self.keys.as_deref_mut()
    }

    /// The handshake made the keys.
    pub fn set_keys(&mut self, keys: PacketKeys) {
        self.keys = Some(Box::new(keys));
    }

    /// A datagram starts at `start` in the caller's buffer.
    pub fn begin(&mut self, start: usize) {
        self.start = start;
    }

    /// Where the datagram being written starts.
    pub fn start(&self) -> usize {
        self.start
    }

    /// The datagram being written goes on `path`, numbered `pn`.
    pub fn set_number(&mut self, path: PathId, pn: u64) {
        self.path = path;
        self.number = pn;
    }

    /// The number of the datagram being written.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Bytes of the datagram written so far into `buf`.
    pub fn len(&self, buf: &[u8]) -> usize {
        buf.len() - self.start
    }

    /// Whether no datagram waits for a later batch.
    pub fn held_is_empty(&self) -> bool {
        self.held.len() == 0
    }

    /// Datagrams held for a later batch.
    pub fn held_mut(&mut self) -> &mut Held {
        &mut self.held
    }

    /// Seals the datagram being written, once the session has keys.
    pub fn seal(&mut self, buf: &mut Vec<u8>) {
        if let Some(keys) = self.keys.as_deref_mut() {
            keys.seal(buf, self.start, self.path, self.number);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_keys_a_datagram_stays_in_clear_where_it_starts() {
        let mut p = Packets::default();
        let mut buf = b"earlier datagram".to_vec();
        p.begin(buf.len());
        p.set_number(PathId(0), 7);
        buf.extend_from_slice(b"hello");
        p.seal(&mut buf);
        assert_eq!(p.len(&buf), 5);
        assert_eq!(&buf[p.start()..], b"hello");
        assert!(p.keys().is_none());
    }
}
