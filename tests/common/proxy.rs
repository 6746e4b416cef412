//! A counting TCP proxy in front of a test server: every client connection is passed on to
//! the server, and what the client sends is read one protocol message at a time (by the
//! store's [`Protocol`]) and logged before it is forwarded, so a reply the client has seen
//! is always counted. The server's replies are copied back untouched.
#![allow(dead_code)]

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// How a store's client messages are read off the wire.
pub trait Protocol: Default + Send + 'static {
    /// What the log keeps of a message.
    type Msg: Send + 'static;

    /// The next message the client sent: its bytes, to forward as they are, and what to log
    /// of it (`None`: nothing, as for a handshake). `None` when the client is gone.
    fn read(&mut self, client: &mut BufReader<TcpStream>) -> Option<(Vec<u8>, Option<Self::Msg>)>;
}

/// The proxy: its port on loopback, and the log of what clients sent.
pub struct Proxy<P: Protocol> {
    pub port: u16,
    log: Arc<Mutex<Vec<P::Msg>>>,
}

impl<P: Protocol> Proxy<P> {
    /// A proxy to `target` (`host:port`), listening until the test ends.
    pub fn start(target: &str) -> Proxy<P> {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let target = target.to_string();
        let l2 = Arc::clone(&log);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                let (c2, s2) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                let log = Arc::clone(&l2);
                std::thread::spawn(move || pump_client::<P>(client, server, &log));
                std::thread::spawn(move || {
                    let (mut s, mut c) = (s2, c2);
                    let _ = std::io::copy(&mut s, &mut c);
                    let _ = c.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Proxy { port, log }
    }

    /// Takes the messages seen so far.
    pub fn take(&self) -> Vec<P::Msg> {
        std::mem::take(&mut *self.log.lock().expect("log"))
    }

    /// `url` (of the server at `target`) through this proxy.
    pub fn through(&self, url: &str, target: &str) -> String {
        url.replacen(target, &format!("127.0.0.1:{}", self.port), 1)
    }
}

fn pump_client<P: Protocol>(client: TcpStream, mut server: TcpStream, log: &Mutex<Vec<P::Msg>>) {
    let mut protocol = P::default();
    let mut r = BufReader::new(client);
    while let Some((bytes, msg)) = protocol.read(&mut r) {
        // Logged before it is sent: once the reply can reach the client, `take` sees it.
        if let Some(m) = msg {
            log.lock().expect("log").push(m);
        }
        if server.write_all(&bytes).is_err() {
            break;
        }
    }
    let _ = server.shutdown(std::net::Shutdown::Both);
}
