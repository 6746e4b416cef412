//! `batchguard watch`: the live table on a terminal; off one (or with `--once`), the same
//! figures as text or JSON. Exit 0 when it stops (`q`, `--for`, `--once`), 1 when
//! `--exit-on-alert` saw an alert fire, 2 when it cannot read its sources.

use super::{Error, Outcome, no_color_env, print, settings_for};
use crate::cli::{LiveArgs, WatchArgs, WatchFormat};
use crate::live::figures::Snapshot;
use crate::live::{Live, LiveError, LiveOptions};
use crate::report::{watch_json, watch_table};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

mod ends;
use ends::{Ends, Wake};

/// Opens what `watch` and `metrics` read.
pub(super) fn open(src: LiveArgs, since_s: u64) -> Result<Live, Error> {
    let settings = settings_for(src.config, &[PathBuf::from(".")])?;
    let assume_tz = match &src.assume_tz {
        None => None,
        Some(z) => Some(jiff::tz::TimeZone::get(z).map_err(|_| {
            let hint = crate::manifest::zone::help(z)
                .map(|h| format!("; {h}"))
                .unwrap_or_default();
            Error::Live(format!(
                "--assume-tz `{z}` is not an IANA time zone name{hint}"
            ))
        })?),
    };
    // The store as `run` takes it (flag, BATCHGUARD_STORE, `[run] store`), else this
    // directory's own store file when it has one.
    let store = super::store_given(src.store.clone(), &settings).or_else(|| {
        std::path::Path::new(".batchguard/store.db")
            .is_file()
            .then(|| crate::store::DEFAULT_URL.to_owned())
    });
    let ledger = match (&src.ledger, &store) {
        (Some(l), _) => l.clone(),
        (None, Some(s)) => s.clone(),
        (None, None) => {
            return Err(Error::Live(
                "give the store (--store URL, BATCHGUARD_STORE or `[run] store` in batchguard.toml) or a ledger (--ledger SOURCE) to read".into(),
            ));
        }
    };
    Live::open(LiveOptions {
        ledger,
        outputs: src.outputs,
        store,
        manifests: src.manifests,
        since_s,
        jobs: src.jobs,
        settings,
        diagnose: Some(crate::lint::diagnose_manifest),
        assume_tz,
    })
    .map_err(live_error)
}

pub(super) fn live_error(e: LiveError) -> Error {
    match e {
        LiveError::Manifest(m) => Error::AuditManifest(m),
        LiveError::CannotRun(m) => Error::Live(m),
    }
}

/// Columns of a print that is not a terminal.
const PRINT_WIDTH: u16 = 160;

pub(super) fn run(args: WatchArgs) -> Result<Outcome, Error> {
    let mut live = open(args.source, args.since)?;
    let interval = Duration::from_secs(args.interval.max(1));
    let deadline = args.for_.map(|s| Instant::now() + Duration::from_secs(s));
    let tty = std::io::stdout().is_terminal();
    let alerted = |s: &Snapshot| args.exit_on_alert && s.alert_counts.total > 0;
    if args.once {
        let snap = live.refresh().map_err(live_error)?;
        print(&match args.format {
            WatchFormat::Json => watch_json::render(&snap),
            WatchFormat::Pretty => watch_table::text(&snap, width(tty)),
        });
        return Ok(if alerted(&snap) {
            Outcome::Found
        } else {
            Outcome::Clean
        });
    }
    // The first refresh reads the whole ledger: a source that cannot be read stops here,
    // before the screen is taken.
    if tty && std::io::stderr().is_terminal() {
        eprintln!("batchguard watch: reading {} ...", live.source);
    }
    let first = live.refresh().map_err(live_error)?;
    if tty && args.format == WatchFormat::Pretty {
        return screen::run(&mut live, first, interval, deadline, args.exit_on_alert);
    }
    let mut ends = Ends::new(false).map_err(signals)?;
    let mut snap = Ok(first);
    let mut notes_shown = Vec::new();
    loop {
        match &snap {
            Ok(s) => {
                let text = match args.format {
                    WatchFormat::Json => watch_json::line(s),
                    WatchFormat::Pretty => summary(s) + &new_notes(s, &mut notes_shown),
                };
                // Nobody reads any more (`watch … | head -1`, a closed pipe): ended as a
                // SIGPIPE would end it, rather than refreshing for no one.
                if let Err(e) = write_out(&text)
                    && e.kind() == std::io::ErrorKind::BrokenPipe
                {
                    return Ok(signalled(libc::SIGPIPE));
                }
                if alerted(s) {
                    return Ok(Outcome::Found);
                }
            }
            Err(e) => {
                // Not `eprintln!`: it panics when standard error is a terminal gone.
                let _ = writeln!(
                    std::io::stderr(),
                    "batchguard watch: refresh failed, trying again: {e}"
                );
            }
        }
        let mut wait = interval;
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Outcome::Clean);
            }
            wait = wait.min(left);
        }
        match ends.wait(wait).map_err(signals)? {
            Wake::Signal(sig) => return Ok(signalled(sig)),
            Wake::Gone => return Ok(terminal_gone()),
            Wake::Timeout | Wake::Resized | Wake::Keys(_) => {}
        }
        snap = live.refresh().map_err(|e| e.to_string());
    }
}

/// Writes `text` to standard output, flushed.
fn write_out(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Exit 128 + N when signal N ended the watch, as a shell reports it.
fn signalled(sig: i32) -> Outcome {
    Outcome::Code(128u8.saturating_add(u8::try_from(sig).unwrap_or(u8::MAX)))
}

/// The terminal went away (end of file or hang-up on its input): ended as by a HUP.
fn terminal_gone() -> Outcome {
    signalled(signal_hook::consts::SIGHUP)
}

fn signals(e: std::io::Error) -> Error {
    Error::Live(format!("cannot watch for signals and the terminal: {e}"))
}

fn width(tty: bool) -> u16 {
    if tty {
        ratatui::crossterm::terminal::size().map_or(PRINT_WIDTH, |(w, _)| w)
    } else {
        PRINT_WIDTH
    }
}

/// One refresh off a terminal: a line of totals, then each alert firing.
fn summary(s: &Snapshot) -> String {
    let running: usize = s.jobs.iter().map(|j| j.running.len()).sum();
    let starts: u64 = s.jobs.iter().map(|j| j.starts).sum();
    let mut out = format!(
        "{}  window {}  jobs {}  running {running}  starts {starts}  skips {}  missed {}  failed {}  alerts {}\n",
        s.window.to,
        crate::text::duration::secs(s.window.since_s),
        s.jobs.len(),
        s.totals.skipped,
        s.totals.missed,
        s.totals.failed,
        s.alert_counts.total
    );
    for a in &s.alerts {
        out.push_str(&format!(
            "  alert {} {}: {}\n",
            a.kind.as_str(),
            a.job,
            a.message
        ));
    }
    out
}

/// The notes of a refresh off the terminal, when they differ from the last ones shown
/// (they change only as jobs run for the first time, so each refresh would repeat them).
fn new_notes(s: &Snapshot, shown: &mut Vec<String>) -> String {
    let now: Vec<String> = s.notes.iter().map(|n| n.message.clone()).collect();
    if now == *shown {
        return String::new();
    }
    let out = now.iter().map(|m| format!("  note {m}\n")).collect();
    *shown = now;
    out
}

/// The terminal screen: the alternate screen in raw mode, redrawn at every refresh and
/// when the terminal is resized; `q`, Esc or Ctrl-C quit. TERM, HUP and INT sent to the
/// process, or its terminal going away, end it too, with the terminal given back and exit
/// 128 + the signal (129 for a terminal gone).
mod screen {
    use super::ends::{Ends, Wake, quit_keys};
    use super::{Error, Live, Outcome, Snapshot, no_color_env, signalled, terminal_gone};
    use super::{signals, watch_table};
    use ratatui::crossterm::{cursor, execute, terminal};
    use std::io::Write;
    use std::time::{Duration, Instant};

    /// Gives the terminal back however the screen ends.
    struct Restore;

    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = terminal::disable_raw_mode();
            let _ = execute!(
                std::io::stdout(),
                terminal::LeaveAlternateScreen,
                cursor::Show
            );
        }
    }

    fn io(e: std::io::Error) -> Error {
        Error::Live(format!("the terminal: {e}"))
    }

    pub(super) fn run(
        live: &mut Live,
        first: Snapshot,
        interval: Duration,
        deadline: Option<Instant>,
        exit_on_alert: bool,
    ) -> Result<Outcome, Error> {
        let mut ends = Ends::new(true).map_err(signals)?;
        terminal::enable_raw_mode().map_err(io)?;
        let restore = Restore;
        execute!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        )
        .map_err(io)?;
        let backend = ratatui::backend::CrosstermBackend::new(std::io::stdout());
        // Never dropped: ratatui's drop shows the cursor and, when that fails (a terminal
        // gone), prints with `eprintln!`, which panics on a hung-up terminal. `Restore`
        // shows the cursor instead, ignoring a terminal that is no more.
        let mut term = std::mem::ManuallyDrop::new(ratatui::Terminal::new(backend).map_err(io)?);
        let color = !no_color_env();
        let mut snap = first;
        let mut error: Option<String> = None;
        // Drawing to a terminal that went away fails with EIO (a hang-up) or EPIPE: the
        // watch ends as when its input says so; any other failure is an error.
        let draw = |term: &mut ratatui::Terminal<_>, snap: &Snapshot, error: Option<&str>| {
            term.draw(|f| {
                let area = f.area();
                watch_table::render(
                    area,
                    f.buffer_mut(),
                    &watch_table::View {
                        snap,
                        error,
                        color,
                        live: true,
                    },
                )
            })
            .map(|_| None)
            .or_else(|e: std::io::Error| match e.raw_os_error() {
                Some(libc::EIO) | Some(libc::EPIPE) => Ok(Some(terminal_gone())),
                _ => Err(io(e)),
            })
        };
        loop {
            if let Some(gone) = draw(&mut term, &snap, error.as_deref())? {
                return Ok(gone);
            }
            if exit_on_alert && snap.alert_counts.total > 0 {
                drop(restore);
                for a in &snap.alerts {
                    let _ = writeln!(
                        std::io::stderr(),
                        "batchguard watch: alert {} {}: {}",
                        a.kind.as_str(),
                        a.job,
                        a.message
                    );
                }
                return Ok(Outcome::Found);
            }
            let next = Instant::now() + interval;
            loop {
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    return Ok(Outcome::Clean);
                }
                let mut wait = next.saturating_duration_since(now);
                if let Some(d) = deadline {
                    wait = wait.min(d.saturating_duration_since(now));
                }
                if wait.is_zero() {
                    break;
                }
                match ends.wait(wait).map_err(signals)? {
                    Wake::Signal(sig) => return Ok(signalled(sig)),
                    Wake::Gone => return Ok(terminal_gone()),
                    Wake::Keys(k) if quit_keys(&k) => return Ok(Outcome::Clean),
                    Wake::Keys(_) => {}
                    Wake::Resized => {
                        if let Some(gone) = draw(&mut term, &snap, error.as_deref())? {
                            return Ok(gone);
                        }
                    }
                    Wake::Timeout => break,
                }
            }
            if let Some(sig) = ends.signal() {
                return Ok(signalled(sig));
            }
            match live.refresh() {
                Ok(s) => {
                    snap = s;
                    error = None;
                }
                Err(e) => error = Some(e.to_string()),
            }
        }
    }
}
