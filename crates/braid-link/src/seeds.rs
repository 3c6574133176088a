//! Every seed a run derives from its one seed, each behind a name: the
//! simulator, `braid relay` and `braid link` build a path's links from
//! [`links`], so one seed gives the same loss, jitter and duplication
//! wherever the path is emulated.
//!
//! A derivation hashes the run's seed with a tag naming the part of the run
//! and that part's indices. The tags and the order of the indices are part
//! of every recorded result: changing one changes them all.

/// SplitMix64 (Steele, Lea, Flood 2014): a fast, well-mixed 64-bit step.
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// An independent seed for the part of a run named by `parts`.
fn derive(seed: u64, parts: &[u64]) -> u64 {
    parts
        .iter()
        .fold(splitmix64(seed), |acc, &p| splitmix64(acc ^ splitmix64(p)))
}

/// Tags of the derivations, in the order they were introduced.
const LINK: u64 = 1;
const CONTENT: u64 = 2;
const SESSION_ID: u64 = 3;
const SESSION_RNG: u64 = 4;

/// Which end of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    Client,
    Server,
}

/// The RNG seeds of path `path`'s two links: [client → server, server →
/// client]. Each link draws its loss, jitter and duplication from its own.
pub fn links(seed: u64, path: usize) -> [u64; 2] {
    [0, 1].map(|dir| derive(seed, &[LINK, path as u64, dir]))
}

/// The keys of flow `flow`'s generated content: [client → server, server →
/// client].
pub fn content(seed: u64, flow: usize) -> [u64; 2] {
    [0, 1].map(|dir| derive(seed, &[CONTENT, flow as u64, dir]))
}

/// The session id the client of flow `flow` chooses.
pub fn session_id(seed: u64, flow: usize) -> u64 {
    derive(seed, &[SESSION_ID, flow as u64])
}

/// The CSPRNG seed of one end of flow `flow`, which the runtime takes from
/// the OS instead.
pub fn session_rng(seed: u64, flow: usize, side: Side) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let part = derive(seed, &[SESSION_RNG, flow as u64, side as u64, i as u64]);
        chunk.copy_from_slice(&part.to_le_bytes());
    }
    out
}

/// The secret of a sealed flow's server key pair (the client pins its
/// public half): the server's CSPRNG seed, changed so the two differ.
pub fn server_key(seed: u64, flow: usize) -> [u8; 32] {
    session_rng(seed, flow, Side::Server).map(|b| b ^ 0x5a)
}

/// The seed `braid demo` gives the relay of its path `path` (whose links
/// then come from [`links`]`(that seed, 0)`): not the simulator's path
/// `path`, but kept so that a demo with a given `--seed` stays the same.
pub fn demo_relay(seed: u64, path: usize) -> u64 {
    seed.wrapping_add(path as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivations_are_fixed() {
        // Recorded results depend on these values: they must never change.
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
        let [f, r] = links(1, 0);
        assert_ne!(f, r);
        assert_eq!(f, derive(1, &[1, 0, 0]));
        assert_eq!(content(7, 2)[1], derive(7, &[2, 2, 1]));
        assert_eq!(session_id(7, 2), derive(7, &[3, 2]));
        let rng = session_rng(7, 2, Side::Server);
        assert_eq!(rng[8..16], derive(7, &[4, 2, 1, 1]).to_le_bytes());
        assert_eq!(server_key(7, 2)[0], rng[0] ^ 0x5a);
        assert_eq!(demo_relay(u64::MAX, 1), 0);
    }
}
