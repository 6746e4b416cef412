//! `audit --format html` in a real browser: headless Chromium (Debian's `chromium`) opens
//! the demo's report. It must render without one console message (the report carries no
//! script, so any message is a page error or the engine complaining), and its screenshot
//! must show both charts: inside each chart's box, found by rendering the same report with
//! the charts' backgrounds painted, the bars' colours are there.
//!
//! Without chromium the tests skip with a message; with `CI=true` they fail (`.ci/run`
//! installs it).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The bars' colours of `src/report/audit_html.rs`: missed and duplicated runs per day, and
/// the latency histogram.
const MISSED: [u8; 3] = [0xcf, 0x22, 0x2e];
const DUPLICATED: [u8; 3] = [0xbf, 0x87, 0x00];
const LATENCY: [u8; 3] = [0x09, 0x69, 0xda];
/// Painted behind each chart to find its box; no colour of the report is near it.
const MARK: [u8; 3] = [0xff, 0x00, 0xff];
/// A bar of one run at this window's width is about 30 x 40 px; a chart whose bars did not
/// render has none of their colour.
const MIN_BAR_PIXELS: usize = 300;

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for name in ["chromium", "chromium-browser"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Chromium, or `None` after saying why the test is skipped; in CI a missing browser fails.
fn browser() -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "chromium is not installed (`apt-get install -y chromium`; .ci/run installs it)"
        );
        eprintln!("skipped: chromium is not installed (`apt-get install -y chromium`)");
    }
    found
}

struct Shot {
    width: usize,
    height: usize,
    rgb: Vec<[u8; 3]>,
}

impl Shot {
    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        self.rgb[y * self.width + x]
    }
}

struct Render {
    /// Every console message the page logged, as chromium prints it.
    console: Vec<String>,
    shot: Shot,
}

fn decode(png_path: &Path) -> Shot {
    let file = std::fs::File::open(png_path).expect("screenshot written");
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let channels = info.color_type.samples();
    assert!(
        channels >= 3,
        "a colour screenshot, not {:?}",
        info.color_type
    );
    let (width, height) = (info.width as usize, info.height as usize);
    let mut rgb = Vec::with_capacity(width * height);
    for row in buf.chunks(info.line_size).take(height) {
        for px in row.chunks(channels).take(width) {
            rgb.push([px[0], px[1], px[2]]);
        }
    }
    Shot { width, height, rgb }
}

/// Opens `html` in headless chromium at 1280 x 2000 and returns its console and screenshot.
fn render(chromium: &Path, html: &Path) -> Render {
    let dir = tempfile::tempdir().expect("tempdir");
    let png_path = dir.path().join("shot.png");
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,2000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("--screenshot={}", png_path.display()))
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    // A browser that never exits is a failure, not a hung test run.
    let limit = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > limit {
            child.kill().ok();
            panic!("chromium did not finish rendering {}", html.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("chromium output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && png_path.is_file(),
        "chromium failed ({}):\n{stderr}",
        out.status
    );
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_owned)
        .collect();
    Render {
        console,
        shot: decode(&png_path),
    }
}

/// The demo's audit as an HTML report in `dir` (the audit finds the demo's mistakes: exit 1).
fn demo_report(dir: &Path) -> PathBuf {
    let out = dir.join("audit.html");
    let status = common::bg()
        .args([
            "audit",
            "--ledger",
            "fixtures/demo/events.csv",
            "--outputs",
            "fixtures/demo/outputs.csv",
            "--manifest",
            "fixtures/demo/billing.batchguard.yaml",
            "--from",
            "2026-03-01T00:00:00+09:00",
            "--to",
            "2026-03-02T00:00:00+09:00",
            "--format",
            "html",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("audit runs");
    assert_eq!(status.status.code(), Some(1), "{status:?}");
    out
}

/// A copy of `html` changed by `edit`, beside it: the report with its charts marked, and
/// the broken reports the checks are proved on.
fn variant(html: &Path, name: &str, edit: impl Fn(&str) -> String) -> PathBuf {
    let text = std::fs::read_to_string(html).expect("report");
    let edited = edit(&text);
    assert_ne!(edited, text, "the variant {name} changes the report");
    let path = html.with_file_name(name);
    std::fs::write(&path, edited).expect("write variant");
    path
}

fn near(a: [u8; 3], b: [u8; 3]) -> bool {
    a.iter().zip(b).all(|(x, y)| x.abs_diff(y) <= 12)
}

/// The boxes (x0, y0, x1, y1) of the charts: the runs of rows where the marked render has
/// the mark colour, each with the columns the mark spans.
fn chart_boxes(marked: &Shot) -> Vec<(usize, usize, usize, usize)> {
    let mut boxes: Vec<(usize, usize, usize, usize)> = Vec::new();
    let mut open = false;
    for y in 0..marked.height {
        let xs: Vec<usize> = (0..marked.width)
            .filter(|&x| near(marked.at(x, y), MARK))
            .collect();
        match (xs.first(), xs.last(), open) {
            (Some(&x0), Some(&x1), true) => {
                let b = boxes.last_mut().expect("open box");
                (b.0, b.2, b.3) = (b.0.min(x0), b.2.max(x1), y);
            }
            (Some(&x0), Some(&x1), false) => {
                boxes.push((x0, y, x1, y));
                open = true;
            }
            _ => open = false,
        }
    }
    boxes
}

fn count(shot: &Shot, b: (usize, usize, usize, usize), color: [u8; 3]) -> usize {
    (b.1..=b.3)
        .flat_map(|y| (b.0..=b.2).map(move |x| (x, y)))
        .filter(|&(x, y)| near(shot.at(x, y), color))
        .count()
}

/// Both charts are on the screenshot with their bars: the per-day chart's missed and
/// duplicated bars, the latency chart's histogram.
fn charts_shown(chromium: &Path, report: &Path, shot: &Shot) -> Result<(), String> {
    let marked = variant(report, "marked.html", |t| {
        t.replacen("</style>", "svg{background:#ff00ff}</style>", 1)
    });
    let boxes = chart_boxes(&render(chromium, &marked).shot);
    let [per_day, latency] = boxes[..] else {
        return Err(format!("expected the boxes of 2 charts, found {boxes:?}"));
    };
    let found = [
        ("missed runs per day", per_day, MISSED),
        ("duplicated runs per day", per_day, DUPLICATED),
        ("latency distribution", latency, LATENCY),
    ];
    let mut problems = Vec::new();
    for (what, b, color) in found {
        let n = count(shot, b, color);
        eprintln!("{what}: {n} pixels of its bars' colour in the box {b:?}");
        if n < MIN_BAR_PIXELS {
            problems.push(format!(
                "{what}: {n} pixels of its bars' colour in the chart's box {b:?} (at least {MIN_BAR_PIXELS})"
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[test]
fn the_audit_report_renders_without_console_errors_and_shows_its_charts() {
    let Some(chromium) = browser() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let report = demo_report(dir.path());
    let shown = render(&chromium, &report);
    assert!(
        shown.console.is_empty(),
        "the report logged to the console:\n{}",
        shown.console.join("\n")
    );
    if let Err(e) = charts_shown(&chromium, &report, &shown.shot) {
        panic!("the screenshot does not show the charts: {e}");
    }
}

/// The console check catches a page error: the same report with a script that throws.
#[test]
fn a_page_error_is_caught() {
    let Some(chromium) = browser() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let report = demo_report(dir.path());
    let broken = variant(&report, "broken.html", |t| {
        t.replace(
            "</body>",
            "<script>window.batchguardChart.draw()</script></body>",
        )
    });
    let console = render(&chromium, &broken).console;
    assert!(
        console.iter().any(|l| l.contains("Uncaught TypeError")),
        "the page error was not seen: {console:?}"
    );
}

/// The chart check catches charts without their bars: the same report with the bars
/// unpainted.
#[test]
fn charts_without_bars_are_caught() {
    let Some(chromium) = browser() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let report = demo_report(dir.path());
    let blank = variant(&report, "blank.html", |t| {
        t.replace("fill=\"#cf222e\"", "fill=\"none\"")
            .replace("fill=\"#0969da\"", "fill=\"none\"")
    });
    let shot = render(&chromium, &blank).shot;
    let err = charts_shown(&chromium, &blank, &shot).expect_err("blank bars are caught");
    assert!(
        err.contains("missed runs per day") && err.contains("latency distribution"),
        "{err}"
    );
    assert!(!err.contains("duplicated runs per day"), "{err}");
}
