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

/// A slot: its time, with the date when it is not the day of `now` (UTC).
fn slot(t: jiff::Timestamp, now: jiff::Timestamp) -> String {
    if t.strftime("%F").to_string() == now.strftime("%F").to_string() {
        t.strftime("%H:%M").to_string()
    } else {
        t.strftime("%m-%d %H:%M").to_string()
    }
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
        slot(r.scheduled_at, now),
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
                    slot(l.scheduled_at, snap.window.to),
                    l.instance.as_deref().unwrap_or("?"),
                    l.detail.as_deref().unwrap_or(l.reason)
                )
            });
            (j.job.clone(), format!("{reasons}{last}"))
        })
        .collect()
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
    let mut header = vec![
        Span::styled("batchguard watch", v.head()),
        Span::raw(format!("  {}", snap.source)),
    ];
    header.push(Span::raw(format!(
        "  window: last {} ({}-{} UTC)",
        crate::text::duration::secs(snap.window.since_s),
        hms(snap.window.from),
        hms(snap.window.to)
    )));
    let status = vec![
        Span::raw(format!(
            "refreshed {} in {:.1} ms, {} new rows  ",
            hms(snap.window.to),
            snap.refresh_ms,
            snap.input.new_rows
        )),
        if n_alerts > 0 {
            Span::styled(
                format!(
                    "{n_alerts} alert{} firing",
                    if n_alerts == 1 { "" } else { "s" }
                ),
                v.red(),
            )
        } else {
            Span::raw("no alerts")
        },
        Span::styled(if v.live { "   q: quit" } else { "" }, v.dim()),
    ];
    Paragraph::new(vec![Line::from(header), Line::from(status)]).render(head, buf);

    let now = snap.window.to;
    let rows: Vec<Row> = snap
        .jobs
        .iter()
        .map(|j| {
            let style = if j.alerts > 0 {
                v.red()
            } else {
                Style::default()
            };
            Row::new(vec![
                Cell::from(j.job.clone()),
                Cell::from(running_cell(j, now)),
                Cell::from(last_cell(j)),
                Cell::from(format!("{}/{}", j.starts, j.skips)),
                Cell::from(pct(j.lock_contention_ratio)),
                Cell::from(format!(
                    "{}/{} ({})",
                    dur(j.duration_p50_s),
                    dur(j.duration_p95_s),
                    limit(j.expected_duration_s)
                )),
                Cell::from(format!(
                    "{} ({})",
                    dur(j.latency_p95_s),
                    limit(j.max_latency_s)
                )),
                Cell::from(j.missed.to_string()),
                Cell::from(j.failed.to_string()),
                Cell::from(if j.alerts > 0 {
                    j.alerts.to_string()
                } else {
                    "-".to_owned()
                }),
            ])
            .style(style)
        })
        .collect();
    let job_w = snap
        .jobs
        .iter()
        .map(|j| j.job.chars().count())
        .max()
        .unwrap_or(3)
        .clamp(3, 40) as u16;
    let widths = [
        Constraint::Length(job_w),
        Constraint::Max(32),
        Constraint::Length(20),
        Constraint::Length(11),
        Constraint::Length(5),
        Constraint::Length(23),
        Constraint::Length(14),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
    ];
    let header = Row::new(vec![
        "JOB",
        "RUNNING NOW",
        "LAST OUTCOME",
        "STARTS/SKIP",
        "CONT",
        "DURATION p50/p95 (exp)",
        "LATENCY p95",
        "MISSED",
        "FAILED",
        "ALERTS",
    ])
    .style(v.head());
    let table = if snap.jobs.is_empty() {
        Table::new(
            vec![Row::new(vec!["no job in the window"])],
            [Constraint::Min(20)],
        )
    } else {
        Table::new(rows, widths).header(header)
    };
    table
        .column_spacing(1)
        .block(Block::default().borders(Borders::ALL).title(" jobs "))
        .render(jobs, buf);

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
                Line::from(vec![
                    Span::styled(format!("{kind:<12}"), v.red()),
                    Span::styled(format!("{}  ", a.job), v.head()),
                    Span::raw(a.message.clone()),
                ])
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
        let width = |f: fn(&crate::live::figures::LeaseView) -> usize| {
            snap.leases.iter().map(f).max().unwrap_or(0).clamp(6, 48) as u16
        };
        let holder_w = width(|l| l.holder.chars().count());
        let run_w = width(|l| l.run_id.chars().count());
        let rows: Vec<Row> = snap
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
                Row::new(vec![
                    l.job.clone(),
                    slot(l.scheduled_at, now),
                    l.holder.clone(),
                    l.run_id.clone(),
                    l.fence.to_string(),
                    left,
                ])
                .style(if l.expired { v.red() } else { Style::default() })
            })
            .collect();
        Table::new(
            rows,
            [
                Constraint::Length(job_w),
                Constraint::Length(11),
                Constraint::Length(holder_w),
                Constraint::Length(run_w),
                Constraint::Length(6),
                Constraint::Length(16),
            ],
        )
        .header(
            Row::new(vec!["JOB", "SLOT", "HOLDER", "RUN", "FENCE", "TIME LEFT"]).style(v.head()),
        )
        .column_spacing(1)
        .block(Block::default().borders(Borders::ALL).title(" leases "))
        .render(leases, buf);
    }

    if skips_h > 0 {
        let lines: Vec<Line> = skips
            .iter()
            .map(|(job, text)| {
                Line::from(vec![
                    Span::styled(format!("{job:<w$}  ", w = job_w as usize), v.head()),
                    Span::raw(text.clone()),
                ])
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
        Paragraph::new(Line::from(Span::styled(text, v.red()))).render(error, buf);
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
