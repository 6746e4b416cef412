//! A model test of the lease logic (SPEC 7.1 items 3, 4, 7, 11): random sequences of
//! acquire / time passing / finish (success, failure, dead letter) / manual recovery against
//! a small reference model, on a real SQLite store whose clock the test drives.
//!
//! Checked after every step: the store answers as the model does (who holds, which
//! attempt, why refused); never two live holders of a slot; fences strictly increase over
//! every acquisition; a succeeded slot is never acquired again. A holder whose lease ran
//! out may still finish (a paused process waking up): it is superseded when the slot has
//! a newer holder (item 24) and changes nothing; a finish sent again is written once
//! (item 23).

use batchguard::SqliteStore;
use batchguard::{
    AcquireRequest, AcquireResult, EventRow, Finish, Finished, Refusal, SlotState, Store,
};
use jiff::Timestamp;
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

const TTL: u64 = 10;
const MAX_ATTEMPTS: u64 = 3;
const SLOTS: usize = 2;

#[derive(Clone, Debug)]
enum Op {
    Acquire {
        slot: usize,
        manual: bool,
    },
    Advance {
        secs: i64,
    },
    Finish {
        slot: usize,
        outcome: SlotState,
    },
    /// A holder past its lease wakes up and finishes.
    FinishStale {
        slot: usize,
        outcome: SlotState,
    },
    /// A finish written before is sent again (a spool flushed twice).
    Refinish {
        pick: usize,
    },
}

fn outcome() -> impl Strategy<Value = SlotState> {
    prop_oneof![
        Just(SlotState::Succeeded),
        Just(SlotState::Failed),
        Just(SlotState::DeadLettered),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..SLOTS, prop::bool::weighted(0.1))
            .prop_map(|(slot, manual)| Op::Acquire { slot, manual }),
        2 => (0i64..25).prop_map(|secs| Op::Advance { secs }),
        3 => (0..SLOTS, outcome()).prop_map(|(slot, outcome)| Op::Finish { slot, outcome }),
        2 => (0..SLOTS, outcome()).prop_map(|(slot, outcome)| Op::FinishStale { slot, outcome }),
        1 => (0usize..64).prop_map(|pick| Op::Refinish { pick }),
    ]
}

/// What the model knows of one slot.
#[derive(Clone, Debug, Default)]
struct Slot {
    attempts: u32,
    succeeded: bool,
    dead_lettered: bool,
    /// The live holder: run id, fence, lease end (µs).
    holder: Option<(String, i64, i64)>,
    /// Holders whose lease ran out before they finished: run id, fence.
    stale: Vec<(String, i64)>,
    /// The run id of the latest acquisition.
    latest: Option<String>,
}

fn slot_time(i: usize) -> Timestamp {
    Timestamp::from_second(1_772_330_400 + 60 * i as i64).unwrap()
}

fn event(run_id: &str, slot: usize, kind: &str, at: Timestamp) -> EventRow {
    EventRow {
        run_id: run_id.into(),
        job: "j".into(),
        scheduled_at: slot_time(slot),
        event: kind.into(),
        at,
        instance: Some(format!("h-{run_id}")),
        attempt: None,
        status: None,
        error_code: None,
        snapshot_digest: None,
        trigger: "schedule".into(),
        fence: None,
        detail: None,
    }
}

fn finish(slot: usize, run_id: &str, fence: i64, outcome: SlotState, at: Timestamp) -> Finish {
    let mut end = event(run_id, slot, "end", at);
    end.status = Some(
        if outcome == SlotState::Succeeded {
            "success"
        } else {
            "failure"
        }
        .into(),
    );
    let dead_letter = (outcome == SlotState::DeadLettered).then(|| {
        let mut d = event(run_id, slot, "dead_letter", at);
        d.error_code = Some("EXIT_1".into());
        d
    });
    Finish {
        key: format!("j:{slot}"),
        job: "j".into(),
        scheduled_at: slot_time(slot),
        run_id: run_id.to_owned(),
        fence,
        end,
        outputs: Vec::new(),
        dead_letter,
        state: if outcome == SlotState::DeadLettered {
            SlotState::Failed
        } else {
            outcome
        },
        ledger: true,
    }
}

fn check(ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let now_us = Arc::new(AtomicI64::new(slot_time(0).as_microsecond()));
    let clock_us = Arc::clone(&now_us);
    let mut store = SqliteStore::open(&dir.path().join("store.db"))
        .unwrap()
        .with_clock(Box::new(move || {
            Timestamp::from_microsecond(clock_us.load(Ordering::SeqCst)).unwrap()
        }));
    let mut model: Vec<Slot> = vec![Slot::default(); SLOTS];
    let mut last_fence = 0i64;
    let mut n = 0u32;
    let mut finished: Vec<Finish> = Vec::new();
    for op in ops {
        let now = now_us.load(Ordering::SeqCst);
        // Leases end in time: a holder past its lease is gone (the guard killed it).
        for s in model.iter_mut() {
            if s.holder.as_ref().is_some_and(|h| h.2 <= now)
                && let Some((run_id, fence, _)) = s.holder.take()
            {
                s.stale.push((run_id, fence));
            }
        }
        match *op {
            Op::Advance { secs } => {
                now_us.fetch_add(secs * 1_000_000, Ordering::SeqCst);
            }
            Op::Acquire { slot, manual } => {
                n += 1;
                let run_id = format!("r{n}");
                let req = AcquireRequest {
                    key: format!("j:{slot}"),
                    job: "j".into(),
                    scheduled_at: slot_time(slot),
                    holder: format!("h-{run_id}"),
                    run_id: run_id.clone(),
                    ttl_secs: TTL,
                    max_attempts: Some(MAX_ATTEMPTS),
                    manual,
                    start: event(&run_id, slot, "start", Timestamp::now()),
                    ledger: true,
                    clock: None,
                    catch_up_from: None,
                };
                let got = store.acquire(&req).unwrap();
                let m = &mut model[slot];
                // The reference: settled, held, exhausted, or taken.
                let want: Result<u32, &str> = if m.succeeded {
                    Err("succeeded")
                } else if m.dead_lettered && !manual {
                    Err("dead_lettered")
                } else if m.holder.is_some() {
                    Err("held")
                } else if !manual && u64::from(m.attempts) >= MAX_ATTEMPTS {
                    Err("exhausted")
                } else {
                    Ok(m.attempts + 1)
                };
                match (&got, want) {
                    (AcquireResult::Acquired(a), Ok(attempt)) => {
                        prop_assert_eq!(a.attempt, attempt, "{:?}", op);
                        prop_assert!(
                            a.fence > last_fence,
                            "fence {} after {}",
                            a.fence,
                            last_fence
                        );
                        prop_assert!(!m.succeeded, "a succeeded slot was acquired again");
                        last_fence = a.fence;
                        m.attempts = attempt;
                        // A taken slot is running again (a manual recovery lifts a dead letter).
                        m.dead_lettered = false;
                        m.latest = Some(run_id.clone());
                        m.holder = Some((run_id, a.fence, now + TTL as i64 * 1_000_000));
                    }
                    (AcquireResult::Refused(Refusal::Succeeded { .. }), Err("succeeded"))
                    | (AcquireResult::Refused(Refusal::DeadLettered), Err("dead_lettered")) => {}
                    (AcquireResult::Refused(Refusal::Held { run_id, fence, .. }), Err("held")) => {
                        let h = m.holder.as_ref().unwrap();
                        prop_assert_eq!(run_id, &h.0);
                        prop_assert_eq!(*fence, h.1);
                    }
                    (AcquireResult::Refused(Refusal::Exhausted { attempts }), Err("exhausted")) => {
                        prop_assert_eq!(*attempts, m.attempts);
                        m.dead_lettered = true;
                        // The dead-lettering acquire is the slot's latest: a holder that
                        // wakes up after it is superseded, never a success on a dead letter.
                        m.latest = Some(run_id.clone());
                    }
                    (got, want) => {
                        return Err(TestCaseError::fail(format!(
                            "{op:?} at {now}: store {got:?}, model {want:?}, slot {m:?}"
                        )));
                    }
                }
            }
            Op::Finish { slot, outcome } | Op::FinishStale { slot, outcome } => {
                let m = &mut model[slot];
                let (run_id, fence) = if matches!(op, Op::Finish { .. }) {
                    let Some((run_id, fence, _)) = m.holder.take() else {
                        continue;
                    };
                    (run_id, fence)
                } else {
                    let Some(stale) = m.stale.pop() else {
                        continue;
                    };
                    stale
                };
                let at = Timestamp::from_microsecond(now).unwrap();
                let fin = finish(slot, &run_id, fence, outcome, at);
                let got = store.finish(&fin).unwrap();
                finished.push(fin);
                if m.latest.as_deref() != Some(run_id.as_str()) {
                    // A newer holder took the slot: this finish changes nothing.
                    prop_assert!(
                        matches!(&got, Finished::Superseded { run_id: r, .. } if Some(r) == m.latest.as_ref()),
                        "{op:?}: a stale finish was {got:?}, the latest is {:?}",
                        m.latest
                    );
                    continue;
                }
                prop_assert_eq!(&got, &Finished::Written, "{:?}", op);
                match outcome {
                    SlotState::Succeeded => m.succeeded = true,
                    SlotState::DeadLettered => m.dead_lettered = true,
                    _ => m.dead_lettered = false,
                }
            }
            Op::Refinish { pick } => {
                if finished.is_empty() {
                    continue;
                }
                let fin = &finished[pick % finished.len()];
                let got = store.finish(fin).unwrap();
                prop_assert_eq!(got, Finished::AlreadyWritten, "{:?} again", fin.run_id);
            }
        }
        // Never two live holders: the store's live leases are the model's holders.
        let live = store.leases(None).unwrap();
        let now = now_us.load(Ordering::SeqCst);
        let mut by_slot: HashMap<String, usize> = HashMap::new();
        for l in &live {
            *by_slot.entry(l.scheduled_at.clone()).or_default() += 1;
        }
        prop_assert!(by_slot.values().all(|c| *c <= 1), "{:?}", live);
        for (i, s) in model.iter().enumerate() {
            let held = s.holder.as_ref().filter(|h| h.2 > now);
            let store_holder = live.iter().find(|l| l.key == format!("j:{i}"));
            prop_assert_eq!(
                held.map(|h| h.0.clone()),
                store_holder.map(|l| l.run_id.clone()),
                "slot {} after {:?}",
                i,
                op
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn leases_follow_the_model(ops in prop::collection::vec(op(), 1..40)) {
        check(&ops)?;
    }
}
