//! Slot enumeration, the audit's inner loop (SPEC 10: 1,000 jobs x 31 days under 0.5 s).
//! Run: `cargo bench --bench schedule`

use batchguard::{Dialect, Schedule};
use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use std::hint::black_box;

const EXPRS: [&str; 10] = [
    "* * * * *",
    "*/5 * * * *",
    "*/15 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "0 9-17 * * 1-5",
    "0 0 1,15 * *",
    "15 3 * * 0",
    "0 */2 * * *",
    "45 23 L * *",
];
const ZONES: [&str; 4] = ["UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata"];

/// 1,000 jobs: every dialect, four zones, a tenth of them minutely. Expressions a dialect
/// rejects (L outside node-cron/croner) fall back to a daily job.
fn jobs() -> Vec<(Schedule, TimeZone)> {
    (0..1000)
        .map(|i| {
            let d = Dialect::ALL[i % Dialect::ALL.len()];
            let e = EXPRS[i % EXPRS.len()];
            let s = Schedule::parse(e, d).or_else(|_| Schedule::parse("0 4 * * *", d));
            let tz = TimeZone::get(ZONES[(i / 5) % ZONES.len()]).expect("zone");
            (s.expect("bench expression parses"), tz)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    // October 2026 includes Berlin's fall-back, so the DST path is exercised too.
    let from: Timestamp = "2026-10-01T00:00:00Z".parse().expect("ts");
    let to: Timestamp = "2026-11-01T00:00:00Z".parse().expect("ts");
    let ny = TimeZone::get("America/New_York").expect("zone");
    let minutely = Schedule::parse("* * * * *", Dialect::Crontab).expect("parse");
    c.bench_function("minutely job, one month (44,640 slots)", |b| {
        b.iter(|| black_box(minutely.slots(&ny, from, to).len()))
    });
    let all = jobs();
    c.bench_function("SPEC 10: 1,000 mixed jobs x 31 days", |b| {
        b.iter(|| {
            let n: usize = all.iter().map(|(s, tz)| s.slots(tz, from, to).len()).sum();
            black_box(n)
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
