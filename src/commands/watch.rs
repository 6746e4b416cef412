//! `batchguard watch`: the live table on a terminal; off one (or with `--once`), the same
//! figures as text or JSON. Exit 0 when it stops (`q`, `--for`, `--once`), 1 when
//! `--exit-on-alert` saw an alert fire, 2 when it cannot read its sources.

use super::{Error, Outcome, no_color_env, print, settings_for};
use crate::cli::{LiveArgs, WatchArgs, WatchFormat};
use crate::live::figures::Snapshot;
use crate::live::{Live, LiveError, LiveOptions};
use crate::report::{watch_json, watch_table};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    let ledger = match (&src.ledger, &src.store) {
        (Some(l), _) => l.clone(),
        (None, Some(s)) => s.clone(),
        (None, None) => {
            return Err(Error::Live(
                "give the store (--store URL) or a ledger (--ledger SOURCE) to read".into(),
            ));
        }
    };
    Live::open(LiveOptions {
        ledger,
        outputs: src.outputs,
        store: src.store,
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
    let mut snap = Ok(first);
    loop {
        match &snap {
            Ok(s) => {
                print(&match args.format {
                    WatchFormat::Json => watch_json::line(s),
                    WatchFormat::Pretty => summary(s),
                });
                if alerted(s) {
                    return Ok(Outcome::Found);
                }
            }
            Err(e) => eprintln!("batchguard watch: refresh failed, trying again: {e}"),
        }
        let mut wait = interval;
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Outcome::Clean);
            }
            wait = wait.min(left);
        }
        std::thread::sleep(wait);
        snap = live.refresh().map_err(|e| e.to_string());
    }
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

/// The terminal screen: the alternate screen in raw mode, redrawn at every refresh and
/// when the terminal is resized; `q`, Esc or Ctrl-C quit. TERM, HUP and INT sent to the
/// process end it too, with the terminal given back and exit 128 + the signal.
mod screen {
    use super::{Error, Live, Outcome, Snapshot, no_color_env, watch_table};
    use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
    use ratatui::crossterm::{cursor, execute, terminal};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    /// How long a wait for a key lasts at most before the signal flag is looked at again.
    const SIGNAL_CHECK: Duration = Duration::from_millis(100);

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
        // Set to the signal's number when one arrives; the handlers only store it.
        let stop = Arc::new(AtomicUsize::new(0));
        for sig in [
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
            signal_hook::consts::SIGINT,
        ] {
            signal_hook::flag::register_usize(sig, Arc::clone(&stop), sig as usize)
                .map_err(|e| Error::Live(format!("cannot handle signal {sig}: {e}")))?;
        }
        let stopped = || match stop.load(Ordering::Relaxed) {
            0 => None,
            sig => Some(Outcome::Code(128u8.saturating_add(sig as u8))),
        };
        terminal::enable_raw_mode().map_err(io)?;
        let restore = Restore;
        execute!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        )
        .map_err(io)?;
        let backend = ratatui::backend::CrosstermBackend::new(std::io::stdout());
        let mut term = ratatui::Terminal::new(backend).map_err(io)?;
        let color = !no_color_env();
        let mut snap = first;
        let mut error: Option<String> = None;
        loop {
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
                .map(|_| ())
                .map_err(io)
            };
            draw(&mut term, &snap, error.as_deref())?;
            if exit_on_alert && snap.alert_counts.total > 0 {
                drop(restore);
                for a in &snap.alerts {
                    eprintln!(
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
                if let Some(outcome) = stopped() {
                    return Ok(outcome);
                }
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
                match event::poll(wait.min(SIGNAL_CHECK)) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    // A signal arrived during the wait: the flag says which.
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(io(e)),
                }
                match event::read().map_err(io)? {
                    Event::Key(k) if k.kind != KeyEventKind::Release => {
                        let ctrl_c = k.code == KeyCode::Char('c')
                            && k.modifiers.contains(KeyModifiers::CONTROL);
                        if matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) || ctrl_c {
                            return Ok(Outcome::Clean);
                        }
                    }
                    Event::Resize(_, _) => {
                        term.autoresize().map_err(io)?;
                        draw(&mut term, &snap, error.as_deref())?;
                    }
                    _ => {}
                }
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
