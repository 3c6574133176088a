//! A short, seeded run of every fuzz target: random bytes and mutations of
//! genuine datagrams. The long, coverage-guided runs are in `fuzz/`.

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn random_input(rng: &mut ChaCha8Rng, max: usize) -> Vec<u8> {
    let mut v = vec![0u8; rng.gen_range(0..max)];
    rng.fill_bytes(&mut v);
    v
}

/// Genuine first datagrams of each mode, to mutate.
fn genuine_hellos() -> Vec<Vec<u8>> {
    use braid_proto::{Instant, Keypair, Security, Session, SessionConfig};
    let securities = [
        Security::pinned(Keypair::generate([5; 32]).public()),
        Security::code("7-amber-walrus"),
        Security::insecure(),
    ];
    securities
        .into_iter()
        .map(|security| {
            let cfg = SessionConfig {
                security,
                ..SessionConfig::default()
            };
            let mut s = Session::connect(cfg, 42, Instant::ZERO, [9; 32]).unwrap();
            let mut buf = Vec::new();
            let t = s.poll_transmit(Instant::ZERO, 1, &mut buf).unwrap();
            buf.truncate(t.size);
            buf
        })
        .collect()
}

fn mutate(rng: &mut ChaCha8Rng, d: &[u8]) -> Vec<u8> {
    let mut d = d.to_vec();
    for _ in 0..rng.gen_range(1..8) {
        match rng.gen_range(0..3) {
            0 if !d.is_empty() => {
                let i = rng.gen_range(0..d.len());
                d[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if !d.is_empty() => d.truncate(rng.gen_range(0..d.len())),
            _ => d.push(rng.gen()),
        }
    }
    d
}

#[test]
fn decoder() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let hellos = genuine_hellos();
    for i in 0..20_000 {
        let input = if i % 2 == 0 {
            random_input(&mut rng, 600)
        } else {
            mutate(&mut rng, &hellos[i % hellos.len()])
        };
        braid_fuzz::decode(&input);
    }
}

#[test]
fn handshake() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let hellos = genuine_hellos();
    for i in 0..600u32 {
        let mode = (i % 3) as u8;
        let mut input = vec![mode];
        if i % 2 == 0 {
            input.extend(mutate(&mut rng, &hellos[usize::from(mode)]));
        } else {
            input.extend(random_input(&mut rng, 1500));
        }
        braid_fuzz::handshake(&input);
    }
}

/// Admission scripts: random bytes, so every operation and address mix
/// comes up, against small limits.
#[test]
fn endpoint_admission() {
    let mut rng = ChaCha8Rng::seed_from_u64(34);
    for _ in 0..300 {
        let input = random_input(&mut rng, 200);
        braid_fuzz::endpoint(&input);
    }
}

/// Rendezvous scripts: random records from six addresses, half of them
/// well-formed requests echoing the cookies they were given.
#[test]
fn rendezvous_relay() {
    let mut rng = ChaCha8Rng::seed_from_u64(37);
    let (mut paired, mut forwarded) = (0, 0);
    for _ in 0..2_000 {
        let input = random_input(&mut rng, 1_000);
        let s = braid_fuzz::rendezvous(&input);
        paired += s.paired;
        forwarded += s.forwarded_datagrams;
    }
    // The scripts reach pairing and forwarding, not only the cookie check.
    assert!(
        paired > 100 && forwarded > 100,
        "{paired} pairs, {forwarded} forwarded"
    );
}

#[test]
fn session_pair_under_attack() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for i in 0..150u32 {
        let mut input = vec![(i % 3) as u8];
        for _ in 0..rng.gen_range(0..60) {
            input.push(rng.gen());
            input.extend(random_input(&mut rng, 80).iter().filter(|&&b| b != 0xff));
            input.push(0xff);
        }
        braid_fuzz::session_pair(&input);
    }
}

/// Writes genuine first datagrams as seeds for the coverage-guided runs:
/// `cargo test -p braid-fuzz -- --ignored write_seeds`.
#[test]
#[ignore]
fn write_seeds() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    for target in ["decode", "handshake", "session_pair"] {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        for (mode, hello) in genuine_hellos().into_iter().enumerate() {
            let mut seed = Vec::new();
            if target != "decode" {
                seed.push(mode as u8); // the protection mode
            }
            seed.extend(&hello);
            std::fs::write(dir.join(format!("hello-{mode}")), seed).unwrap();
        }
    }
}
