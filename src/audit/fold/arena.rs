//! Run ids, each stored once: executions and findings refer to them by a packed `u64`,
//! and only findings turn them back into strings.

/// Run ids in 1 MiB chunks (no doubling copies as the ledger grows).
#[derive(Default)]
pub(crate) struct Arena {
    chunks: Vec<Vec<u8>>,
}

const CHUNK: usize = 1 << 20;

impl Arena {
    /// Stores `s` (its first 65 535 bytes); returns a reference packing chunk index,
    /// offset and length.
    pub(crate) fn push(&mut self, s: &str) -> u64 {
        let b = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
        let need_new = match self.chunks.last() {
            Some(c) => c.len() + b.len() > c.capacity(),
            None => true,
        };
        if need_new {
            self.chunks.push(Vec::with_capacity(CHUNK.max(b.len())));
        }
        let ci = self.chunks.len() - 1;
        let c = &mut self.chunks[ci];
        let off = c.len();
        c.extend_from_slice(b);
        ((ci as u64) << 40) | ((off as u64) << 16) | b.len() as u64
    }

    /// The run id behind a reference from [`Arena::push`] (`?` for one cut inside a
    /// character or not from this arena).
    pub(crate) fn get(&self, r: u64) -> &str {
        let ci = (r >> 40) as usize;
        let off = ((r >> 16) & 0xFF_FFFF) as usize;
        let len = (r & 0xFFFF) as usize;
        self.chunks
            .get(ci)
            .and_then(|c| c.get(off..off + len))
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("?")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_come_back_as_stored() {
        let mut a = Arena::default();
        let r1 = a.push("run-1");
        let r2 = a.push("");
        let r3 = a.push("ü-run");
        assert_eq!((a.get(r1), a.get(r2), a.get(r3)), ("run-1", "", "ü-run"));
    }
}
