//! Generated ledgers (several seeds, every dialect) give exactly the injected counts of
//! `expected.json`, and the expected-slot metric equals the generator's due slots.

use batchguard::{AuditRunOptions, audit};
use batchguard_ledger_gen::{CODES, Format, GenOptions, generate};

fn check(seed: u64, format: Format) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = GenOptions::new(dir.path(), seed, 20_000);
    o.jobs = 40;
    o.format = format;
    o.defect_rate = 0.05;
    let g = generate(&o).expect("generate");
    let r = audit(&AuditRunOptions {
        ledger: g.events_path.display().to_string(),
        outputs: Some(g.outputs_path.display().to_string()),
        manifests: vec![g.manifest.clone()],
        snapshots: None,
        from: g.from,
        to: g.to,
        assume_tz: None,
        progress: false,
        ..Default::default()
    })
    .expect("audit runs");
    let mut got = [0u64; 12];
    let mut extra = Vec::new();
    for f in &r.findings {
        match CODES.iter().position(|c| *c == f.code) {
            Some(i) => got[i] += 1,
            None => extra.push(f.code),
        }
    }
    let diff: Vec<String> = CODES
        .iter()
        .zip(got.iter().zip(g.findings.iter()))
        .filter(|(_, (a, b))| a != b)
        .map(|(c, (a, b))| format!("{c}: audit {a}, injected {b}"))
        .collect();
    let sample: Vec<String> = r
        .findings
        .iter()
        .filter(|f| diff.iter().any(|d| d.starts_with(f.code)))
        .take(5)
        .map(|f| f.message.clone())
        .collect();
    assert!(
        diff.is_empty() && extra.is_empty(),
        "seed {seed} ({}): {diff:?} {extra:?}\n{sample:#?}",
        g.dialect
    );
    assert_eq!(r.input.rows_read, g.events + g.outputs);
    assert_eq!(r.input.rows_rejected, 0);
    assert_eq!(
        r.jobs
            .iter()
            .filter(|j| j.declared)
            .map(|j| j.metrics.expected)
            .sum::<u64>(),
        g.due_slots,
        "seed {seed}: expected slots"
    );
}

#[test]
fn seeds_1_to_5_csv_every_dialect() {
    for seed in 1..=5 {
        check(seed, Format::Csv);
    }
}

#[test]
fn seeds_6_and_7_jsonl() {
    for seed in 6..=7 {
        check(seed, Format::Jsonl);
    }
}
