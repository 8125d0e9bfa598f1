//! How a run ended: [`classify`] maps how the child ended (exit code or signal, and what the
//! launcher and the agent saw) to `tpuport run`'s exit code and the `run_end` status; plus the
//! `run_end` event itself and the one-line description printed at the end.

use serde_json::{Map, Value};

use crate::profile::event::{Event, ExceptionInfo, RunEnd, RunStart};
use crate::runtime::worker::EXIT_AGENT_FAILURE;

/// Exit codes of `tpuport run` beyond the script's own.
pub const EXIT_TIMEOUT: i32 = 124;
pub const EXIT_INTERRUPTED: i32 = 130;
/// tpuport could not start the script (bad options, no Python): 2, as for other commands.
pub const EXIT_USAGE: i32 = 2;

/// What is known when the child has been reaped.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ending<'a> {
    /// The child's exit code (`None` when a signal ended it).
    pub code: Option<i32>,
    /// The signal that ended the child.
    pub signal: Option<i32>,
    /// `--timeout` was reached.
    pub timed_out: bool,
    /// An interrupt (Ctrl-C, SIGTERM, or the dashboard's) was forwarded to the child.
    pub interrupted: bool,
    /// The agent reported an exception from the script.
    pub exception: bool,
    /// The agent's own `exit_status` (e.g. "interrupted"); `None` if it never said.
    pub agent_status: Option<&'a str>,
}

/// `tpuport run`'s exit code, the `run_end` status, and the signal that ended the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub code: i32,
    pub status: &'static str,
    pub signal: Option<i32>,
}

impl Outcome {
    /// tpuport could not run the script, or failed while it ran.
    pub fn runtime_error() -> Outcome {
        Outcome {
            code: EXIT_USAGE,
            status: "runtime_error",
            signal: None,
        }
    }
}

pub fn classify(e: &Ending) -> Outcome {
    let (code, status, signal) = match (e.code, e.signal) {
        (_, Some(sig)) if e.timed_out => (EXIT_TIMEOUT, "timeout", Some(sig)),
        (_, Some(sig)) if e.interrupted => (128 + sig, "interrupted", Some(sig)),
        (_, Some(sig)) => (128 + sig, "signal", Some(sig)),
        (Some(c), _) if e.timed_out => (if c == 0 { 0 } else { EXIT_TIMEOUT }, "timeout", None),
        (Some(0), _) => (0, "ok", None),
        (Some(c), _) if e.exception => (c, "exception", None),
        (Some(c), _) if c == EXIT_INTERRUPTED || e.agent_status == Some("interrupted") => {
            (c, "interrupted", None)
        }
        (Some(c), _) if c == EXIT_AGENT_FAILURE && e.agent_status.is_none() => {
            (c, "runtime_error", None)
        }
        (Some(c), _) => (c, "exit", None),
        (None, None) => (1, "exit", None),
    };
    Outcome {
        code,
        status,
        signal,
    }
}

/// The `run_end` event (`error`: why tpuport itself could not go on).
pub fn end_event(
    t: f64,
    o: Outcome,
    exception: Option<ExceptionInfo>,
    steps: u64,
    error: Option<String>,
) -> Event {
    let mut extra = Map::new();
    if let Some(e) = error {
        extra.insert("error".into(), Value::String(e));
    }
    if let Some(sig) = o.signal {
        extra.insert("signal_name".into(), Value::String(signal_name(sig).into()));
    }
    Event::RunEnd(RunEnd {
        t,
        exit_code: o.code,
        status: o.status.to_string(),
        signal: o.signal,
        exception,
        steps,
        duration: t,
        extra,
    })
}

/// `tpuport run: train.py finished (exit 0) on the sim target, v5e, mode strict`.
pub fn describe_end(rs: &RunStart, o: Outcome) -> String {
    let code = o.code;
    let what = match (o.status, o.signal) {
        ("ok", _) => "finished".to_string(),
        ("exception", _) => "raised an exception".to_string(),
        ("interrupted", _) => "was interrupted".to_string(),
        ("timeout", _) => "timed out".to_string(),
        (_, Some(libc::SIGKILL)) => {
            "was killed (SIGKILL: out of memory, or killed by hand)".to_string()
        }
        (_, Some(sig)) => format!("crashed ({})", signal_name(sig)),
        ("runtime_error", _) => "could not be run by tpuport".to_string(),
        _ => format!("exited with {code}"),
    };
    let chip = rs
        .chip
        .as_deref()
        .map(|c| format!(", {c}"))
        .unwrap_or_default();
    format!(
        "tpuport run: {} {what} (exit {code}) on the {} target{chip}, mode {}",
        rs.script, rs.target, rs.mode
    )
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGINT: i32 = libc::SIGINT;
    const SIGKILL: i32 = libc::SIGKILL;
    const SIGSEGV: i32 = libc::SIGSEGV;

    fn exited(code: i32) -> Ending<'static> {
        Ending {
            code: Some(code),
            ..Ending::default()
        }
    }

    fn killed(sig: i32) -> Ending<'static> {
        Ending {
            signal: Some(sig),
            ..Ending::default()
        }
    }

    #[test]
    fn classification_table() {
        let timed_out = |e: Ending<'static>| Ending {
            timed_out: true,
            ..e
        };
        let interrupted = |e: Ending<'static>| Ending {
            interrupted: true,
            ..e
        };
        let raised = |e: Ending<'static>| Ending {
            exception: true,
            ..e
        };
        let agent = |e: Ending<'static>, s: &'static str| Ending {
            agent_status: Some(s),
            ..e
        };
        #[rustfmt::skip]
        let table: Vec<(Ending, i32, &str, Option<i32>)> = vec![
            (exited(0), 0, "ok", None),
            (exited(3), 3, "exit", None),
            (raised(exited(1)), 1, "exception", None),
            // A script that caught its exception and exited 0 is fine.
            (raised(exited(0)), 0, "ok", None),
            (exited(EXIT_INTERRUPTED), EXIT_INTERRUPTED, "interrupted", None),
            (agent(exited(1), "interrupted"), 1, "interrupted", None),
            // The exception wins over the agent's word.
            (agent(raised(exited(1)), "interrupted"), 1, "exception", None),
            (exited(EXIT_AGENT_FAILURE), EXIT_AGENT_FAILURE, "runtime_error", None),
            // The agent reported how it ended: the script exited 70 itself.
            (agent(exited(EXIT_AGENT_FAILURE), "exit"), EXIT_AGENT_FAILURE, "exit", None),
            (killed(SIGSEGV), 128 + SIGSEGV, "signal", Some(SIGSEGV)),
            (killed(SIGKILL), 128 + SIGKILL, "signal", Some(SIGKILL)),
            (interrupted(killed(SIGINT)), 128 + SIGINT, "interrupted", Some(SIGINT)),
            (interrupted(killed(SIGKILL)), 128 + SIGKILL, "interrupted", Some(SIGKILL)),
            (timed_out(killed(SIGKILL)), EXIT_TIMEOUT, "timeout", Some(SIGKILL)),
            // Timeout wins over the interrupt it caused.
            (interrupted(timed_out(killed(SIGINT))), EXIT_TIMEOUT, "timeout", Some(SIGINT)),
            (timed_out(exited(1)), EXIT_TIMEOUT, "timeout", None),
            (timed_out(exited(EXIT_INTERRUPTED)), EXIT_TIMEOUT, "timeout", None),
            // Finished just as the timeout came.
            (timed_out(exited(0)), 0, "timeout", None),
            (Ending::default(), 1, "exit", None),
        ];
        for (ending, code, status, signal) in table {
            let want = Outcome {
                code,
                status,
                signal,
            };
            assert_eq!(classify(&ending), want, "{ending:?}");
        }
    }

    #[test]
    fn descriptions() {
        let rs = RunStart {
            script: "train.py".into(),
            target: "sim".into(),
            chip: Some("v5e".into()),
            mode: "strict".into(),
            ..RunStart::default()
        };
        let d = |e: Ending| describe_end(&rs, classify(&e));
        assert_eq!(
            d(exited(0)),
            "tpuport run: train.py finished (exit 0) on the sim target, v5e, mode strict"
        );
        assert!(d(exited(4)).contains("exited with 4 (exit 4)"));
        assert!(d(killed(SIGSEGV)).contains("crashed (SIGSEGV) (exit 139)"));
        assert!(d(killed(SIGKILL)).contains("was killed (SIGKILL"));
        assert!(d(exited(EXIT_AGENT_FAILURE)).contains("could not be run by tpuport"));
    }
}
