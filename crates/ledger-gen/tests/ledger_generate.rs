//! The generator writes ledgers the readers accept without a rejected row, deterministically,
//! and its expected counts agree with what can be recounted from the rows alone (the checks
//! that need no manifest: AU103, AU104, AU107, AU201). The audit's own tests check every
//! code against `expected.json`.

use batchguard::{
    Event, EventKind, LedgerReadOptions, LedgerSource, Output, read_events, read_outputs,
};
use batchguard_ledger_gen::{CODES, Format, GenOptions, Generated, generate};
use std::collections::{HashMap, HashSet};

fn gen_in(dir: &std::path::Path, seed: u64, format: Format) -> Generated {
    let mut o = GenOptions::new(dir, seed, 30_000);
    o.jobs = 16;
    o.days = Some(10);
    o.from = Some("2026-10-27T00:00:00Z".parse().expect("from"));
    o.defect_rate = 0.2;
    o.format = format;
    generate(&o).expect("generate")
}

fn read(g: &Generated) -> (Vec<Event>, Vec<Output>) {
    let opts = LedgerReadOptions::default();
    let (mut ev, mut out) = (Vec::new(), Vec::new());
    let src = LedgerSource::parse(&g.events_path.display().to_string()).expect("src");
    let n = read_events(&src, &opts, &mut |e| ev.push(e), &mut |e| panic!("{e}")).expect("read");
    assert_eq!(n, g.events);
    let src = LedgerSource::parse(&g.outputs_path.display().to_string()).expect("src");
    let n = read_outputs(&src, &opts, &mut |o| out.push(o), &mut |e| panic!("{e}")).expect("read");
    assert_eq!(n, g.outputs);
    (ev, out)
}

fn count(g: &Generated, code: &str) -> u64 {
    g.findings[CODES.iter().position(|c| *c == code).expect("code")]
}

#[test]
fn csv_and_jsonl_ledgers_are_the_same_and_fully_readable() {
    let (a, b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let gc = gen_in(a.path(), 7, Format::Csv);
    let gj = gen_in(b.path(), 7, Format::Jsonl);
    assert_eq!(gc.findings, gj.findings);
    assert_eq!((gc.events, gc.outputs), (gj.events, gj.outputs));
    assert_eq!(read(&gc), read(&gj));
    for c in CODES {
        assert!(count(&gc, c) > 0, "{c} never injected");
    }
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let g1 = gen_in(dirs[0].path(), 11, Format::Csv);
    let g2 = gen_in(dirs[1].path(), 11, Format::Csv);
    let g3 = gen_in(dirs[2].path(), 12, Format::Csv);
    for f in [
        "events.csv",
        "outputs.csv",
        "expected.json",
        "manifest.batchguard.yaml",
    ] {
        let x = std::fs::read(dirs[0].path().join(f)).expect("read");
        assert_eq!(
            x,
            std::fs::read(dirs[1].path().join(f)).expect("read"),
            "{f}"
        );
    }
    assert_eq!(g1.findings, g2.findings);
    assert_ne!(
        std::fs::read(g1.events_path).expect("read"),
        std::fs::read(g3.events_path).expect("read")
    );
}

#[test]
fn expected_json_and_manifest_are_valid() {
    let dir = tempfile::tempdir().expect("dir");
    let g = gen_in(dir.path(), 5, Format::Csv);
    let v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("expected.json")).expect("read"),
    )
    .expect("json");
    assert_eq!(v["from"], "2026-10-27T00:00:00Z");
    assert_eq!(v["to"], "2026-11-06T00:00:00Z");
    assert_eq!(v["rows"], g.events + g.outputs);
    for (c, n) in CODES.iter().zip(g.findings) {
        assert_eq!(v["findings"][c], n, "{c}");
    }
    let bytes = std::fs::read(&g.manifest).expect("manifest");
    let (_, loaded) = batchguard::load_manifest(&bytes);
    assert!(loaded.diags.is_empty(), "{:?}", loaded.diags.len());
    assert_eq!(loaded.jobs.len(), 16);
}

/// Recounts the manifest-free findings from the rows and compares with expected.json.
#[test]
fn manifest_free_counts_agree_with_the_rows() {
    for seed in [1, 2, 3] {
        let dir = tempfile::tempdir().expect("dir");
        let g = gen_in(dir.path(), seed, Format::Csv);
        let (ev, out) = read(&g);
        let mut starts = HashSet::new();
        let mut ends = HashSet::new();
        for e in &ev {
            match e.event {
                EventKind::Start => {
                    starts.insert(e.run_id.as_str());
                }
                EventKind::End => {
                    ends.insert(e.run_id.as_str());
                }
                _ => {}
            }
        }
        assert_eq!(
            starts.difference(&ends).count() as u64,
            count(&g, "AU103"),
            "seed {seed}"
        );
        assert_eq!(
            ends.difference(&starts).count() as u64,
            count(&g, "AU104"),
            "seed {seed}"
        );
        let mut keys: HashMap<(&str, &str), u32> = HashMap::new();
        for o in &out {
            *keys
                .entry((o.job.as_str(), o.output_key.as_str()))
                .or_default() += 1;
        }
        assert_eq!(
            keys.values().filter(|n| **n > 1).count() as u64,
            count(&g, "AU201"),
            "seed {seed}"
        );
        let text = std::fs::read_to_string(&g.manifest).expect("manifest");
        let declared: HashSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("  - name: "))
            .collect();
        let unknown: HashSet<&str> = ev
            .iter()
            .map(|e| e.job.strip_prefix("shop/").unwrap_or(&e.job))
            .filter(|j| !declared.contains(j))
            .collect();
        assert_eq!(unknown.len() as u64, count(&g, "AU107"), "seed {seed}");
    }
}
