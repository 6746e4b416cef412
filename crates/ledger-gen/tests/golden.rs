//! The generator's output is pinned byte for byte: same options, same bytes, on every
//! platform and after every refactoring. `tests/generate.sha256` holds the SHA-256 of every
//! file written for a set of options covering every dialect, both formats and the optional
//! settings (`sha256sum` format, so a shell can check a run of the binary too). After an
//! intended change of the generated ledgers, rewrite it with
//! `BATCHGUARD_BLESS=1 cargo test -p batchguard-ledger-gen --test golden` and say why in
//! the commit.

use batchguard::Dialect;
use batchguard_ledger_gen::{Format, GenOptions, generate};
use sha2::{Digest, Sha256};
use std::fmt::Write;

const GOLDEN: &str = "tests/generate.sha256";

/// Name of the case (its directory in the digest file) and its options.
fn cases() -> Vec<(String, GenOptions)> {
    let mut v = Vec::new();
    for seed in 1..=6 {
        for (f, ext) in [(Format::Csv, "csv"), (Format::Jsonl, "jsonl")] {
            let mut o = GenOptions::new("", seed, 8_000);
            o.jobs = 24;
            o.defect_rate = 0.2;
            o.format = f;
            v.push((format!("seed{seed}-{ext}"), o));
        }
    }
    let mut o = GenOptions::new("", 42, 0);
    o.dialect = Some(Dialect::Kubernetes);
    o.from = Some("2026-10-30T00:00:00Z".parse().expect("from"));
    o.days = Some(5);
    v.push(("seed42-kubernetes-dst".into(), o));
    v.push(("defaults-seed9".into(), GenOptions::new("", 9, 20_000)));
    v
}

fn sha256_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(64);
    for b in Sha256::digest(bytes) {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[test]
fn generated_bytes_match_the_pinned_digests() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut got = String::new();
    for (name, mut o) in cases() {
        o.out = root.path().join(&name);
        generate(&o).expect("generate");
        let mut files: Vec<_> = std::fs::read_dir(&o.out)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        for f in files {
            let bytes = std::fs::read(o.out.join(&f)).expect("read");
            let _ = writeln!(got, "{}  {name}/{f}", sha256_hex(&bytes));
        }
    }
    if std::env::var_os("BATCHGUARD_BLESS").is_some() {
        std::fs::write(GOLDEN, &got).expect("write digests");
    }
    let want = std::fs::read_to_string(GOLDEN).unwrap_or_default();
    assert!(
        want == got,
        "generated ledgers differ from {GOLDEN}; if intended, rewrite it with \
         `BATCHGUARD_BLESS=1 cargo test -p batchguard-ledger-gen --test golden`\n{got}"
    );
}
