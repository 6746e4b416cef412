//! Sandboxes and the `batchguard run` processes a scenario starts in them.
//!
//! A sandbox is a directory the drill made: `store.db` (a fresh SQLite store), `state/`
//! (`BATCHGUARD_SANDBOX`, the job's own state), `ctl/` (the tap's FIFOs and markers),
//! `logs/` (each execution's stdout and stderr). The guard runs with the sandbox as its
//! working directory, so its `.batchguard/` (run directories, spool) is the sandbox's too;
//! the job runs in the drill's working directory, as under `run`.

use super::job::DrillJob;
use super::records::Records;
use super::shim::{self, Mode};
use jiff::Timestamp;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Where the sandboxes go.
pub struct Root {
    dir: PathBuf,
    temporary: bool,
    clean_store: Option<PathBuf>,
}

impl Root {
    /// `--sandbox DIR` (must be new or empty; kept), else a temporary directory. `store`
    /// is a fresh `sqlite:` file already vetted by the caller: the `clean` sandbox's store.
    pub fn new(dir: Option<&Path>, store: Option<&str>) -> Result<Root, String> {
        let clean_store = store.map(|s| {
            let p = s.strip_prefix("sqlite:").unwrap_or(s);
            PathBuf::from(p.strip_prefix("//").unwrap_or(p))
        });
        let clean_store = match clean_store {
            Some(p) => Some(std::path::absolute(&p).map_err(|e| format!("{}: {e}", p.display()))?),
            None => None,
        };
        match dir {
            Some(d) => {
                if d.exists() {
                    let empty = std::fs::read_dir(d)
                        .map_err(|e| format!("--sandbox {}: {e}", d.display()))?
                        .next()
                        .is_none();
                    if !empty {
                        return Err(format!(
                            "--sandbox {} is not empty: a drill starts from fresh sandboxes, so it never reuses what an earlier drill left",
                            d.display()
                        ));
                    }
                }
                std::fs::create_dir_all(d)
                    .map_err(|e| format!("--sandbox {}: {e}", d.display()))?;
                Ok(Root {
                    dir: std::path::absolute(d).map_err(|e| format!("{}: {e}", d.display()))?,
                    temporary: false,
                    clean_store,
                })
            }
            None => {
                let dir = std::env::temp_dir()
                    .join(format!("batchguard-drill-{}", crate::guard::new_run_id()));
                std::fs::create_dir_all(&dir)
                    .map_err(|e| format!("cannot make a sandbox in {}: {e}", dir.display()))?;
                Ok(Root {
                    dir,
                    temporary: true,
                    clean_store,
                })
            }
        }
    }

    pub fn sandbox(&self, name: &str, clean: bool) -> Result<Sandbox, String> {
        let dir = self.dir.join(name);
        let sb = Sandbox {
            ctl: dir.join("ctl"),
            state: dir.join("state"),
            logs: dir.join("logs"),
            store: match (&self.clean_store, clean) {
                (Some(p), true) => p.clone(),
                _ => dir.join("store.db"),
            },
            dir,
        };
        for d in [&sb.dir, &sb.ctl, &sb.state, &sb.logs] {
            std::fs::create_dir_all(d).map_err(|e| format!("cannot make {}: {e}", d.display()))?;
        }
        Ok(sb)
    }

    /// CPU seconds the jobs of every sandbox still here used, as their taps measured them
    /// (a released sandbox's were counted by [`Root::release`]).
    pub fn jobs_cpu(&self) -> f64 {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return 0.0;
        };
        rd.flatten()
            .filter(|e| !e.file_name().as_encoded_bytes().starts_with(b"."))
            .map(|e| Sandbox {
                ctl: e.path().join("ctl"),
                dir: e.path(),
                state: PathBuf::new(),
                logs: PathBuf::new(),
                store: PathBuf::new(),
            })
            .flat_map(|sb| sb.markers(shim::CPU))
            .filter_map(|(_, body)| body.trim().parse::<f64>().ok())
            .sum()
    }

    /// A passed scenario's sandbox in a temporary root, removed while the next scenario
    /// runs: deleting the files a job made (60,000 for the 10,000-record example) took
    /// a tenth of the drill's time at its end. Returns the job CPU its taps measured, and
    /// the removal to join; `None` when the root is kept (`--sandbox`), which keeps it too.
    /// It is renamed to a hidden name first, which [`Root::jobs_cpu`] skips.
    pub fn release(&self, sb: Sandbox) -> Option<(f64, std::thread::JoinHandle<()>)> {
        if !self.temporary {
            return None;
        }
        let cpu = sb
            .markers(shim::CPU)
            .iter()
            .filter_map(|(_, body)| body.trim().parse::<f64>().ok())
            .sum();
        let name = sb.dir.file_name()?.to_owned();
        let mut hidden = std::ffi::OsString::from(".removing-");
        hidden.push(&name);
        let gone = self.dir.join(hidden);
        std::fs::rename(&sb.dir, &gone).ok()?;
        Some((
            cpu,
            std::thread::spawn(move || {
                let _ = std::fs::remove_dir_all(&gone);
            }),
        ))
    }

    /// A temporary root goes when every scenario passed; one that holds a failure stays
    /// for whoever reads the report (its path is printed).
    pub fn finish(&self, passed: bool) -> Option<PathBuf> {
        if self.temporary && passed {
            let _ = std::fs::remove_dir_all(&self.dir);
            None
        } else {
            Some(self.dir.clone())
        }
    }
}

pub struct Sandbox {
    pub dir: PathBuf,
    pub ctl: PathBuf,
    pub state: PathBuf,
    pub logs: PathBuf,
    pub store: PathBuf,
}

impl Sandbox {
    /// The sandbox's name (its directory's), as reports name it.
    pub fn name(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    pub fn store_url(&self) -> String {
        format!("sqlite:{}", self.store.display())
    }

    pub fn open_store(&self) -> Result<crate::store::sqlite::SqliteStore, String> {
        crate::store::sqlite::SqliteStore::open(&self.store).map_err(|e| e.0)
    }

    /// Markers with this prefix: `(tap pid, body)`.
    pub fn markers(&self, prefix: &str) -> Vec<(i32, String)> {
        let Ok(rd) = std::fs::read_dir(&self.ctl) else {
            return Vec::new();
        };
        rd.filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().into_string().ok()?;
            let pid = name.strip_prefix(prefix)?.parse().ok()?;
            let body = std::fs::read_to_string(e.path()).unwrap_or_default();
            Some((pid, body))
        })
        .collect()
    }

    pub fn mark(&self, name: &str) -> Result<(), String> {
        shim::mark(&self.ctl, name, "")
            .map_err(|e| format!("cannot write to {}: {e}", self.ctl.display()))
    }
}

/// What every scenario shares.
pub struct Cx {
    pub exe: PathBuf,
    pub manifest: PathBuf,
    pub job: DrillJob,
    pub snapshot: PathBuf,
    pub slot: Timestamp,
    pub limit: Duration,
    pub records: Records,
    pub cwd: PathBuf,
    /// CPU seconds `replay.verify`, `setup` and `teardown` used, measured while one
    /// scenario runs at a time (see [`Cx::add_verify_cpu`]).
    pub verify_cpu: std::sync::Mutex<f64>,
    /// Set while scenarios run at the same time.
    pub parallel: std::sync::atomic::AtomicBool,
}

/// One `batchguard run` process, the leader of its own process group.
pub struct Instance {
    pub child: Child,
    pub status: Option<ExitStatus>,
}

impl Instance {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Reaps the process if it has ended.
    pub fn poll(&mut self) -> Option<ExitStatus> {
        if self.status.is_none()
            && let Ok(Some(st)) = self.child.try_wait()
        {
            self.status = Some(st);
        }
        self.status
    }

    pub fn signal(&self, sig: i32) {
        if self.status.is_none() {
            // SAFETY: a signal to the process group this process leads.
            unsafe {
                libc::killpg(self.pid(), sig);
            }
        }
    }

    /// KILL, then reap: the guard's death takes the tap and the job with it (their
    /// parent-death signal).
    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        if self.status.is_none() {
            self.status = self.child.wait().ok();
        }
    }
}

/// Reaps every child that has ended (the orphans a killed guard left to the drill, a
/// subreaper); called between scenarios, when every instance has been waited for.
pub fn reap_orphans() {
    loop {
        let mut status = 0;
        // SAFETY: waitpid on any child, without blocking.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
    }
}

/// A signal to a process or group we learnt from a marker.
pub fn signal_pid(pid: i32, sig: i32) {
    // SAFETY: plain kill(2); ESRCH (gone) is fine.
    unsafe {
        libc::kill(pid, sig);
    }
}

pub fn signal_group(pgid: i32, sig: i32) {
    // SAFETY: plain killpg(2); ESRCH (gone) is fine.
    unsafe {
        libc::killpg(pgid, sig);
    }
}

impl Cx {
    /// Adds a command's CPU, measured as the growth of the reaped children's CPU. While
    /// scenarios run at the same time that growth holds other scenarios' processes too,
    /// so it is left out then (the report's `job_cpu_seconds` says so).
    pub fn add_verify_cpu(&self, secs: f64) {
        if !self.parallel.load(std::sync::atomic::Ordering::Relaxed)
            && let Ok(mut v) = self.verify_cpu.lock()
        {
            *v += secs.max(0.0);
        }
    }

    pub fn verify_cpu(&self) -> f64 {
        self.verify_cpu.lock().map(|v| *v).unwrap_or(0.0)
    }

    pub fn deadline(&self) -> Instant {
        // A limit past what the clock can hold (`--time-limit 100000000d`) is no limit.
        let now = Instant::now();
        now.checked_add(self.limit)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
    }

    /// Starts `batchguard run` for the drill's slot in `sb`, the tap in `mode` in front of
    /// the job. `barrier` is the read end the instance waits on before its acquire; `extra`
    /// are more `run` arguments (a manual recovery's).
    pub fn spawn(
        &self,
        sb: &Sandbox,
        name: &str,
        mode: Mode,
        barrier: Option<Stdio>,
        extra: &[&str],
    ) -> Result<Instance, String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(sb.logs.join(format!("{name}.log")))
            .map_err(|e| format!("cannot write the log in {}: {e}", sb.logs.display()))?;
        let log2 = log
            .try_clone()
            .map_err(|e| format!("cannot write the log: {e}"))?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg("run")
            .arg("--manifest")
            .arg(&self.manifest)
            .arg("--job")
            .arg(&self.job.plan.job_name)
            .arg("--store")
            .arg(sb.store_url())
            .arg("--scheduled-at")
            .arg(crate::store::rfc3339(self.slot))
            .arg("--instance")
            .arg(name)
            .arg("--drill-snapshot")
            .arg(&self.snapshot)
            .arg("--drill-no-delay");
        if barrier.is_some() {
            cmd.arg("--drill-barrier");
        }
        cmd.args(extra);
        cmd.arg("--")
            .arg(&self.exe)
            .arg("__drill-job")
            .arg("--")
            .args(&self.job.replay)
            .env("BATCHGUARD_SANDBOX", &sb.state)
            .env(shim::ENV_CTL, &sb.ctl)
            .env(shim::ENV_MODE, mode.as_str())
            .env(shim::ENV_CWD, &self.cwd)
            .current_dir(&sb.dir)
            .stdin(barrier.unwrap_or_else(Stdio::null))
            .stdout(log)
            .stderr(log2)
            .process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.exe.display()))?;
        Ok(Instance {
            child,
            status: None,
        })
    }

    /// Waits until `fact` holds, or the deadline passes (false).
    pub fn wait_for(&self, deadline: Instant, mut fact: impl FnMut() -> bool) -> bool {
        loop {
            if fact() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits for the instance to end; on the deadline every given instance is killed and
    /// `None` returned.
    pub fn wait_exit(&self, inst: &mut Instance, deadline: Instant) -> Option<ExitStatus> {
        if self.wait_for(deadline, || inst.poll().is_some()) {
            inst.status
        } else {
            inst.kill();
            None
        }
    }

    pub fn limit_reason(&self) -> String {
        format!(
            "the scenario did not finish within its time limit of {} (10 x expected_duration, or --time-limit)",
            crate::text::duration::secs(self.limit.as_secs())
        )
    }
}
