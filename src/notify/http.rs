//! The outbox of `run`'s check-ins and spans: one worker thread per destination sends its
//! requests in order (a `start` before its `success`), each bounded by the timeout, while
//! the job runs undisturbed. At exit [`Outbox::finish`] waits for what is still on its
//! way, at most the timeout, and accounts for every request: sent, refused, or not sent.

use std::collections::HashMap;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// One HTTP request to a monitor or a collector.
pub struct Request {
    /// What it says, for the message when it cannot be sent ("healthchecks start").
    pub what: String,
    pub post: bool,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// What became of one request.
struct Delivery {
    what: String,
    /// `scheme://host/…`: where it went, without the key a check-in URL carries.
    shown: String,
    error: Option<String>,
}

/// Every request `run` made, and the ones that did not go through.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Summary {
    pub sent: usize,
    /// One line per request that was refused, failed, or was still pending at exit.
    pub failed: Vec<String>,
}

struct Lane {
    tx: mpsc::Sender<Request>,
    worker: thread::JoinHandle<()>,
}

/// Requests by destination, each destination served by its own thread.
pub struct Outbox {
    timeout: Duration,
    lanes: HashMap<&'static str, Lane>,
    done_tx: mpsc::Sender<Delivery>,
    done_rx: mpsc::Receiver<Delivery>,
    queued: usize,
}

impl Outbox {
    pub fn new(timeout: Duration) -> Outbox {
        let (done_tx, done_rx) = mpsc::channel();
        Outbox {
            timeout,
            lanes: HashMap::new(),
            done_tx,
            done_rx,
            queued: 0,
        }
    }

    /// Queues `req` on the lane `lane` (started on first use); never waits.
    pub fn send(&mut self, lane: &'static str, req: Request) {
        self.queued += 1;
        if !self.lanes.contains_key(lane) {
            let (tx, rx) = mpsc::channel::<Request>();
            let done = self.done_tx.clone();
            let timeout = self.timeout;
            let spawned = thread::Builder::new()
                .name(format!("notify-{lane}"))
                .spawn(move || {
                    let mut agent = None;
                    for r in rx {
                        let shown = crate::manifest::model::mask_url(&r.url);
                        let error = deliver(&mut agent, timeout, &r)
                            .err()
                            .map(|e| e.replace(&r.url, &shown));
                        let _ = done.send(Delivery {
                            what: r.what,
                            shown,
                            error,
                        });
                    }
                });
            match spawned {
                Ok(worker) => {
                    self.lanes.insert(lane, Lane { tx, worker });
                }
                Err(e) => {
                    let _ = self.done_tx.send(Delivery {
                        what: req.what,
                        shown: crate::manifest::model::mask_url(&req.url),
                        error: Some(format!("no thread to send it: {e}")),
                    });
                    return;
                }
            }
        }
        if let Some(l) = self.lanes.get(lane)
            && let Err(mpsc::SendError(r)) = l.tx.send(req)
        {
            let _ = self.done_tx.send(Delivery {
                what: r.what,
                shown: crate::manifest::model::mask_url(&r.url),
                error: Some("its sender stopped".into()),
            });
        }
    }

    /// Waits for the requests still on their way, at most `wait`, and says what became of
    /// each one. Workers still busy then are left to die with the process.
    pub fn finish(self, wait: Duration) -> Summary {
        let Outbox {
            lanes,
            done_tx,
            done_rx,
            queued,
            ..
        } = self;
        drop(done_tx);
        let mut workers = Vec::new();
        for (_, lane) in lanes {
            drop(lane.tx);
            workers.push(lane.worker);
        }
        let deadline = Instant::now() + wait;
        let mut summary = Summary::default();
        let mut seen = 0;
        while seen < queued {
            let left = deadline.saturating_duration_since(Instant::now());
            match done_rx.recv_timeout(left) {
                Ok(d) => {
                    seen += 1;
                    match d.error {
                        None => summary.sent += 1,
                        Some(e) => summary
                            .failed
                            .push(format!("{} to {}: {e}", d.what, d.shown)),
                    }
                }
                Err(_) => break,
            }
        }
        if seen < queued {
            summary.failed.push(format!(
                "{} request(s) still on their way after {} ms were not sent",
                queued - seen,
                wait.as_millis()
            ));
        } else {
            for w in workers {
                let _ = w.join();
            }
        }
        summary
    }
}

/// Sends one request on the lane's agent (made on first use; TLS roots loaded only for
/// https). A status other than 2xx is a failure: the monitor did not take it.
fn deliver(agent: &mut Option<ureq::Agent>, timeout: Duration, r: &Request) -> Result<(), String> {
    if agent.is_none() {
        *agent = Some(make_agent(timeout, r.url.starts_with("https://"))?);
    }
    let Some(agent) = agent.as_ref() else {
        return Err("no HTTP client".into());
    };
    let result = if r.post {
        let mut b = agent.post(&r.url);
        for (k, v) in &r.headers {
            b = b.header(k.as_str(), v.as_str());
        }
        b.send(&r.body[..])
    } else {
        let mut b = agent.get(&r.url);
        for (k, v) in &r.headers {
            b = b.header(k.as_str(), v.as_str());
        }
        b.call()
    };
    match result {
        Ok(resp) if resp.status().is_success() => Ok(()),
        Ok(resp) => Err(format!("refused with HTTP {}", resp.status())),
        Err(ureq::Error::Timeout(_)) => Err(format!("no answer within {} ms", timeout.as_millis())),
        Err(e) => Err(e.to_string()),
    }
}

/// An agent bounded by `timeout` for the whole request, on rustls with ring and the
/// platform's roots (which honour `SSL_CERT_FILE`), as the stores' TLS is.
fn make_agent(timeout: Duration, tls: bool) -> Result<ureq::Agent, String> {
    use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};
    let mut config = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .user_agent(concat!("batchguard/", env!("CARGO_PKG_VERSION")));
    if tls {
        let found = rustls_native_certs::load_native_certs();
        if found.certs.is_empty() {
            let why = found
                .errors
                .first()
                .map_or_else(|| "none found".to_owned(), ToString::to_string);
            return Err(format!(
                "no TLS root certificates ({why}); set SSL_CERT_FILE to a CA bundle"
            ));
        }
        let certs: Vec<Certificate<'static>> = found
            .certs
            .iter()
            .map(|c| Certificate::from_der(c.as_ref()).to_owned())
            .collect();
        config = config.tls_config(
            TlsConfig::builder()
                .provider(TlsProvider::Rustls)
                .root_certs(RootCerts::new_with_certs(&certs))
                .unversioned_rustls_crypto_provider(std::sync::Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))
                .build(),
        );
    }
    Ok(config.build().new_agent())
}
