//! `batchguard metrics`: the ledger's figures for Prometheus, served at `/metrics` (each
//! scrape reads what was written since the last one) or written once to a `*.prom` file
//! for node_exporter's textfile collector.

use super::watch::{live_error, open};
use super::{Error, Outcome};
use crate::cli::MetricsArgs;
use crate::live::Live;
use crate::report::openmetrics::{self, Format};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

pub(super) fn run(args: MetricsArgs) -> Result<Outcome, Error> {
    if let Some(path) = &args.textfile
        && path.extension().is_none_or(|e| e != "prom")
    {
        return Err(Error::Live(format!(
            "--textfile {}: node_exporter's textfile collector reads only `*.prom` files",
            path.display()
        )));
    }
    let mut live = open(args.source, args.since)?;
    if let Some(path) = args.textfile {
        let snap = live.refresh().map_err(live_error)?;
        let text = openmetrics::render(&snap, Format::Text);
        // Written beside the file and renamed over it: the collector never reads half.
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let write = |e: std::io::Error| Error::Write {
            path: path.display().to_string(),
            why: e.to_string(),
        };
        std::fs::write(&tmp, text).map_err(write)?;
        std::fs::rename(&tmp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            write(e)
        })?;
        return Ok(Outcome::Clean);
    }
    let addr = args.listen.unwrap_or_default();
    let addr = if addr.starts_with(':') {
        format!("0.0.0.0{addr}")
    } else {
        addr
    };
    let listener = TcpListener::bind(&addr)
        .map_err(|e| Error::Live(format!("--listen {addr}: cannot listen: {e}")))?;
    // The first scrape should not pay for reading the whole ledger.
    live.refresh().map_err(live_error)?;
    let bound = listener
        .local_addr()
        .map_or(addr.clone(), |a| a.to_string());
    eprintln!("batchguard metrics: serving http://{bound}/metrics");
    for stream in listener.incoming() {
        match stream {
            Ok(s) => {
                if let Err(e) = serve(s, &mut live) {
                    eprintln!("batchguard metrics: {e}");
                }
            }
            Err(e) => eprintln!("batchguard metrics: accept: {e}"),
        }
    }
    Ok(Outcome::Clean)
}

/// Largest request head read.
const MAX_HEAD: usize = 16 * 1024;

/// One HTTP/1.1 exchange, then the connection is closed.
fn serve(mut s: TcpStream, live: &mut Live) -> std::io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_HEAD {
            return respond(
                &mut s,
                "431 Request Header Fields Too Large",
                "text/plain",
                b"request head too large\n",
                false,
            );
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.split("\r\n");
    let request = lines.next().unwrap_or("");
    let mut parts = request.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let accept = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("accept"))
        .map(|(_, v)| v.to_owned())
        .unwrap_or_default();
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return respond(
            &mut s,
            "405 Method Not Allowed",
            "text/plain",
            b"only GET and HEAD\n",
            false,
        );
    }
    match path {
        "/metrics" => {
            let format = if accept.contains("application/openmetrics-text") {
                Format::OpenMetrics
            } else {
                Format::Text
            };
            match live.refresh() {
                Ok(snap) => {
                    let body = openmetrics::render(&snap, format);
                    respond(
                        &mut s,
                        "200 OK",
                        format.content_type(),
                        body.as_bytes(),
                        head_only,
                    )
                }
                Err(e) => {
                    let body = format!("cannot read the ledger: {e}\n");
                    respond(
                        &mut s,
                        "503 Service Unavailable",
                        "text/plain",
                        body.as_bytes(),
                        head_only,
                    )
                }
            }
        }
        "/" => respond(
            &mut s,
            "200 OK",
            "text/plain; charset=utf-8",
            b"batchguard metrics: scrape /metrics\n",
            head_only,
        ),
        _ => respond(
            &mut s,
            "404 Not Found",
            "text/plain",
            b"not found; scrape /metrics\n",
            head_only,
        ),
    }
}

fn respond(
    s: &mut TcpStream,
    status: &str,
    ctype: &str,
    body: &[u8],
    head_only: bool,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    if !head_only {
        s.write_all(body)?;
    }
    s.flush()
}
