//! The drill's sandboxes and the order they run in (SPEC 7.3).
//!
//! A unit is one sandbox and its scenarios: `clean` then `rerun` share one (rerun sees
//! what clean did), every other scenario has its own. A unit's life: `replay.setup`, the
//! leak check, its scenarios (each followed by the leak check), `replay.teardown`.
//!
//! Units run at the same time (`--jobs N`) only when their state is known to be apart:
//! the job declares `replay.setup`, or the first unit's first scenario left state in its
//! sandbox directory (`BATCHGUARD_SANDBOX`). In the second case the other units start as
//! soon as a file appears there (while the first scenario is still running), and the first
//! unit goes on. Otherwise they run one after
//! the other. Results are kept by unit index, so reports list scenarios in their fixed
//! order whatever finished first.

use super::external;
use super::sandbox::{Cx, Root, Sandbox};
use super::{Scenario, ScenarioResult, count, scenarios};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

pub struct Unit {
    pub name: &'static str,
    pub scenarios: Vec<Scenario>,
}

/// The selected scenarios (sorted, `clean` before `rerun`) as units, in scenario order.
pub fn units(selected: &[Scenario]) -> Vec<Unit> {
    let mut out: Vec<Unit> = Vec::new();
    for &sc in selected {
        match (sc, out.last_mut()) {
            (Scenario::Rerun, Some(u)) if u.scenarios == [Scenario::Clean] => {
                u.scenarios.push(sc);
            }
            _ => out.push(Unit {
                name: sc.name(),
                scenarios: vec![sc],
            }),
        }
    }
    out
}

/// What a unit left: its results in scenario order, a failed teardown, and the removal
/// of its passed sandbox with the job CPU its taps measured.
pub struct UnitOut {
    pub results: Vec<ScenarioResult>,
    pub teardown: Option<String>,
    pub released: Option<(f64, JoinHandle<()>)>,
}

/// Where every unit's outcome goes, by index.
type Slots = Mutex<Vec<Option<Result<UnitOut, String>>>>;

/// Runs every unit, `jobs` at most at the same time. `untouched` is the sandbox the
/// leak check reads. Returns the outcomes in unit order, and how many ran at once.
pub fn run_all(
    cx: &Cx,
    root: &Root,
    units: &[Unit],
    jobs: usize,
    untouched: Option<&Sandbox>,
) -> (Vec<Result<UnitOut, String>>, usize) {
    let slots: Slots = Mutex::new((0..units.len()).map(|_| None).collect());
    let store = |i: usize, out: Result<UnitOut, String>| {
        if let Ok(mut s) = slots.lock() {
            s[i] = Some(out);
        }
    };
    let mut at_once = 1;
    if jobs <= 1 || units.len() <= 1 {
        for (i, u) in units.iter().enumerate() {
            store(i, run_unit(cx, root, u, untouched, None));
            super::sandbox::reap_orphans();
        }
    } else if cx.job.setup.is_some() {
        at_once = jobs.min(units.len());
        cx.parallel.store(true, Ordering::Relaxed);
        pool(cx, root, units, 0, at_once, untouched, &store);
    } else {
        // The first unit's first scenario shows whether the job keeps its state in the
        // sandbox directory; the others wait for that fact. Once its own scenarios are
        // done, the first unit's thread takes the units left like every other worker.
        let next = AtomicUsize::new(1);
        let together = AtomicBool::new(false);
        let work = || {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(u) = units.get(i) else { break };
                store(i, run_unit(cx, root, u, untouched, None));
            }
        };
        std::thread::scope(|s| {
            let (tx, rx) = mpsc::channel::<bool>();
            let first = s.spawn(|| {
                store(0, run_unit(cx, root, &units[0], untouched, Some(tx)));
                if together.load(Ordering::SeqCst) {
                    work();
                }
            });
            if rx.recv().unwrap_or(false) {
                at_once = jobs.min(units.len());
                cx.parallel.store(true, Ordering::Relaxed);
                together.store(true, Ordering::SeqCst);
                for _ in 1..at_once {
                    s.spawn(work);
                }
            }
            if first.join().is_err() {
                store(0, Err(INTERNAL.into()));
            }
            // One after the other: the rest on this thread (a no-op when workers took it).
            work();
        });
    }
    super::sandbox::reap_orphans();
    let outs = slots
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Err("a sandbox's scenarios ended without a result".into())))
        .collect();
    (outs, at_once)
}

const INTERNAL: &str = "a sandbox's scenarios stopped on an internal error";

/// Units `from..` on `workers` threads, each taking the next unit not yet taken.
fn pool(
    cx: &Cx,
    root: &Root,
    units: &[Unit],
    from: usize,
    workers: usize,
    untouched: Option<&Sandbox>,
    store: &(dyn Fn(usize, Result<UnitOut, String>) + Sync),
) {
    let next = AtomicUsize::new(from);
    std::thread::scope(|s| {
        for _ in 0..workers.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(u) = units.get(i) else { break };
                    store(i, run_unit(cx, root, u, untouched, None));
                }
            });
        }
    });
}

/// One unit in its sandbox. `probe` is told, after the first scenario, whether the job
/// left state in the sandbox directory (false when it could not run).
fn run_unit(
    cx: &Cx,
    root: &Root,
    unit: &Unit,
    untouched: Option<&Sandbox>,
    probe: Option<mpsc::Sender<bool>>,
) -> Result<UnitOut, String> {
    // Told once: by the watcher below as soon as the sandbox directory holds a file, or
    // after the first scenario.
    let probe = Mutex::new(probe);
    let tell = |v: bool| {
        if let Some(p) = probe.lock().ok().and_then(|mut p| p.take()) {
            let _ = p.send(v);
        }
    };
    let clean = unit.scenarios.first() == Some(&Scenario::Clean);
    let sb = match root.sandbox(unit.name, clean) {
        Ok(sb) => sb,
        Err(e) => {
            tell(false);
            return Err(e);
        }
    };
    let ready = external::setup(cx, &sb)
        .and_then(|()| external::untouched(cx, &sb, "before its first job run"));
    let mut results = Vec::with_capacity(unit.scenarios.len());
    match ready {
        Err(why) => {
            tell(false);
            for &sc in &unit.scenarios {
                results.push(not_run(cx, sc, &why));
            }
        }
        Ok(()) => {
            for &sc in &unit.scenarios {
                let r = watched(&probe, &sb, || scenario(cx, &sb, sc));
                let mut r = match r {
                    Ok(r) => r,
                    Err(e) => {
                        tell(false);
                        let _ = external::teardown(cx, &sb);
                        return Err(e);
                    }
                };
                if let Some(u) = untouched
                    && let Err(why) = external::untouched(cx, u, &format!("after `{}`", sc.name()))
                {
                    shared(&mut r, why);
                }
                let wrote = std::fs::read_dir(&sb.state).is_ok_and(|mut d| d.next().is_some());
                tell(wrote);
                results.push(r);
            }
        }
    }
    let teardown = external::teardown(cx, &sb).err();
    let passed = teardown.is_none() && results.iter().all(|r| r.passed);
    let released = if passed { root.release(sb) } else { None };
    Ok(UnitOut {
        results,
        teardown,
        released,
    })
}

/// Runs `f`; while it runs and `probe` is not told yet, tells it `true` as soon as the
/// sandbox directory holds a file (the job keeps its state there), so the other sandboxes
/// start while the first scenario is still running rather than after it.
fn watched<T>(probe: &Mutex<Option<mpsc::Sender<bool>>>, sb: &Sandbox, f: impl FnOnce() -> T) -> T {
    let waiting = probe.lock().is_ok_and(|p| p.is_some());
    if !waiting {
        return f();
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            // A poll, not inotify: the fact is needed once, and 5 ms is far below a
            // scenario's length.
            while !done.load(Ordering::Relaxed) {
                if std::fs::read_dir(&sb.state).is_ok_and(|mut d| d.next().is_some()) {
                    if let Some(p) = probe.lock().ok().and_then(|mut p| p.take()) {
                        let _ = p.send(true);
                    }
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        });
        let out = f();
        done.store(true, Ordering::Relaxed);
        out
    })
}

fn scenario(cx: &Cx, sb: &Sandbox, sc: Scenario) -> Result<ScenarioResult, String> {
    match sc {
        Scenario::Clean => scenarios::clean::run(cx, sb),
        Scenario::Rerun => scenarios::rerun::run(cx, sb),
        Scenario::Concurrent => scenarios::concurrent::run(cx, sb),
        Scenario::Crash => scenarios::crash::run(cx, sb),
        Scenario::Retry => scenarios::retry::run(cx, sb),
        Scenario::Stale => scenarios::stale::run(cx, sb),
    }
}

/// A scenario that did not run because its sandbox could not be made ready.
pub fn not_run(cx: &Cx, sc: Scenario, why: &str) -> ScenarioResult {
    let mut r = count::tally(cx, sc.name(), &[], 0, false);
    // Nothing ran: no record is missing for anything this scenario did.
    r.missing = 0;
    r.reason = Some(format!("not run: {why}"));
    r.passed = false;
    r
}

/// State shared between sandboxes explains whatever else the scenario saw (a job with
/// nothing left to do writes no output), so it replaces the other reasons.
fn shared(r: &mut ScenarioResult, why: String) {
    if why.starts_with(external::SHARED) {
        r.passed = false;
        r.reason = Some(why);
    } else {
        count::fail(r, why);
    }
}
