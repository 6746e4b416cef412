//! A local HTTP/1.1 server that records every request it receives (method, path, query,
//! headers, body) before it answers: the stand-in for Healthchecks, Cronitor, Sentry and
//! an OTLP collector in `run`'s check-in and tracing tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

#[derive(Clone, Debug)]
pub struct Req {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Req {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn q(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// How the server answers.
#[derive(Clone)]
pub enum Answer {
    Status(u16),
    /// Answers 200 only once this file exists (the test's gate), checked as it goes.
    After(PathBuf),
}

pub struct Recorder {
    pub base: String,
    reqs: Arc<Mutex<Vec<Req>>>,
}

impl Recorder {
    pub fn start(answer: Answer) -> Recorder {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", l.local_addr().expect("addr"));
        let reqs = Arc::new(Mutex::new(Vec::new()));
        let r = reqs.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let r = r.clone();
                let answer = answer.clone();
                std::thread::spawn(move || serve(s, &r, &answer));
            }
        });
        Recorder { base, reqs }
    }

    pub fn requests(&self) -> Vec<Req> {
        self.reqs.lock().expect("lock").clone()
    }
}

fn decode(s: &str) -> String {
    let b = s.replace('+', " ");
    let b = b.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or(""), 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn serve(s: TcpStream, reqs: &Mutex<Vec<Req>>, answer: &Answer) {
    let mut w = s.try_clone().expect("clone");
    let mut rd = BufReader::new(s);
    loop {
        let mut line = String::new();
        if rd.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_owned();
        let target = parts.next().unwrap_or("").to_owned();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if rd.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_owned(), v.trim().to_owned()));
            }
        }
        let get = |n: &str| {
            headers
                .iter()
                .find(|(k, _): &&(String, String)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if let Some(n) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
            body.resize(n, 0);
            if rd.read_exact(&mut body).is_err() {
                return;
            }
        } else if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            loop {
                let mut size = String::new();
                if rd.read_line(&mut size).unwrap_or(0) == 0 {
                    return;
                }
                let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0; n + 2];
                if rd.read_exact(&mut chunk).is_err() {
                    return;
                }
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        }
        let (path, q) = target.split_once('?').unwrap_or((&target, ""));
        let query = q
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (decode(k), decode(v))
            })
            .collect();
        reqs.lock().expect("lock").push(Req {
            method,
            path: path.to_owned(),
            query,
            headers,
            body,
        });
        let status = match answer {
            Answer::Status(s) => *s,
            Answer::After(gate) => {
                let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
                while !gate.exists() && std::time::Instant::now() < until {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                200
            }
        };
        let resp = format!("HTTP/1.1 {status} X\r\nContent-Length: 2\r\n\r\nOK");
        if w.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}
