//! A compact log-linear histogram of millisecond values with bounded relative error.
//!
//! Values below 128 ms are kept exactly. Above, each power of two is split into 128 equal
//! buckets, so a bucket `[lo, hi)` has `hi - lo <= lo / 128`; a percentile is reported as
//! its bucket's midpoint, which is within **0.4 %** (1/256) of the exact nearest-rank
//! value. The maximum is kept exactly. Memory: one `u32` per bucket up to the largest value
//! seen (about 13 KiB for a day), independent of how many values were recorded.

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    counts: Vec<u32>,
    n: u64,
    max: u64,
    /// Exact minimum (meaningful when `n > 0`): with the maximum it bounds the estimate,
    /// so a job whose runs all take 299 s reports exactly 299 s.
    min: u64,
}

const SUB: u64 = 128;
const SUB_BITS: u32 = 7;

fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= 7
    let shift = e - SUB_BITS;
    let mantissa = (v >> shift) & (SUB - 1);
    ((u64::from(e - SUB_BITS + 1)) * SUB + mantissa) as usize
}

/// The `[lo, hi)` range of bucket `i`.
fn range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, i + 1);
    }
    let e = i / SUB - 1 + u64::from(SUB_BITS);
    let mantissa = i % SUB;
    let shift = e - u64::from(SUB_BITS);
    let lo = (SUB + mantissa) << shift;
    (lo, lo + (1 << shift))
}

impl Histogram {
    pub fn record(&mut self, ms: u64) {
        let i = index(ms);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] = self.counts[i].saturating_add(1);
        self.min = if self.n == 0 { ms } else { self.min.min(ms) };
        self.n += 1;
        self.max = self.max.max(ms);
    }

    pub fn merge(&mut self, other: &Histogram) {
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a = a.saturating_add(*b);
        }
        if other.n > 0 {
            self.min = if self.n == 0 {
                other.min
            } else {
                self.min.min(other.min)
            };
        }
        self.n += other.n;
        self.max = self.max.max(other.max);
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Exact maximum, in milliseconds.
    pub fn max(&self) -> Option<u64> {
        (self.n > 0).then_some(self.max)
    }

    /// Nearest-rank percentile (`p` in 0..=100), in milliseconds, within 0.4 %.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((p / 100.0) * self.n as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            seen += u64::from(*c);
            if seen >= rank {
                let (lo, hi) = range(i);
                let v = if hi - lo == 1 {
                    lo as f64
                } else {
                    (lo + hi) as f64 / 2.0
                };
                return Some(v.clamp(self.min as f64, self.max as f64));
            }
        }
        Some(self.max as f64)
    }

    /// Non-empty buckets as `(lo_ms, hi_ms, count)`, for charts.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u32)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, c)| {
                let (lo, hi) = range(i);
                (lo, hi, *c)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_and_bound_the_error() {
        for v in [
            0u64, 1, 127, 128, 129, 255, 256, 1000, 59_999, 600_000, 86_400_000,
        ] {
            let (lo, hi) = range(index(v));
            assert!(lo <= v && v < hi, "{v} in [{lo},{hi})");
            assert!((hi - lo) as f64 <= (lo as f64 / 128.0).max(1.0));
        }
    }

    #[test]
    fn percentiles_within_bound() {
        let mut h = Histogram::default();
        let mut vals: Vec<u64> = (1..=10_000).map(|i| i * 37 % 100_003).collect();
        for v in &vals {
            h.record(*v);
        }
        vals.sort_unstable();
        for p in [50.0, 95.0, 99.0, 100.0] {
            let rank = ((p / 100.0) * vals.len() as f64).ceil() as usize;
            let exact = vals[rank - 1] as f64;
            let got = h.percentile(p).unwrap_or(0.0);
            assert!(
                (got - exact).abs() <= exact / 256.0 + 0.5,
                "p{p}: {got} vs {exact}"
            );
        }
        assert_eq!(h.max(), vals.last().copied());
    }
}
