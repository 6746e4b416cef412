//! The rows of the window kept in memory between refreshes: every event and output row
//! whose slot (`scheduled_at`) is not older than the window's start.
//!
//! Rows are packed into chunks in the order they were read, each chunk one text buffer
//! and fixed-size records, so keeping a row allocates nothing of its own. A chunk is
//! dropped whole once its newest slot is older than the window; ledgers are written
//! roughly in slot order, so a chunk's slots are close together and little is kept past
//! its time. The rows of a chunk that is kept but older than the window are skipped when
//! the window is folded.

use crate::ledger::tail::TailEvent;
use crate::ledger::{EventKind, EventRef, OutputRef, Status, Trigger};
use jiff::Timestamp;

/// Rows per chunk.
const CHUNK: usize = 4096;

/// `(start, len)` in a chunk's text; `len == u32::MAX` is `None`.
type Span = (u32, u32);

struct PackedEvent {
    run_id: Span,
    job: Span,
    instance: Span,
    error_code: Span,
    snapshot_digest: Span,
    detail: Span,
    scheduled_at: Timestamp,
    at: Timestamp,
    attempt: Option<u32>,
    /// The job's number (`live::Names`).
    job_id: u32,
    event: EventKind,
    status: Option<Status>,
    trigger: Trigger,
}

struct PackedOutput {
    job: Span,
    run_id: Span,
    output_key: Span,
    scheduled_at: Timestamp,
    at: Timestamp,
}

struct Chunk<R> {
    text: String,
    rows: Vec<R>,
    /// The newest `scheduled_at` of the chunk's rows.
    newest: Timestamp,
}

impl<R> Chunk<R> {
    fn new() -> Chunk<R> {
        Chunk {
            text: String::new(),
            rows: Vec::with_capacity(CHUNK),
            newest: Timestamp::MIN,
        }
    }

    fn span(&mut self, s: Option<&str>) -> Span {
        match s {
            None => (0, u32::MAX),
            Some(s) => {
                let start = self.text.len() as u32;
                self.text.push_str(s);
                (start, s.len() as u32)
            }
        }
    }

    fn str(&self, (start, len): Span) -> Option<&str> {
        (len != u32::MAX).then(|| &self.text[start as usize..(start + len) as usize])
    }
}

/// An event row of the window, borrowed from its chunk.
#[derive(Clone, Copy, Debug)]
pub struct WindowEvent<'a> {
    pub event: EventRef<'a>,
    pub detail: Option<&'a str>,
    /// The job's number, as it was pushed.
    pub job_id: u32,
}

/// The window's rows.
pub struct Window {
    events: Vec<Chunk<PackedEvent>>,
    outputs: Vec<Chunk<PackedOutput>>,
}

impl Default for Window {
    fn default() -> Self {
        Window::new()
    }
}

impl Window {
    pub fn new() -> Window {
        Window {
            events: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// Keeps an event row of the job numbered `job_id`.
    pub fn push_event(&mut self, e: &TailEvent<'_>, job_id: u32) {
        if self.events.last().is_none_or(|c| c.rows.len() == CHUNK) {
            self.events.push(Chunk::new());
        }
        let c = self.events.last_mut().expect("a chunk");
        let ev = &e.event;
        let p = PackedEvent {
            run_id: c.span(Some(ev.run_id)),
            job: c.span(Some(ev.job)),
            instance: c.span(ev.instance),
            error_code: c.span(ev.error_code),
            snapshot_digest: c.span(ev.snapshot_digest),
            detail: c.span(e.detail),
            scheduled_at: ev.scheduled_at,
            at: ev.at,
            attempt: ev.attempt,
            job_id,
            event: ev.event,
            status: ev.status,
            trigger: ev.trigger,
        };
        c.newest = c.newest.max(ev.scheduled_at);
        c.rows.push(p);
    }

    /// Keeps an output row.
    pub fn push_output(&mut self, o: &OutputRef<'_>) {
        if self.outputs.last().is_none_or(|c| c.rows.len() == CHUNK) {
            self.outputs.push(Chunk::new());
        }
        let c = self.outputs.last_mut().expect("a chunk");
        let p = PackedOutput {
            job: c.span(Some(o.job)),
            run_id: c.span(Some(o.run_id)),
            output_key: c.span(Some(o.output_key)),
            scheduled_at: o.scheduled_at,
            at: o.at,
        };
        c.newest = c.newest.max(o.scheduled_at);
        c.rows.push(p);
    }

    /// Drops the chunks whose every slot is older than `from`.
    pub fn evict(&mut self, from: Timestamp) {
        self.events.retain(|c| c.newest >= from);
        self.outputs.retain(|c| c.newest >= from);
    }

    /// Event rows kept (some may be older than the window until their chunk goes).
    #[cfg(test)]
    fn event_rows(&self) -> usize {
        self.events.iter().map(|c| c.rows.len()).sum()
    }

    /// Every event row whose slot is in `[from, to)`, in the order read.
    pub fn events<'w>(
        &'w self,
        from: Timestamp,
        to: Timestamp,
        f: &mut dyn FnMut(&WindowEvent<'w>),
    ) {
        for c in &self.events {
            if c.newest < from {
                continue;
            }
            for p in &c.rows {
                if p.scheduled_at < from || p.scheduled_at >= to {
                    continue;
                }
                f(&WindowEvent {
                    event: EventRef {
                        run_id: c.str(p.run_id).unwrap_or(""),
                        job: c.str(p.job).unwrap_or(""),
                        scheduled_at: p.scheduled_at,
                        event: p.event,
                        at: p.at,
                        instance: c.str(p.instance),
                        attempt: p.attempt,
                        status: p.status,
                        error_code: c.str(p.error_code),
                        snapshot_digest: c.str(p.snapshot_digest),
                        trigger: p.trigger,
                    },
                    detail: c.str(p.detail),
                    job_id: p.job_id,
                });
            }
        }
    }

    /// Every output row whose slot is in `[from, to)`, in the order read.
    pub fn outputs(&self, from: Timestamp, to: Timestamp, f: &mut dyn FnMut(&OutputRef<'_>)) {
        for c in &self.outputs {
            if c.newest < from {
                continue;
            }
            for p in &c.rows {
                if p.scheduled_at < from || p.scheduled_at >= to {
                    continue;
                }
                f(&OutputRef {
                    job: c.str(p.job).unwrap_or(""),
                    scheduled_at: p.scheduled_at,
                    run_id: c.str(p.run_id).unwrap_or(""),
                    output_key: c.str(p.output_key).unwrap_or(""),
                    at: p.at,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev<'a>(run: &'a str, t: Timestamp, detail: Option<&'a str>) -> TailEvent<'a> {
        TailEvent {
            event: EventRef {
                run_id: run,
                job: "j",
                scheduled_at: t,
                event: EventKind::Skip,
                at: t,
                instance: Some("host-a"),
                attempt: None,
                status: None,
                error_code: None,
                snapshot_digest: None,
                trigger: Trigger::Schedule,
            },
            fence: Some(7),
            detail,
        }
    }

    #[test]
    fn keeps_rows_of_the_window_and_drops_old_chunks() {
        let base: Timestamp = "2026-03-01T00:00:00Z".parse().unwrap();
        let at = |s: i64| base + jiff::SignedDuration::from_secs(s);
        let mut w = Window::new();
        for i in 0..(CHUNK as i64 + 10) {
            let run = format!("r{i}");
            w.push_event(&ev(&run, at(i), Some("held by host-b")), 3);
        }
        let (from, to) = (at(3600), at(86_400));
        let mut n = 0;
        w.events(from, to, &mut |e| {
            assert!(e.event.scheduled_at >= from);
            assert_eq!(e.detail, Some("held by host-b"));
            assert_eq!(e.job_id, 3);
            n += 1;
        });
        assert_eq!(n, CHUNK + 10 - 3600);
        // The first chunk still has rows of the window: kept.
        w.evict(from);
        assert_eq!(w.event_rows(), CHUNK + 10);
        // Its newest slot is older than the window now: gone, the second kept whole.
        w.evict(at(CHUNK as i64 + 2));
        assert_eq!(w.event_rows(), 10);
    }
}
