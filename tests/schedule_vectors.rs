//! Every vector in `fixtures/schedule/*.jsonl` was produced by the real scheduler of its
//! dialect (see `scripts/schedule-vectors/`); batchguard must agree with each one.

use batchguard::{Dialect, Schedule, format_slot};
use jiff::Timestamp;
use jiff::tz::{Offset, TimeZone};
use serde_json::Value;
use std::collections::BTreeMap;

fn zone(name: &str) -> TimeZone {
    if let Some(rest) = name.strip_prefix('+').or_else(|| name.strip_prefix('-')) {
        let (h, m) = rest.split_once(':').expect("offset zone");
        let secs = h.parse::<i32>().unwrap() * 3600 + m.parse::<i32>().unwrap() * 60;
        let secs = if name.starts_with('-') { -secs } else { secs };
        return TimeZone::fixed(Offset::from_seconds(secs).unwrap());
    }
    TimeZone::get(name).unwrap_or_else(|e| panic!("zone {name}: {e}"))
}

fn ts(v: &Value) -> Timestamp {
    v.as_str().unwrap().parse().unwrap()
}

fn check(v: &Value) -> Result<(), String> {
    let dialect: Dialect = v["dialect"].as_str().unwrap().parse().unwrap();
    let expr = v["expr"].as_str().unwrap();
    let parsed = Schedule::parse(expr, dialect);
    if v["valid"] == Value::Bool(false) {
        return match parsed {
            Err(_) => Ok(()),
            Ok(_) => Err("parses, but the library rejects it".into()),
        };
    }
    let s = parsed.map_err(|e| format!("does not parse: {e}"))?;
    let tz = zone(v["tz"].as_str().unwrap());
    if let Some(want) = v.get("slots") {
        let want: Vec<Timestamp> = want.as_array().unwrap().iter().map(ts).collect();
        let got = s.slots(&tz, ts(&v["from"]), ts(&v["to"]));
        if got != want {
            let f = |x: &[Timestamp]| x.iter().map(|t| format_slot(*t, &tz)).collect::<Vec<_>>();
            return Err(format!(
                "slots differ\n   want {:?}\n    got {:?}",
                f(&want),
                f(&got)
            ));
        }
        return Ok(());
    }
    if let Some(next) = v.get("next_is") {
        let got = s.next_after(&tz, ts(&v["after"]));
        let want = if next.is_null() { None } else { Some(ts(next)) };
        let equal = v["equal"].as_bool().unwrap();
        if (got == want) != equal {
            return Err(format!(
                "next_after: got {got:?}, want {}{want:?}",
                if equal { "" } else { "not " }
            ));
        }
        return Ok(());
    }
    Err("vector has neither slots nor next_is".into())
}

#[test]
fn every_vector_passes() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/schedule");
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    for d in Dialect::ALL {
        let text = std::fs::read_to_string(format!("{dir}/{d}.jsonl")).unwrap();
        for (i, line) in text
            .lines()
            .enumerate()
            // `#` lines are a file's header (how its vectors were made).
            .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        {
            let v: Value = serde_json::from_str(line).unwrap();
            let c = counts.entry(d.to_string()).or_default();
            c.0 += 1;
            if let Err(e) = check(&v) {
                c.1 += 1;
                failures.push(format!(
                    "{d}.jsonl:{} `{}` {}: {e}",
                    i + 1,
                    v["expr"].as_str().unwrap_or(""),
                    v["tz"].as_str().unwrap_or("")
                ));
            }
        }
    }
    let total: usize = counts.values().map(|c| c.0).sum();
    for (d, (n, f)) in &counts {
        eprintln!("{d}: {n} vectors, {f} failing");
    }
    assert!(total >= 300, "only {total} vectors");
    assert!(
        failures.is_empty(),
        "{} of {total} vectors fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
