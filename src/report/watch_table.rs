//! The live table of `batchguard watch`, drawn with ratatui: the terminal's screen, and
//! the same drawing as text for `--once` (so a script sees what a person sees).
//!
//! One row per job: the slot running now (since when, on which instance), the last
//! outcome, starts against skips and the contention ratio, duration p50/p95 against
//! `expected_duration`, latency p95 against `alerts.max_latency`, missed and failed slots
//! of the window. Below: the alerts firing, the leases not released (holder, run, fence,
//! time left) and why slots were skipped (who held the lock). Jobs with an alert are red.

use crate::live::alerts::AlertKind;
use crate::live::figures::{JobFigures, Snapshot};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Widget};

/// What the screen shows.
pub struct View<'a> {
    pub snap: &'a Snapshot,
    /// Why the last refresh failed (the figures are then the previous ones).
    pub error: Option<&'a str>,
    pub color: bool,
    /// A live screen (says how to quit) rather than a one-off print.
    pub live: bool,
}

impl View<'_> {
    fn style(&self, s: Style) -> Style {
        if self.color { s } else { Style::default() }
    }
    fn red(&self) -> Style {
        self.style(Style::default().fg(Color::Red).add_modifier(Modifier::BOLD))
    }
    fn dim(&self) -> Style {
        self.style(Style::default().add_modifier(Modifier::DIM))
    }
    fn head(&self) -> Style {
        self.style(Style::default().add_modifier(Modifier::BOLD))
    }
}

fn hms(t: jiff::Timestamp) -> String {
    t.strftime("%H:%M:%S").to_string()
}

/// A slot: its time, with the date when it is not the day of `now` (UTC), and with its
/// seconds when the job's schedule has slots off the whole minute (`seconds`) or the slot
/// itself is.
fn slot(t: jiff::Timestamp, now: jiff::Timestamp, seconds: bool) -> String {
    let seconds = seconds || t.as_second().rem_euclid(60) != 0;
    let time = if seconds { "%H:%M:%S" } else { "%H:%M" };
    if t.strftime("%F").to_string() == now.strftime("%F").to_string() {
        t.strftime(time).to_string()
    } else {
        t.strftime(&format!("%m-%d {time}")).to_string()
    }
}

/// Whether job `job`'s slots are shown with seconds.
fn seconds_of(snap: &Snapshot, job: &str) -> bool {
    snap.jobs.iter().any(|j| j.job == job && j.slot_seconds)
}

fn dur(s: Option<f64>) -> String {
    s.map_or_else(|| "-".to_owned(), crate::audit::human_secs)
}

fn limit(s: Option<u64>) -> String {
    s.map_or_else(|| "-".to_owned(), crate::text::duration::secs)
}

fn running_cell(j: &JobFigures, now: jiff::Timestamp) -> String {
    let Some(r) = j.running.first() else {
        return "-".to_owned();
    };
    let mut s = format!(
        "{} on {} for {}",
        slot(r.scheduled_at, now, j.slot_seconds),
        r.instance.as_deref().unwrap_or("?"),
        crate::text::duration::secs(r.running_s.max(0) as u64)
    );
    if j.running.len() > 1 {
        s.push_str(&format!(" (+{})", j.running.len() - 1));
    }
    s
}

fn last_cell(j: &JobFigures) -> String {
    match &j.last_outcome {
        None => "-".to_owned(),
        Some(o) => match o.outcome {
            "succeeded" => format!("ok {}", hms(o.at)),
            "failed" => format!(
                "FAILED {} {}",
                o.error_code.as_deref().unwrap_or(""),
                hms(o.at)
            )
            .replace("  ", " "),
            _ => format!("dead-lettered {}", hms(o.at)),
        },
    }
}

fn pct(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_owned(), |r| format!("{:.0}%", r * 100.0))
}

/// The lines of the skips section: per job with skips, the reasons and the last one.
fn skip_lines(snap: &Snapshot) -> Vec<(String, String)> {
    snap.jobs
        .iter()
        .filter(|j| j.skips > 0)
        .map(|j| {
            let reasons = j
                .skip_reasons
                .iter()
                .map(|(r, n)| format!("{} {n}", r.replace('_', " ")))
                .collect::<Vec<_>>()
                .join(", ");
            let last = j.last_skip.as_ref().map_or(String::new(), |l| {
                format!(
                    "; last: slot {} on {}: {}",
                    slot(l.scheduled_at, snap.window.to, j.slot_seconds),
                    l.instance.as_deref().unwrap_or("?"),
                    l.detail.as_deref().unwrap_or(l.reason)
                )
            });
            (j.job.clone(), format!("{reasons}{last}"))
        })
        .collect()
}

/// A table's column: its header, the widest a cell may be, and its rank when the
/// terminal is too narrow for every column (0 is kept first).
type Column = (&'static str, u16, u8);

/// The jobs table's columns: the job kept first, the duration given up first, so that a
/// narrow terminal hides whole columns rather than cutting every header.
const JOB_COLUMNS: [Column; 10] = [
    ("JOB", 40, 0),
    ("RUNNING NOW", 32, 5),
    ("LAST OUTCOME", 20, 4),
    ("STARTS/SKIP", 11, 6),
    ("CONT", 5, 7),
    ("DURATION p50/p95 (exp)", 23, 9),
    ("LATENCY p95", 14, 8),
    ("MISSED", 6, 1),
    ("FAILED", 6, 2),
    ("ALERTS", 6, 3),
];

/// One job's cells, in [`JOB_COLUMNS`] order.
fn job_cells(j: &JobFigures, now: jiff::Timestamp) -> Vec<String> {
    vec![
        j.job.clone(),
        running_cell(j, now),
        last_cell(j),
        format!("{}/{}", j.starts, j.skips),
        pct(j.lock_contention_ratio),
        format!(
            "{}/{} ({})",
            dur(j.duration_p50_s),
            dur(j.duration_p95_s),
            limit(j.expected_duration_s)
        ),
        format!("{} ({})", dur(j.latency_p95_s), limit(j.max_latency_s)),
        j.missed.to_string(),
        j.failed.to_string(),
        if j.alerts > 0 {
            j.alerts.to_string()
        } else {
            "-".to_owned()
        },
    ]
}

/// The lease table's columns.
const LEASE_COLUMNS: [Column; 6] = [
    ("JOB", 40, 0),
    ("SLOT", 14, 1),
    ("HOLDER", 48, 2),
    ("RUN", 48, 4),
    ("FENCE", 6, 5),
    ("TIME LEFT", 16, 3),
];

/// The columns shown in `width` (indexes into `spec`, in its order) and their widths:
/// each as wide as its header and its widest cell (up to its limit); columns are
/// dropped by rank until the rest fit. The first column is always shown, cut to the
/// width when even it alone does not fit.
fn fit_columns(spec: &[Column], cells: &[Vec<String>], width: u16) -> (Vec<usize>, Vec<u16>) {
    let natural: Vec<u16> = spec
        .iter()
        .enumerate()
        .map(|(c, &(head, cap, _))| {
            let widest = cells
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0);
            (widest.min(cap as usize) as u16).max(head.len() as u16)
        })
        .collect();
    let mut by_priority: Vec<usize> = (0..spec.len()).collect();
    by_priority.sort_by_key(|&c| spec[c].2);
    let mut keep = vec![false; spec.len()];
    let mut used: u16 = 0;
    for c in by_priority {
        let need = natural[c] + u16::from(used > 0);
        if c == 0 || used + need <= width {
            keep[c] = true;
            used = used.saturating_add(need);
        }
    }
    let shown: Vec<usize> = (0..spec.len()).filter(|&c| keep[c]).collect();
    let mut widths: Vec<u16> = shown.iter().map(|&c| natural[c]).collect();
    if shown.len() == 1 {
        widths[0] = widths[0].min(width);
    }
    (shown, widths)
}

/// `s` in at most `width` characters: cut at the last word boundary that fits, with `…`
/// to say so (a word cut in the middle reads as another word).
fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let head: String = s.chars().take(width - 1).collect();
    // Back to a space, unless that would throw away more than half of what fits.
    let cut = match head.rfind(' ') {
        Some(i) if head[..i].chars().count() * 2 >= width => head[..i].trim_end(),
        _ => head.as_str(),
    };
    format!("{cut}…")
}

/// A line of styled pieces in at most `width` characters: the piece that overflows is
/// [`fit`] to what is left, and the ones after it dropped.
fn fit_line(pieces: Vec<(String, Style)>, width: usize) -> Line<'static> {
    let mut left = width;
    let mut spans = Vec::new();
    for (text, style) in pieces {
        let n = text.chars().count();
        if n <= left {
            left -= n;
            spans.push(Span::styled(text, style));
        } else {
            spans.push(Span::styled(fit(&text, left), style));
            break;
        }
    }
    Line::from(spans)
}

/// A table of `cells` under `spec`'s headers, fitted to `area` (see [`fit_columns`]);
/// `styles` gives each row's style.
fn fitted_table(
    spec: &[Column],
    cells: &[Vec<String>],
    styles: &[Style],
    area: Rect,
    head: Style,
) -> (Table<'static>, usize) {
    let (shown, col_w) = fit_columns(spec, cells, area.width.saturating_sub(2));
    let rows: Vec<Row> = cells
        .iter()
        .zip(styles)
        .map(|(row, &style)| {
            Row::new(
                shown
                    .iter()
                    .zip(&col_w)
                    .map(|(&c, &w)| Cell::from(fit(&row[c], w as usize))),
            )
            .style(style)
        })
        .collect();
    let widths: Vec<Constraint> = col_w.iter().map(|&w| Constraint::Length(w)).collect();
    let header = Row::new(shown.iter().map(|&c| spec[c].0)).style(head);
    (
        Table::new(rows, widths).header(header).column_spacing(1),
        spec.len() - shown.len(),
    )
}

/// Draws the whole screen in `area`.
pub fn render(area: Rect, buf: &mut Buffer, v: &View<'_>) {
    let snap = v.snap;
    let skips = skip_lines(snap);
    let jobs_h = snap.jobs.len().max(1) as u16 + 3;
    let alerts_h = if snap.alerts.is_empty() {
        0
    } else {
        snap.alerts.len().min(12) as u16 + 2
    };
    let leases_h = if snap.leases.is_empty() {
        0
    } else {
        snap.leases.len() as u16 + 3
    };
    let skips_h = if skips.is_empty() {
        0
    } else {
        skips.len() as u16 + 2
    };
    let error_h = u16::from(v.error.is_some() || snap.leases_error.is_some());
    let [head, jobs, alerts, leases, skips_area, error, _] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(jobs_h),
        Constraint::Length(alerts_h),
        Constraint::Length(leases_h),
        Constraint::Length(skips_h),
        Constraint::Length(error_h),
        Constraint::Min(0),
    ])
    .areas(area);

    let n_alerts = snap.alert_counts.total;
    let width = area.width as usize;
    let header = fit_line(
        vec![
            ("batchguard watch".to_owned(), v.head()),
            (format!("  {}", snap.source), Style::default()),
            (
                format!(
                    "  window: last {} ({}-{} UTC)",
                    crate::text::duration::secs(snap.window.since_s),
                    hms(snap.window.from),
                    hms(snap.window.to)
                ),
                Style::default(),
            ),
        ],
        width,
    );
    let status = fit_line(
        vec![
            (
                format!(
                    "refreshed {} in {:.1} ms, {} new rows  ",
                    hms(snap.window.to),
                    snap.refresh_ms,
                    snap.input.new_rows
                ),
                Style::default(),
            ),
            if n_alerts > 0 {
                (
                    format!(
                        "{n_alerts} alert{} firing",
                        if n_alerts == 1 { "" } else { "s" }
                    ),
                    v.red(),
                )
            } else {
                ("no alerts".to_owned(), Style::default())
            },
            (if v.live { "   q: quit" } else { "" }.to_owned(), v.dim()),
        ],
        width,
    );
    Paragraph::new(vec![header, status]).render(head, buf);

    let now = snap.window.to;
    let inner = area.width.saturating_sub(2) as usize;
    let cells: Vec<Vec<String>> = snap.jobs.iter().map(|j| job_cells(j, now)).collect();
    let styles: Vec<Style> = snap
        .jobs
        .iter()
        .map(|j| {
            if j.alerts > 0 {
                v.red()
            } else {
                Style::default()
            }
        })
        .collect();
    let (table, hidden) = fitted_table(&JOB_COLUMNS, &cells, &styles, jobs, v.head());
    let title = if hidden > 0 && !snap.jobs.is_empty() {
        format!(
            " jobs ({} hidden: a wider terminal shows them) ",
            crate::text::plural(hidden, "column")
        )
    } else {
        " jobs ".to_owned()
    };
    let table = if snap.jobs.is_empty() {
        Table::new(
            vec![Row::new(vec!["no job in the window"])],
            [Constraint::Min(20)],
        )
    } else {
        table
    };
    table
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(fit(&title, inner)),
        )
        .render(jobs, buf);
    // The job column's width, for the sections below.
    let job_w = fit_columns(&JOB_COLUMNS, &cells, inner as u16)
        .1
        .first()
        .copied()
        .unwrap_or(3) as usize;

    if alerts_h > 0 {
        let lines: Vec<Line> = snap
            .alerts
            .iter()
            .take(12)
            .map(|a| {
                let kind = match a.kind {
                    AlertKind::Latency => "LATENCY",
                    AlertKind::Missed => "MISSED",
                    AlertKind::StaleLease => "STALE LEASE",
                    AlertKind::Overrun => "OVERRUN",
                };
                fit_line(
                    vec![
                        (format!("{kind:<12}"), v.red()),
                        (format!("{}  ", a.job), v.head()),
                        (a.message.clone(), Style::default()),
                    ],
                    inner,
                )
            })
            .collect();
        let more = snap.alerts.len().saturating_sub(12);
        let title = if more > 0 {
            format!(" alerts ({more} more) ")
        } else {
            " alerts ".to_owned()
        };
        Paragraph::new(lines)
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(title)
                    .border_style(v.red()),
            )
            .render(alerts, buf);
    }

    if leases_h > 0 {
        let cells: Vec<Vec<String>> = snap
            .leases
            .iter()
            .map(|l| {
                let left = if l.expired {
                    format!(
                        "expired {} ago",
                        crate::text::duration::secs((-l.secs_left).max(0) as u64)
                    )
                } else {
                    crate::text::duration::secs(l.secs_left.max(0) as u64)
                };
                vec![
                    l.job.clone(),
                    slot(l.scheduled_at, now, seconds_of(snap, &l.job)),
                    l.holder.clone(),
                    l.run_id.clone(),
                    l.fence.to_string(),
                    left,
                ]
            })
            .collect();
        let styles: Vec<Style> = snap
            .leases
            .iter()
            .map(|l| if l.expired { v.red() } else { Style::default() })
            .collect();
        let (table, hidden) = fitted_table(&LEASE_COLUMNS, &cells, &styles, leases, v.head());
        let title = if hidden > 0 {
            format!(
                " leases ({} hidden) ",
                crate::text::plural(hidden, "column")
            )
        } else {
            " leases ".to_owned()
        };
        table
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(fit(&title, inner)),
            )
            .render(leases, buf);
    }

    if skips_h > 0 {
        let lines: Vec<Line> = skips
            .iter()
            .map(|(job, text)| {
                fit_line(
                    vec![
                        (format!("{job:<job_w$}  "), v.head()),
                        (text.clone(), Style::default()),
                    ],
                    inner,
                )
            })
            .collect();
        Paragraph::new(lines)
            .block(Block::default().borders(Borders::ALL).title(" skips "))
            .render(skips_area, buf);
    }

    if error_h > 0 {
        let text = match (v.error, &snap.leases_error) {
            (Some(e), _) => format!("last refresh failed (figures above are older): {e}"),
            (None, Some(e)) => format!("leases: {e}"),
            (None, None) => String::new(),
        };
        Paragraph::new(fit_line(vec![(text, v.red())], area.width as usize)).render(error, buf);
    }
}

/// How many lines the drawing needs at `width` (for a print that is not a screen).
fn height(snap: &Snapshot) -> u16 {
    let skips = snap.jobs.iter().filter(|j| j.skips > 0).count() as u16;
    let mut h = 2 + snap.jobs.len().max(1) as u16 + 3;
    if !snap.alerts.is_empty() {
        h += snap.alerts.len().min(12) as u16 + 2;
    }
    if !snap.leases.is_empty() {
        h += snap.leases.len() as u16 + 3;
    }
    if skips > 0 {
        h += skips + 2;
    }
    h + u16::from(snap.leases_error.is_some())
}

/// The drawing as text, `width` columns wide (`--once`, and a screen capture).
pub fn text(snap: &Snapshot, width: u16) -> String {
    let area = Rect::new(0, 0, width.max(40), height(snap));
    let mut buf = Buffer::empty(area);
    render(
        area,
        &mut buf,
        &View {
            snap,
            error: None,
            color: false,
            live: false,
        },
    );
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        for x in 0..area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{JOB_COLUMNS, fit, fit_columns, slot};

    #[test]
    fn fit_cuts_at_a_word_boundary_and_says_so() {
        assert_eq!(
            fit("held by host-a (run 42)", 40),
            "held by host-a (run 42)"
        );
        assert_eq!(fit("held by host-a (run 42)", 16), "held by host-a…");
        // No space late enough: cut in the word rather than lose most of the line.
        assert_eq!(fit("20261202T023929-743-83a6", 10), "20261202T…");
        assert_eq!(fit("abc", 0), "");
    }

    #[test]
    fn narrow_tables_hide_whole_columns_and_keep_every_header_whole() {
        let row: Vec<String> = [
            "settle-payments-eu",
            "02:39:10 on host-a for 1s",
            "-",
            "1/1",
            "50%",
            "-/- (1m)",
            "- (15m)",
            "0",
            "0",
            "-",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for width in [20u16, 40, 78, 120, 200] {
            let (shown, widths) = fit_columns(&JOB_COLUMNS, std::slice::from_ref(&row), width);
            assert_eq!(shown[0], 0, "the job is always shown");
            let used: u16 = widths.iter().sum::<u16>() + widths.len() as u16 - 1;
            assert!(used <= width.max(widths[0]), "{width}: {used}");
            for (&c, &w) in shown.iter().zip(&widths) {
                assert!(
                    JOB_COLUMNS[c].0.len() as u16 <= w,
                    "{width}: header {c} cut"
                );
            }
        }
        assert_eq!(
            fit_columns(&JOB_COLUMNS, &[row], 78).0,
            [0, 1, 2, 7, 8, 9],
            "missed, failed and alerts before the rest"
        );
    }

    #[test]
    fn a_slot_off_the_minute_shows_its_seconds() {
        let now: jiff::Timestamp = "2026-03-01T01:05:00Z".parse().unwrap();
        let t = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        assert_eq!(slot(t("2026-03-01T01:02:10Z"), now, false), "01:02:10");
        assert_eq!(slot(t("2026-03-01T01:02:00Z"), now, true), "01:02:00");
        assert_eq!(slot(t("2026-03-01T01:02:00Z"), now, false), "01:02");
        assert_eq!(slot(t("2026-02-28T01:02:10Z"), now, true), "02-28 01:02:10");
    }
}
