//! The session's random source: ChaCha20 seeded by the caller (the OS
//! CSPRNG in the runtime, the scenario's seed in the simulator).

use rand::{CryptoRng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// A seeded CSPRNG, usable by `snow` and `spake2` as well as directly.
#[derive(Debug, Clone)]
pub(crate) struct SessionRng(ChaCha20Rng);

impl SessionRng {
    pub fn new(seed: [u8; 32]) -> Self {
        SessionRng(ChaCha20Rng::from_seed(seed))
    }

    pub fn fill(&mut self, out: &mut [u8]) {
        self.0.fill_bytes(out);
    }

    pub fn seed(&mut self) -> [u8; 32] {
        let mut s = [0; 32];
        self.fill(&mut s);
        s
    }
}

impl RngCore for SessionRng {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.fill_bytes(dest)
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.0.try_fill_bytes(dest)
    }
}

impl CryptoRng for SessionRng {}

impl snow::types::Random for SessionRng {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        self.fill(dest);
        Ok(())
    }
}
