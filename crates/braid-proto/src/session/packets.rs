//! The session's packet protection and the buffers around it: the keys
//! once the handshake made them, the datagram being written (where it
//! starts in the caller's buffer and its full packet number, the nonce;
//! the header carries only the low bits), and the scratch space where
//! datagrams are opened.

use crate::crypto::PacketKeys;

/// See the module documentation.
#[derive(Debug, Default)]
pub(super) struct Packets {
    /// Sealed sessions: the keys once the handshake produced them.
    keys: Option<Box<PacketKeys>>,
    /// Scratch space where datagrams are opened.
    open_buf: Vec<u8>,
    /// Where the datagram being written starts in the caller's buffer.
    start: usize,
    /// The full packet number of the datagram being written.
    number: u64,
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

    /// The datagram being written is numbered `pn`.
    pub fn set_number(&mut self, pn: u64) {
        self.number = pn;
    }

    /// Bytes of the datagram written so far into `buf`.
    pub fn len(&self, buf: &[u8]) -> usize {
        buf.len() - self.start
    }

    /// Seals the datagram being written, once the session has keys.
    pub fn seal(&mut self, buf: &mut Vec<u8>) {
        if let Some(keys) = self.keys.as_deref_mut() {
            keys.seal(buf, self.start, self.number);
        }
    }

    /// The scratch buffer, lent out while a datagram is opened in it.
    pub fn take_open_buf(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.open_buf)
    }

    /// The scratch buffer back, to be reused.
    pub fn return_open_buf(&mut self, buf: Vec<u8>) {
        self.open_buf = buf;
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
        p.set_number(7);
        buf.extend_from_slice(b"hello");
        p.seal(&mut buf);
        assert_eq!(p.len(&buf), 5);
        assert_eq!(&buf[p.start()..], b"hello");
        assert!(p.keys().is_none());
    }

    #[test]
    fn the_open_buffer_is_lent_and_kept() {
        let mut p = Packets::default();
        let mut b = p.take_open_buf();
        b.extend_from_slice(&[1; 1500]);
        p.return_open_buf(b);
        assert!(p.take_open_buf().capacity() >= 1500);
    }
}
