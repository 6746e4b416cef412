//! 64-bit hashing for the fold: run ids, output keys and the hash maps keyed by them.
//!
//! 64-bit hashes of distinct strings collide with probability about n²/2⁶⁵ (below 10⁻⁶
//! for 5 million run ids); `docs/audit.md` states it.

use std::hash::{BuildHasherDefault, Hasher};

/// Keys that already are hashes (or small integers) need no more hashing than a multiply.
#[derive(Default, Clone, Copy)]
pub(crate) struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = hash_bytes(self.0, bytes);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = mix(self.0 ^ n, 0x9E37_79B9_7F4A_7C15);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// The hasher of every map keyed by a hash or a small id.
pub(crate) type Fast = BuildHasherDefault<MixHasher>;

/// Folds two words into one (the high and low halves of their 128-bit product).
#[inline]
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    let r = u128::from(a).wrapping_mul(u128::from(b));
    (r as u64) ^ ((r >> 64) as u64)
}

/// A 64-bit string hash (wyhash-style multiply-mix over 8-byte words).
#[inline]
pub(crate) fn hash_bytes(seed: u64, bytes: &[u8]) -> u64 {
    const P0: u64 = 0xa076_1d64_78bd_642f;
    const P1: u64 = 0xe703_7ed1_a0b4_28db;
    let mut h = seed ^ P0 ^ (bytes.len() as u64).wrapping_mul(P1);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = mix(h ^ u64::from_le_bytes(w), P1);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = mix(h ^ u64::from_le_bytes(w) ^ P0, P1);
    }
    mix(h, P0 ^ P1)
}

/// The hash a run id is known by.
#[inline]
pub(crate) fn run_hash(run_id: &str) -> u64 {
    hash_bytes(0, run_id.as_bytes())
}
