//! Generated application content: deterministic bytes from a key, so a
//! transfer of any size needs no file and the receiver can check every byte
//! it reads against the generator.

/// Odd multiplier of the content words: consecutive words differ by it
/// before mixing, so every word depends on its offset.
const STEP: u64 = 0xd6e8_feb8_6659_fd93;

/// The 8 bytes of content at `block` × 8. A byte read at the wrong place
/// fails the check.
fn word(key: u64, block: u64) -> [u8; 8] {
    word_bits(key, block).to_le_bytes()
}

/// [`word`] as the integer whose little-endian bytes it is.
fn word_bits(key: u64, block: u64) -> u64 {
    mix(unmixed(key, block))
}

/// `(key + block) × STEP`: linear in the block, so the next word's is one
/// add away and the loops below vectorise (a multiply per word, which
/// SSE2 has no instruction for, was a tenth of the simulator's time).
fn unmixed(key: u64, block: u64) -> u64 {
    key.wrapping_add(block).wrapping_mul(STEP)
}

/// Spreads the high bits into the low bytes.
fn mix(x: u64) -> u64 {
    x ^ (x >> 29)
}

/// Writes the stream's content from `offset` on into the whole of `out`.
pub fn fill(key: u64, offset: u64, out: &mut [u8]) {
    let len = out.len();
    let end = offset + len as u64;
    // A partial first word, whole words, a partial last word.
    let head = (((8 - offset % 8) % 8) as usize).min(len);
    if head > 0 {
        let from = (offset % 8) as usize;
        out[..head].copy_from_slice(&word(key, offset / 8)[from..from + head]);
    }
    let first = (offset + head as u64) / 8;
    let whole = (len - head) / 8 * 8;
    let (words, tail) = out[head..].split_at_mut(whole);
    wide::fill_words(unmixed(key, first), words);
    if !tail.is_empty() {
        let block = (end - tail.len() as u64) / 8;
        let n = tail.len();
        tail.copy_from_slice(&word(key, block)[..n]);
    }
}

/// Whether `data` is the stream's content from `offset` on: [`fill`]
/// compared word by word, without writing it anywhere. The differences are
/// gathered and tested once, not per word: a branch per word cost more
/// than the comparison.
pub fn matches(key: u64, offset: u64, data: &[u8]) -> bool {
    let head = (((8 - offset % 8) % 8) as usize).min(data.len());
    let (first, rest) = data.split_at(head);
    if head > 0 {
        let from = (offset % 8) as usize;
        if differ(first, &word(key, offset / 8)[from..from + head]) {
            return false;
        }
    }
    let start = (offset + head as u64) / 8;
    let (words, tail) = rest.split_at(rest.len() / 8 * 8);
    let block = start + (rest.len() / 8) as u64;
    wide::words_differ(unmixed(key, start), words) == 0
        && !differ(tail, &word(key, block)[..tail.len()])
}

/// Whether two slices of at most a word differ: a byte loop, where
/// comparing the slices called `memcmp` twice per datagram read.
fn differ(a: &[u8], b: &[u8]) -> bool {
    a.len() != b.len() || a.iter().zip(b).fold(0, |d, (x, y)| d | (x ^ y)) != 0
}

/// The word loops, compiled twice: for the baseline x86-64 (two words a
/// vector) and, picked at run time where the CPU has it, AVX2 (four).
/// Generating and checking content was a tenth of a simulation's
/// instructions; the results are the same bytes either way.
mod wide {
    use super::{mix, STEP};

    /// Writes the words from `x` (unmixed) on into `out`, whole words.
    pub fn fill_words(x: u64, out: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU was just found to have AVX2.
            return unsafe { fill_words_avx2(x, out) };
        }
        fill_words_any(x, out)
    }

    /// The OR of each word of `data` XORed with the word expected there:
    /// zero when all match. Gathered, not tested per word: a branch per
    /// word cost more than the comparison.
    pub fn words_differ(x: u64, data: &[u8]) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU was just found to have AVX2.
            return unsafe { words_differ_avx2(x, data) };
        }
        words_differ_any(x, data)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn fill_words_avx2(x: u64, out: &mut [u8]) {
        fill_words_any(x, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn words_differ_avx2(x: u64, data: &[u8]) -> u64 {
        words_differ_any(x, data)
    }

    #[inline(always)]
    fn fill_words_any(mut x: u64, out: &mut [u8]) {
        for w in out.chunks_exact_mut(8) {
            w.copy_from_slice(&mix(x).to_le_bytes());
            x = x.wrapping_add(STEP);
        }
    }

    #[cfg(test)]
    #[test]
    fn the_picked_build_agrees_with_the_baseline() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for words in [0usize, 1, 3, 4, 7, 172, 1000] {
            x = x.wrapping_mul(STEP).wrapping_add(words as u64);
            let (mut picked, mut baseline) = (vec![0; words * 8], vec![0; words * 8]);
            fill_words(x, &mut picked);
            fill_words_any(x, &mut baseline);
            assert_eq!(picked, baseline);
            assert_eq!(words_differ(x, &picked), 0);
            if let Some(b) = picked.last_mut() {
                *b ^= 0x80;
                assert_ne!(words_differ(x, &picked), 0);
                assert_eq!(words_differ(x, &picked), words_differ_any(x, &picked));
            }
        }
    }

    #[inline(always)]
    fn words_differ_any(mut x: u64, data: &[u8]) -> u64 {
        let mut diff = 0;
        for w in data.chunks_exact(8) {
            let got = u64::from_le_bytes(w.try_into().expect("chunks of 8"));
            diff |= got ^ mix(x);
            x = x.wrapping_add(STEP);
        }
        diff
    }
}

/// One direction of a flow's application: writes generated bytes and checks
/// every byte the other side reads against the same generator.
///
/// The content is a pure function of the key and the offset, so the check
/// needs no digest: comparing in place costs one generation of what was read,
/// where BLAKE3 on both sides was 15 % of the simulator's time. The writing
/// session keeps no copy either: it reads each packet's bytes from
/// [`Transfer::content`].
#[derive(Debug)]
pub struct Transfer {
    key: u64,
    pub total: u64,
    pub written: u64,
    pub read: u64,
    /// Whether every byte read so far matched the content at its offset.
    read_matches: bool,
}

/// The content of one direction, as the writing session reads it.
#[derive(Debug)]
struct Generated {
    key: u64,
}

impl braid_proto::GeneratedContent for Generated {
    fn read_at(&self, offset: u64, out: &mut [u8]) {
        fill(self.key, offset, out);
    }
}

impl Transfer {
    pub fn new(key: u64, total: u64) -> Self {
        Transfer {
            key,
            total,
            written: 0,
            read: 0,
            read_matches: true,
        }
    }

    /// The content, for the writing session to serve its packets from.
    pub fn content(&self) -> Box<dyn braid_proto::GeneratedContent> {
        Box::new(Generated { key: self.key })
    }

    /// Hands the session as much content as it takes: `write` is offered
    /// a count and returns the count taken.
    pub fn pump(&mut self, writable: u64, write: impl FnOnce(u64) -> u64) {
        let len = (self.total - self.written).min(writable);
        if len > 0 {
            self.written += write(len);
        }
    }

    pub fn is_written(&self) -> bool {
        self.written == self.total
    }

    /// Records bytes the receiving side read, next in the stream.
    pub fn on_read(&mut self, data: &[u8]) {
        if self.read_matches {
            self.read_matches = matches(self.key, self.read, data);
        }
        self.read += data.len() as u64;
    }

    /// The writing side's session was discarded: its application starts
    /// the content over in the next one.
    pub fn restart_writing(&mut self) {
        self.written = 0;
    }

    /// The reading side's session was discarded: what it read is gone with it.
    pub fn restart_reading(&mut self) {
        self.read = 0;
        self.read_matches = true;
    }

    /// Whether every byte was read, each as the generator makes it (for a
    /// reader whose writer is elsewhere).
    pub fn read_intact(&self) -> bool {
        self.read == self.total && self.read_matches
    }

    /// Whether exactly the written bytes were read.
    pub fn verified(&self) -> bool {
        self.read == self.total && self.is_written() && self.read_matches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(key: u64, offset: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0; len];
        fill(key, offset, &mut out);
        out
    }

    #[test]
    fn content_is_the_same_however_it_is_cut() {
        let whole = filled(7, 3, 100);
        let mut parts = Vec::new();
        for (off, len) in [(3, 5), (8, 1), (9, 94)] {
            parts.extend_from_slice(&filled(7, off, len));
        }
        assert_eq!(whole, parts);
        let other = filled(8, 3, 100);
        assert_ne!(whole, other);
    }

    #[test]
    fn matches_is_fill_compared() {
        for offset in 0..20u64 {
            for len in [0usize, 1, 5, 7, 8, 9, 15, 16, 17, 100] {
                let mut data = filled(3, offset, len);
                assert!(matches(3, offset, &data), "offset {offset} len {len}");
                for i in 0..len {
                    data[i] ^= 0x40;
                    assert!(!matches(3, offset, &data), "offset {offset} byte {i}");
                    data[i] ^= 0x40;
                }
            }
        }
    }

    #[test]
    fn fill_is_the_byte_by_byte_definition() {
        // Byte i of the stream is byte i % 8 of word(i / 8).
        for offset in 0..20u64 {
            for len in [0usize, 1, 5, 7, 8, 9, 15, 16, 17, 100] {
                let got = filled(3, offset, len);
                let want: Vec<u8> = (offset..offset + len as u64)
                    .map(|i| word(3, i / 8)[(i % 8) as usize])
                    .collect();
                assert_eq!(got, want, "offset {offset} len {len}");
            }
        }
    }

    #[test]
    fn verification_catches_a_wrong_byte() {
        let mut t = Transfer::new(1, 1000);
        t.pump(u64::MAX, |n| n);
        let mut sent = vec![0; 1000];
        t.content().read_at(0, &mut sent);
        let mut good = Transfer::new(1, 1000);
        good.pump(u64::MAX, |n| n);
        good.on_read(&sent);
        assert!(good.verified());
        sent[500] ^= 1;
        t.on_read(&sent);
        assert!(!t.verified());
    }

    #[test]
    fn verification_follows_reads_in_any_pieces() {
        let sent = filled(9, 0, 1000);
        for (flip, pieces) in [
            (None, [1, 7, 992]),
            (Some(999), [500, 499, 1]),
            (Some(3), [3, 1, 996]),
        ] {
            let mut data = sent.clone();
            if let Some(i) = flip {
                data[i] ^= 0x80;
            }
            let mut t = Transfer::new(9, 1000);
            t.pump(u64::MAX, |n| n);
            let mut at = 0;
            for len in pieces {
                t.on_read(&data[at..at + len]);
                at += len;
            }
            assert_eq!(
                t.verified(),
                flip.is_none(),
                "flip {flip:?} pieces {pieces:?}"
            );
        }
        // A short read is not a verified one.
        let mut t = Transfer::new(9, 1000);
        t.pump(u64::MAX, |n| n);
        t.on_read(&sent[..999]);
        assert!(!t.verified());
    }
}
