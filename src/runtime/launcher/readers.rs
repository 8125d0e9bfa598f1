//! The threads that read the child's three pipes (events on fd 3, stdout, stderr) and send what
//! they read to the launcher's loop as [`Msg`]s; the script's output is also copied to ours as
//! it comes, unless an observer shows it instead.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;

use serde_json::{Value, json};

use crate::profile::event::Event;

pub enum Msg {
    /// A schema event from the agent (parsed once, in the reader thread).
    Typed(Box<Event>),
    /// Anything else from the agent: its hello, exit status, exception, or a malformed line.
    Event(Value),
    Output {
        stream: &'static str,
        line: String,
    },
    EventsClosed,
    OutputClosed,
}

/// One thread per pipe; each sends `EventsClosed`/`OutputClosed` when its pipe closes.
pub fn spawn_readers(
    events: OwnedFd,
    stdout: Option<impl Read + Send + 'static>,
    stderr: Option<impl Read + Send + 'static>,
    tx: Sender<Msg>,
    passthrough: bool,
) -> Vec<JoinHandle<()>> {
    let mut handles = vec![];
    let ev_tx = tx.clone();
    handles.push(std::thread::spawn(move || read_events(events, ev_tx)));
    if let Some(out) = stdout {
        handles.push(forward(out, "stdout", tx.clone(), passthrough));
    }
    if let Some(err) = stderr {
        handles.push(forward(err, "stderr", tx, passthrough));
    }
    handles
}

fn read_events(events: OwnedFd, tx: Sender<Msg>) {
    let reader = BufReader::new(File::from(events));
    for line in reader.split(b'\n') {
        let Ok(line) = line else { break };
        let msg = match serde_json::from_slice::<Event>(&line) {
            Ok(e) => Msg::Typed(Box::new(e)),
            Err(_) => {
                let text = String::from_utf8_lossy(&line);
                Msg::Event(serde_json::from_str::<Value>(&text).unwrap_or_else(|_| {
                    json!({"type": "log", "t": 0.0, "stream": "tpuport", "line": format!("malformed agent event: {text}")})
                }))
            }
        };
        if tx.send(msg).is_err() {
            break;
        }
    }
    let _ = tx.send(Msg::EventsClosed);
}

/// Copy the script's output to ours as it comes (unless `passthrough` is off), and send each
/// line as a log event.
fn forward(
    mut src: impl Read + Send + 'static,
    stream: &'static str,
    tx: Sender<Msg>,
    passthrough: bool,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        let mut line: Vec<u8> = vec![];
        loop {
            let n = match src.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let chunk = &buf[..n];
            let _ = if !passthrough {
                Ok(())
            } else if stream == "stdout" {
                let mut o = std::io::stdout().lock();
                o.write_all(chunk).and_then(|_| o.flush())
            } else {
                let mut o = std::io::stderr().lock();
                o.write_all(chunk).and_then(|_| o.flush())
            };
            for &b in chunk {
                if b == b'\n' {
                    let text = String::from_utf8_lossy(&line)
                        .trim_end_matches('\r')
                        .to_string();
                    let _ = tx.send(Msg::Output { stream, line: text });
                    line.clear();
                } else if line.len() < 64 * 1024 {
                    line.push(b);
                }
            }
        }
        if !line.is_empty() {
            let _ = tx.send(Msg::Output {
                stream,
                line: String::from_utf8_lossy(&line).to_string(),
            });
        }
        let _ = tx.send(Msg::OutputClosed);
    })
}
