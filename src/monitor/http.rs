//! The page's HTTP: one request per connection, every wait bounded.
//!
//! The server answers a handful of `GET`s from a browser or a script, so it keeps to the
//! least of HTTP/1.1 that they need: it reads one request head, answers it with
//! `Connection: close`, and closes. Nothing a client does may hold the server:
//!
//! 1. **Bounded connections.** At most [`MAX_CONNECTIONS`] are served at once, each on a
//!    thread of its own; one more is answered `503` at once (a write that cannot wait)
//!    and closed.
//! 2. **Bounded reads.** The request head must come whole within [`READ_DEADLINE`] and
//!    [`MAX_HEAD`] bytes (else `408` or `431`, then the close).
//! 3. **Bounded writes.** The answer must be taken by the client within
//!    [`WRITE_DEADLINE`]; a client that does not read (its own pipelined requests pile
//!    up unanswered) is dropped then.
//! 4. **Prompt stop.** Every read and write waits at most [`SLICE`] at a time and then
//!    looks at the stop flag: once the monitor stops, a connection ends within about
//!    that long, whatever its client does.
//!
//! Races: a client may send more than one request (pipelining); only the first is
//! answered. Its unread bytes are read and thrown away for a short while after the
//! answer ([`LINGER`]), so that closing with data unread does not reset the connection
//! before the client has read the answer.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Connections served at once.
pub(super) const MAX_CONNECTIONS: usize = 16;
/// How long a client has to send its request head.
pub(super) const READ_DEADLINE: Duration = Duration::from_secs(2);
/// How long a client has to take its answer.
pub(super) const WRITE_DEADLINE: Duration = Duration::from_secs(5);
/// The longest request head read.
pub(super) const MAX_HEAD: usize = 8 * 1024;
/// The longest single wait on a socket before the stop flag is looked at again.
pub(super) const SLICE: Duration = Duration::from_millis(50);
/// How long unread request bytes are thrown away after the answer.
const LINGER: Duration = Duration::from_millis(200);

/// A request the server answers: its method and its path (without the query).
pub(super) struct Head {
    pub(super) method: String,
    pub(super) path: String,
}

/// An answer: status, content type and body (`HEAD` gets the head alone).
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) content_type: &'static str,
    pub(super) body: String,
}

impl Answer {
    pub(super) fn text(status: u16, body: &str) -> Answer {
        Answer {
            status,
            content_type: "text/plain",
            body: body.to_owned(),
        }
    }
}

/// Serves one connection: reads its request, answers it with `make`, closes.
pub(super) fn serve(mut stream: TcpStream, stop: &AtomicBool, make: impl FnOnce(&Head) -> Answer) {
    // A socket that refuses its options is served without them, still bounded by the
    // deadlines checked between the waits (a failed timeout means a blocking wait,
    // which no socket on this platform refuses in practice).
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(SLICE));
    let _ = stream.set_write_timeout(Some(SLICE));
    let _ = stream.set_nodelay(true);
    let answer = match read_head(&mut stream, stop) {
        Ok(head) => {
            let answer = make(&head);
            (answer, head.method == "HEAD")
        }
        Err(Some(status)) => (Answer::text(status, "bad request\n"), false),
        Err(None) => return,
    };
    let (answer, head_only) = answer;
    if write_answer(&mut stream, stop, &answer, head_only) {
        linger(&mut stream, stop);
    }
}

/// Answers `503` to a connection over the bound, without waiting, and closes it.
pub(super) fn refuse(stream: TcpStream) {
    let mut stream = stream;
    if stream.set_nonblocking(true).is_ok() {
        let out = response_bytes(&Answer::text(503, "busy\n"), false);
        let _ = stream.write(&out);
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// Reads the request head. `Err(Some(status))`: answer that and close;
/// `Err(None)`: close unanswered (the client went, or the monitor stops).
fn read_head(stream: &mut TcpStream, stop: &AtomicBool) -> Result<Head, Option<u16>> {
    let deadline = Instant::now() + READ_DEADLINE;
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    let end = loop {
        if let Some(at) = find_end(&buf) {
            break at;
        }
        if buf.len() > MAX_HEAD {
            return Err(Some(431));
        }
        if stop.load(Ordering::Acquire) {
            return Err(None);
        }
        if Instant::now() >= deadline {
            return Err(Some(408));
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err(None),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if waits(&e) => {}
            Err(_) => return Err(None),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]);
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(method), Some(target), Some(version), None)
            if !method.is_empty() && version.starts_with("HTTP/1.") =>
        {
            Ok(Head {
                method: method.to_owned(),
                path: target.split('?').next().unwrap_or("").to_owned(),
            })
        }
        _ => Err(Some(400)),
    }
}

/// Where the head ends (the blank line), if it has come.
fn find_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

/// A timeout of one slice (the OS says either).
fn waits(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    }
}

fn response_bytes(answer: &Answer, head_only: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        answer.status,
        reason(answer.status),
        answer.content_type,
        answer.body.len(),
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(answer.body.as_bytes());
    }
    out
}

/// Writes the answer within [`WRITE_DEADLINE`]; `true` if all of it was taken.
fn write_answer(
    stream: &mut TcpStream,
    stop: &AtomicBool,
    answer: &Answer,
    head_only: bool,
) -> bool {
    let out = response_bytes(answer, head_only);
    let deadline = Instant::now() + WRITE_DEADLINE;
    let mut at = 0;
    while at < out.len() {
        if stop.load(Ordering::Acquire) || Instant::now() >= deadline {
            return false;
        }
        match stream.write(&out[at..]) {
            Ok(0) => return false,
            Ok(n) => at += n,
            Err(e) if waits(&e) => {}
            Err(_) => return false,
        }
    }
    let _ = stream.flush();
    true
}

/// Ends the sending side, then throws away what the client still sends for a short
/// while (see the races in the module docs).
fn linger(stream: &mut TcpStream, stop: &AtomicBool) {
    if stream.shutdown(Shutdown::Write).is_err() {
        return;
    }
    let deadline = Instant::now() + LINGER;
    let mut sink = [0u8; 4096];
    while Instant::now() < deadline && !stop.load(Ordering::Acquire) {
        match stream.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if waits(&e) => {}
            Err(_) => return,
        }
    }
}
