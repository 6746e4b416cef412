//! The retry policy's arithmetic of SPEC 3.1, which lint (BG408) judges and the guard
//! (`run`) follows: one definition, so what lint warns about is what `run` does.

use crate::manifest::duration::Duration;
use crate::manifest::model::{Backoff, Retry};

/// The retry window of SPEC 3.1 in seconds, and the part of it that is delays
/// (saturating: a window beyond any schedule's gap needs no exact figure).
pub fn retry_window(retry: &Retry, attempts: u64, expected: Duration) -> (u128, u128) {
    let runs = u128::from(attempts) * u128::from(expected.secs());
    let n = u128::from(attempts.saturating_sub(1));
    let initial = u128::from(retry.initial_delay.value().map_or(0, |d| d.secs()));
    let cap = retry.max_delay.value().map(|d| u128::from(d.secs()));
    let delays = match retry.backoff.value() {
        None => 0,
        Some(Backoff::Fixed) => n.saturating_mul(initial),
        Some(Backoff::Exponential) => {
            let mut total: u128 = 0;
            let mut d = initial;
            let mut i: u128 = 0;
            while i < n && d > 0 {
                if let Some(m) = cap
                    && d >= m
                {
                    total = total.saturating_add((n - i).saturating_mul(m));
                    break;
                }
                total = total.saturating_add(d);
                if total >= u128::from(u64::MAX) {
                    break;
                }
                d = d.saturating_mul(2);
                i += 1;
            }
            total
        }
    };
    (runs.saturating_add(delays), delays)
}

/// `delay(i)` of SPEC 3.1: the wait after attempt `i` before attempt `i+1` (the delays
/// of `i+1` attempts less those of `i`).
pub fn delay_secs(retry: &Retry, i: u64) -> u64 {
    let with = retry_window(retry, i.saturating_add(1), Duration(0)).1;
    let without = retry_window(retry, i, Duration(0)).1;
    u64::try_from(with.saturating_sub(without)).unwrap_or(u64::MAX)
}
