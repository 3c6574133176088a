//! Sealing and opening datagrams with the handshake's directional keys,
//! and the key phases that replace them as a session goes on.
//!
//! Each direction's keys form a ratchet (RFC 9001 §6 is the model):
//! Noise's split gives the first secret of each direction, every next
//! secret is HKDF-Expand(secret, "braid key update") and each phase's
//! AES-256-GCM key is HKDF-Expand(secret, "braid packet key"), all with
//! `ring::hkdf` (SHA-256). A secret is zeroised as soon as the next one is
//! derived from it. Both directions step together: the side that starts a
//! new phase seals with its next key and flips the header's key-phase bit;
//! the peer, seeing the other bit, tries its next opening key and, once a
//! datagram opens with it (and only then), steps both of its directions
//! too. The previous opening key stays a little while for reordered
//! datagrams of the old phase.

use crate::wire::{header_len, HEADER_LEN, KEY_PHASE_BIT, MBECN_OFFSET};
use crate::{Instant, PathId};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::hkdf::{Prk, HKDF_SHA256};
use std::time::Duration;
use zeroize::Zeroizing;

/// Bytes the AEAD tag adds to every sealed datagram.
pub const TAG_LEN: usize = 16;

/// Packets one AES-GCM key may seal (RFC 9001 §6.6's confidentiality
/// limit, as quinn and rustls apply it). A sender starts a new phase long
/// before (`SessionConfig::key_update_packets`); if the peer never lets it,
/// the session ends instead of sealing more.
pub const AES_GCM_PACKET_LIMIT: u64 = 1 << 23;

/// The label of the ratchet step from one phase's secret to the next.
const UPDATE_LABEL: &[u8] = b"braid key update";
/// The label of a phase's AES-256-GCM key, derived from its secret.
const KEY_LABEL: &[u8] = b"braid packet key";

type Secret = Zeroizing<[u8; 32]>;

/// The next phase's secret: HKDF-Expand(secret, "braid key update").
fn next_secret(secret: &[u8; 32]) -> Secret {
    let mut next = Zeroizing::new([0u8; 32]);
    Prk::new_less_safe(HKDF_SHA256, secret)
        .expand(&[UPDATE_LABEL], HKDF_SHA256)
        .and_then(|okm| okm.fill(&mut next[..]))
        .expect("32 bytes is within HKDF-SHA256's output limit");
    next
}

/// A phase's AEAD key: HKDF-Expand(secret, "braid packet key"). The key
/// bytes never leave `ring`.
fn packet_key(secret: &[u8; 32]) -> LessSafeKey {
    let prk = Prk::new_less_safe(HKDF_SHA256, secret);
    let okm = prk
        .expand(&[KEY_LABEL], &AES_256_GCM)
        .expect("a 32-byte key is within HKDF-SHA256's output limit");
    LessSafeKey::new(UnboundKey::from(okm))
}

/// Which key opened a datagram, for [`PacketKeys::on_opened`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opened {
    /// The current phase's.
    Current,
    /// The previous phase's: a datagram the peer sealed before it stepped.
    Previous,
    /// The next phase's: the peer has started a new phase.
    Next,
}

/// When a sender starts a new phase.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UpdatePolicy {
    /// After this many packets sealed under one key (all paths together).
    pub packets: u64,
    /// Or after this long in one phase.
    pub interval: Duration,
}

/// The two directions' keys of one session, and their phase.
pub(crate) struct PacketKeys {
    /// Phases stepped since the handshake; its low bit is on the wire.
    phase: u64,
    seal: LessSafeKey,
    /// The current sealing secret, from which the next is derived.
    seal_secret: Secret,
    open: LessSafeKey,
    /// The next phase's opening key, ready before the peer uses it, and
    /// its secret, from which the one after is derived.
    open_next: LessSafeKey,
    open_next_secret: Secret,
    /// The previous phase's opening key, for reordered datagrams.
    open_prev: Option<LessSafeKey>,
    /// When `open_prev` is dropped; `None` while the peer has not shown
    /// the current phase (it may still be sealing with the previous one).
    prev_until: Option<Instant>,
    /// The peer has shown it has the current phase: a datagram opened with
    /// its key. Until then no newer phase may start.
    peer_has_phase: bool,
    /// Packets sealed under the current key, and when the phase began
    /// (the first packet sealed in it, or the step).
    sealed: u64,
    phase_start: Option<Instant>,
}

impl std::fmt::Debug for PacketKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PacketKeys(phase {}, ..)", self.phase)
    }
}

/// A path never reuses a packet number and each direction and phase has
/// its own key, so (path, packet number) never repeats under one key. The
/// nonce takes the full 64-bit number, of which the header carries only
/// the low bits, and the path, which a short header leaves to the address.
fn nonce(path: PathId, packet_number: u64) -> Nonce {
    let mut n = [0u8; NONCE_LEN];
    n[3] = path.0;
    n[4..].copy_from_slice(&packet_number.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

/// The header as associated data. The MB-ECN byte is left out: forwarders
/// rewrite it on the way, as routers rewrite IP's ECN bits. The key-phase
/// bit is covered.
fn aad(header: &[u8]) -> HeaderAad {
    let mut bytes = [0u8; HEADER_LEN];
    bytes[..header.len()].copy_from_slice(header);
    bytes[MBECN_OFFSET] = 0;
    HeaderAad {
        bytes,
        len: header.len(),
    }
}

/// A header of 8 to 11 bytes as associated data, without allocating.
struct HeaderAad {
    bytes: [u8; HEADER_LEN],
    len: usize,
}

impl AsRef<[u8]> for HeaderAad {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

fn open_with<'a>(
    key: &LessSafeKey,
    datagram: &'a mut [u8],
    path: PathId,
    packet_number: u64,
) -> Option<&'a mut [u8]> {
    let len = header_len(datagram[0]);
    let (header, payload) = datagram.split_at_mut(len);
    let nonce = nonce(path, packet_number);
    key.open_in_place(nonce, Aad::from(aad(header)), payload)
        .ok()
}

impl PacketKeys {
    /// The keys of phase 0 from the handshake's two directional secrets.
    pub fn new(seal: [u8; 32], open: [u8; 32]) -> PacketKeys {
        let (seal, open) = (Zeroizing::new(seal), Zeroizing::new(open));
        let open_next_secret = next_secret(&open);
        PacketKeys {
            phase: 0,
            seal: packet_key(&seal),
            seal_secret: seal,
            open: packet_key(&open),
            open_next: packet_key(&open_next_secret),
            open_next_secret,
            open_prev: None,
            prev_until: None,
            peer_has_phase: false,
            sealed: 0,
            phase_start: None,
        }
    }

    /// Phases started since the handshake, by either side.
    pub fn updates(&self) -> u64 {
        self.phase
    }

    /// The key-phase bit of the current phase.
    pub fn phase_bit(&self) -> bool {
        self.phase & 1 == 1
    }

    /// Whether the current key has sealed all it may and no new phase can
    /// start: nothing more may be sealed but a few CLOSE frames.
    pub fn is_exhausted(&self) -> bool {
        self.sealed >= AES_GCM_PACKET_LIMIT - 16
    }

    /// Moves both directions to the next phase. The old sealing secret and
    /// the old next-opening secret are zeroised as they are replaced; the
    /// old opening key is kept as the previous one.
    fn step(&mut self, now: Instant) {
        let seal_secret = next_secret(&self.seal_secret);
        self.seal = packet_key(&seal_secret);
        self.seal_secret = seal_secret;
        let after = next_secret(&self.open_next_secret);
        let next = std::mem::replace(&mut self.open_next, packet_key(&after));
        self.open_next_secret = after;
        self.open_prev = Some(std::mem::replace(&mut self.open, next));
        self.prev_until = None;
        self.peer_has_phase = false;
        self.sealed = 0;
        self.phase_start = Some(now);
        self.phase += 1;
    }

    /// Drops the previous phase's opening key once its time is up.
    pub fn expire(&mut self, now: Instant) {
        if self.prev_until.is_some_and(|t| now >= t) {
            self.open_prev = None;
            self.prev_until = None;
        }
    }

    /// Whether a new phase could start at `now` (see [`Self::prepare_seal`]),
    /// whether or not one is due.
    pub fn can_step(&mut self, now: Instant) -> bool {
        self.expire(now);
        self.peer_has_phase && self.open_prev.is_none()
    }

    /// Whether the previous phase's key may still open a datagram at `now`.
    fn prev_usable(&self, now: Instant) -> Option<&LessSafeKey> {
        self.open_prev
            .as_ref()
            .filter(|_| self.prev_until.is_none_or(|t| now < t))
    }

    /// Readies the next packet sealed at `now`: starts a new phase first if
    /// the current key has sealed `policy.packets` or lasted
    /// `policy.interval`, the peer has shown it has the current phase, and
    /// the previous phase's key is gone (RFC 9001 §6.5: a peer may still
    /// keep its old key that long, and could not open a newer phase's
    /// datagrams). Returns the key-phase bit to put in the header.
    pub fn prepare_seal(&mut self, now: Instant, policy: UpdatePolicy) -> bool {
        self.expire(now);
        let start = *self.phase_start.get_or_insert(now);
        let due = self.sealed >= policy.packets
            || now.saturating_duration_since(start) >= policy.interval;
        if due && self.peer_has_phase && self.open_prev.is_none() {
            self.step(now);
        }
        self.phase_bit()
    }

    /// Encrypts the datagram that starts at `start` in `buf` (everything
    /// after its header) in place and appends the tag; `packet_number` is
    /// the full number whose low bits the header carries. The header's
    /// key-phase bit must be [`PacketKeys::phase_bit`]'s; `path` is the
    /// connection it goes on.
    pub fn seal(&mut self, buf: &mut Vec<u8>, start: usize, path: PathId, packet_number: u64) {
        let len = header_len(buf[start]);
        let (header, payload) = buf[start..].split_at_mut(len);
        debug_assert_eq!(header[0] & KEY_PHASE_BIT != 0, self.phase_bit());
        let nonce = nonce(path, packet_number);
        let tag = self
            .seal
            .seal_in_place_separate_tag(nonce, Aad::from(aad(header)), payload)
            .expect("payload within the AEAD's limit");
        buf.extend_from_slice(tag.as_ref());
        self.sealed += 1;
    }

    /// Opens `datagram` in place, its header's packet number expanded to
    /// `packet_number`, as it arrived on connection `path`: with the current key if its key-phase bit is the
    /// current phase's, else with the previous phase's key (while kept) or
    /// the next's. Returns the plaintext frames and which key opened them,
    /// or `None` if no key opened it. Nothing changes here: only
    /// [`PacketKeys::on_opened`], called for an opened datagram, moves
    /// the phase.
    pub fn open<'a>(
        &self,
        now: Instant,
        datagram: &'a mut [u8],
        path: PathId,
        packet_number: u64,
    ) -> Option<(&'a [u8], Opened)> {
        let header = header_len(*datagram.first()?);
        if datagram.len() < header + TAG_LEN {
            return None;
        }
        let bit = datagram[0] & KEY_PHASE_BIT != 0;
        if bit == self.phase_bit() {
            let plain = open_with(&self.open, datagram, path, packet_number)?;
            return Some((plain, Opened::Current));
        }
        // The other bit: a late datagram of the previous phase, or the
        // first of the next. While the previous key is kept, both are
        // possible, and a failed open leaves the bytes unspecified: the
        // next key tries a copy.
        if let Some(prev) = self.prev_usable(now) {
            let copy = datagram.to_vec();
            if open_with(prev, datagram, path, packet_number).is_some() {
                let len = datagram.len() - TAG_LEN;
                return Some((&datagram[header..len], Opened::Previous));
            }
            datagram.copy_from_slice(&copy);
        }
        let plain = open_with(&self.open_next, datagram, path, packet_number)?;
        Some((plain, Opened::Next))
    }

    /// A datagram opened at `now` with the key `opened` says: the peer has
    /// the current phase, or has started the next (both directions step;
    /// the previous key then lives `grace` longer). Call it only for a
    /// datagram [`PacketKeys::open`] opened.
    pub fn on_opened(&mut self, now: Instant, opened: Opened, grace: Duration) {
        match opened {
            Opened::Previous => {}
            Opened::Current => {
                if !self.peer_has_phase {
                    self.peer_has_phase = true;
                    if self.open_prev.is_some() {
                        self.prev_until = Some(now + grace);
                    }
                }
            }
            Opened::Next => {
                self.step(now);
                self.peer_has_phase = true;
                self.prev_until = Some(now + grace);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const GRACE: Duration = Duration::from_millis(600);

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn pair() -> (PacketKeys, PacketKeys) {
        (
            PacketKeys::new([1; 32], [2; 32]),
            PacketKeys::new([2; 32], [1; 32]),
        )
    }

    /// A datagram on path 3 carrying `body`, sealed by `keys` at `now`
    /// (a new phase starting first if `policy` says so).
    fn sealed(
        keys: &mut PacketKeys,
        now: Instant,
        policy: UpdatePolicy,
        pn: u64,
        body: &[u8],
    ) -> Vec<u8> {
        let bit = keys.prepare_seal(now, policy);
        let mut d = vec![0u8; HEADER_LEN];
        d[0] = crate::wire::VERSION | 0x60 | if bit { KEY_PHASE_BIT } else { 0 };
        d[crate::wire::PATH_OFFSET] = 3;
        d[HEADER_LEN - 4..].copy_from_slice(&(pn as u32).to_be_bytes());
        d.extend_from_slice(body);
        keys.seal(&mut d, 0, PathId(3), pn);
        d
    }

    /// Opens `d` at `now` as a session does: the phase moves only if it opened.
    fn open(keys: &mut PacketKeys, now: Instant, d: &[u8], pn: u64) -> Option<Vec<u8>> {
        let mut d = d.to_vec();
        let (plain, opened) = keys.open(now, &mut d, PathId(3), pn)?;
        let plain = plain.to_vec();
        keys.on_opened(now, opened, GRACE);
        Some(plain)
    }

    const NEVER: UpdatePolicy = UpdatePolicy {
        packets: u64::MAX,
        interval: Duration::MAX,
    };
    const EVERY_2: UpdatePolicy = UpdatePolicy {
        packets: 2,
        interval: Duration::MAX,
    };

    #[test]
    fn sealed_datagrams_open_only_intact() {
        let (mut a, b) = pair();
        let pn = (1 << 40) + 9;
        let mut d = vec![0u8; HEADER_LEN];
        d[0] = crate::wire::VERSION | 0x60;
        d[crate::wire::PATH_OFFSET] = 3;
        d[HEADER_LEN - 1] = 9;
        d.extend_from_slice(b"frames");
        // Sealing a datagram after others in a batch leaves those alone.
        let mut batch = vec![7u8; 5];
        batch.extend_from_slice(&d);
        a.seal(&mut batch, 5, PathId(3), pn);
        assert_eq!(batch[..5], [7; 5]);
        a.seal(&mut d, 0, PathId(3), pn);
        assert_eq!(batch[5..], d[..]);
        assert_eq!(d.len(), HEADER_LEN + 6 + TAG_LEN);
        // The MB-ECN byte may change on the way.
        let mut marked = d.clone();
        marked[MBECN_OFFSET] = 5;
        let (plain, opened) = b.open(at(0), &mut marked, PathId(3), pn).unwrap();
        assert_eq!((plain, opened), (&b"frames"[..], Opened::Current));
        // Any other bit flipped, in header, payload or tag, fails.
        for i in (0..d.len()).filter(|&i| i != MBECN_OFFSET) {
            let mut bad = d.clone();
            bad[i] ^= 1;
            assert!(
                b.open(at(0), &mut bad, PathId(3), pn).is_none(),
                "bit flip at {i}"
            );
        }
        // The same low bits expanded into another window do not open: the
        // nonce is the full number.
        assert!(b.open(at(0), &mut d.clone(), PathId(3), 9).is_none());
        // Our own direction's key does not open what we sealed.
        assert!(a.open(at(0), &mut d.clone(), PathId(3), pn).is_none());
        // Nor does it open as another connection's: the nonce names the
        // path, which a short header leaves to the address.
        assert!(b.open(at(0), &mut d.clone(), PathId(4), pn).is_none());
        let mut short = vec![crate::wire::VERSION | 0x70, 0, 0, 0, 0, 9];
        short.extend_from_slice(b"frames");
        a.seal(&mut short, 0, PathId(3), pn);
        assert_eq!(short.len(), crate::wire::SHORT_HEADER_LEN + 6 + TAG_LEN);
        assert!(b.open(at(0), &mut short.clone(), PathId(2), pn).is_none());
        let (plain, _) = b.open(at(0), &mut short, PathId(3), pn).unwrap();
        assert_eq!(plain, b"frames");
    }

    #[test]
    fn the_ratchet_is_deterministic_and_every_step_differs() {
        let chain = |seed: [u8; 32]| {
            let mut s = Zeroizing::new(seed);
            let mut out = vec![*s];
            for _ in 0..4 {
                s = next_secret(&s);
                out.push(*s);
            }
            out
        };
        let a = chain([5; 32]);
        assert_eq!(a, chain([5; 32]));
        for i in 0..a.len() {
            for j in i + 1..a.len() {
                assert_ne!(a[i], a[j], "steps {i} and {j}");
            }
        }
        assert_ne!(a[1], chain([6; 32])[1]);
        // A phase's key is not its secret (nor the next secret) used raw.
        let probe = |key: &LessSafeKey| {
            let mut d = vec![0u8; 8];
            let tag = key
                .seal_in_place_separate_tag(
                    Nonce::assume_unique_for_key([0; NONCE_LEN]),
                    Aad::empty(),
                    &mut d,
                )
                .unwrap();
            (d, tag.as_ref().to_vec())
        };
        let derived = probe(&packet_key(&a[1]));
        assert_eq!(derived, probe(&packet_key(&a[1])));
        for raw in [a[1], a[2]] {
            let raw = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &raw).unwrap());
            assert_ne!(derived, probe(&raw));
        }
        assert_ne!(derived, probe(&packet_key(&a[2])));
    }

    #[test]
    fn both_directions_step_and_the_old_phase_opens_only_within_the_grace() {
        let (mut a, mut b) = pair();
        // Phase 0 both ways; each has seen the other's phase.
        let d = sealed(&mut a, at(0), NEVER, 0, b"a0");
        assert_eq!(open(&mut b, at(1), &d, 0).unwrap(), b"a0");
        let d = sealed(&mut b, at(1), NEVER, 0, b"b0");
        assert_eq!(open(&mut a, at(2), &d, 0).unwrap(), b"b0");
        // a has sealed a0, a1 and a2; the fourth packet starts phase 1.
        let every_3 = UpdatePolicy {
            packets: 3,
            ..EVERY_2
        };
        let a1 = sealed(&mut a, at(3), every_3, 1, b"a1");
        let a2 = sealed(&mut a, at(3), every_3, 2, b"a2");
        assert_eq!(a.updates(), 0);
        let a3 = sealed(&mut a, at(3), every_3, 3, b"a3");
        assert_eq!((a.updates(), a3[0] & KEY_PHASE_BIT), (1, KEY_PHASE_BIT));
        // No further phase until the peer shows it has this one.
        for pn in 4..10 {
            sealed(&mut a, at(4), EVERY_2, pn, b"more");
        }
        assert_eq!(a.updates(), 1);
        // b, still in phase 0, seals with its old key; a opens it with the
        // previous key it keeps.
        let b_old = sealed(&mut b, at(4), NEVER, 1, b"b-old");
        assert_eq!(open(&mut a, at(5), &b_old, 1).unwrap(), b"b-old");
        // The phase-1 datagram moves b to phase 1, both ways; a's phase-0
        // datagrams, reordered, still open.
        assert_eq!(open(&mut b, at(6), &a3, 3).unwrap(), b"a3");
        assert_eq!(b.updates(), 1);
        assert_eq!(open(&mut b, at(7), &a2, 2).unwrap(), b"a2");
        let b1 = sealed(&mut b, at(8), NEVER, 2, b"b1");
        assert_eq!(b1[0] & KEY_PHASE_BIT, KEY_PHASE_BIT);
        assert_eq!(open(&mut a, at(9), &b1, 2).unwrap(), b"b1");
        // Within the grace the old phase opens; after it, it is forged.
        let b_late = {
            let mut b0 = PacketKeys::new([2; 32], [1; 32]);
            sealed(&mut b0, at(0), NEVER, 1_000, b"late")
        };
        assert!(open(&mut a, (at(9) + GRACE).saturating_sub(MS), &b_late, 1_000).is_some());
        assert!(open(&mut b, (at(6) + GRACE).saturating_sub(MS), &a1, 1).is_some());
        assert!(open(&mut a, at(9) + GRACE, &b_late, 1_000).is_none());
        assert!(open(&mut b, at(6) + GRACE, &a1, 1).is_none());
        // Phase 2 may now start, from either side; it is the next key
        // (the same bit as phase 0, whose key is gone).
        let later = at(9) + GRACE;
        sealed(&mut b, later, EVERY_2, 3, b"b-second");
        assert_eq!(b.updates(), 1);
        let b2 = sealed(&mut b, later, EVERY_2, 4, b"b2");
        assert_eq!((b.updates(), b2[0] & KEY_PHASE_BIT), (2, 0));
        assert_eq!(open(&mut a, later, &b2, 4).unwrap(), b"b2");
        assert_eq!(a.updates(), 2);
        let a2 = sealed(&mut a, later, NEVER, 10, b"a-phase2");
        assert_eq!(open(&mut b, later, &a2, 10).unwrap(), b"a-phase2");
    }

    #[test]
    fn a_forged_datagram_with_the_other_phase_bit_changes_nothing() {
        let (mut a, mut b) = pair();
        let d = sealed(&mut a, at(0), NEVER, 0, b"a0");
        assert!(open(&mut b, at(0), &d, 0).is_some());
        // Flipping the bit of an authentic datagram, or sending garbage
        // with it, opens under no key: b stays in phase 0.
        let mut flipped = d.clone();
        flipped[0] ^= KEY_PHASE_BIT;
        let mut garbage = vec![0x55u8; HEADER_LEN + 40];
        garbage[0] = crate::wire::VERSION | KEY_PHASE_BIT;
        for forged in [flipped, garbage] {
            assert!(b.open(at(1), &mut forged.clone(), PathId(3), 0).is_none());
            assert!(open(&mut b, at(1), &forged, 0).is_none());
            assert_eq!((b.updates(), b.phase_bit()), (0, false));
        }
        // And b's keys are exactly as they were: a's phase-0 datagrams
        // open, b seals phase 0, and a real phase 1 still moves it.
        let d = sealed(&mut a, at(2), NEVER, 1, b"still");
        assert_eq!(open(&mut b, at(2), &d, 1).unwrap(), b"still");
        let bd = sealed(&mut b, at(2), NEVER, 0, b"b0");
        assert_eq!(bd[0] & KEY_PHASE_BIT, 0);
        assert!(open(&mut a, at(3), &bd, 0).is_some());
        let d = sealed(&mut a, at(3), EVERY_2, 2, b"p1");
        assert_eq!(a.updates(), 1);
        assert_eq!(open(&mut b, at(4), &d, 2).unwrap(), b"p1");
        assert_eq!(b.updates(), 1);
    }

    #[test]
    fn a_key_the_peer_never_lets_go_is_exhausted_at_aes_gcms_limit() {
        let (mut a, _) = pair();
        // The peer never showed phase 0: no update may start, however due.
        assert!(!a.prepare_seal(at(0), EVERY_2));
        a.sealed = AES_GCM_PACKET_LIMIT - 17;
        assert!(!a.is_exhausted());
        sealed(&mut a, at(1), EVERY_2, 0, b"last");
        assert_eq!(a.updates(), 0);
        assert!(a.is_exhausted());
    }

    #[test]
    fn a_phase_starts_after_the_interval_too() {
        let (mut a, mut b) = pair();
        let policy = UpdatePolicy {
            packets: u64::MAX,
            interval: Duration::from_secs(120),
        };
        let d = sealed(&mut b, at(0), policy, 0, b"b0");
        assert!(open(&mut a, at(0), &d, 0).is_some());
        sealed(&mut a, at(0), policy, 0, b"a0");
        sealed(&mut a, at(119_999), policy, 1, b"a1");
        assert_eq!(a.updates(), 0);
        let d = sealed(&mut a, at(120_000), policy, 2, b"a2");
        assert_eq!(a.updates(), 1);
        assert_eq!(open(&mut b, at(120_001), &d, 2).unwrap(), b"a2");
        assert_eq!(b.updates(), 1);
    }
}
