//! The event stream of a run: a versioned JSON-lines schema, one object per line, each with a
//! `type` and `t` (seconds since the run started).
//!
//! Types: `run_start`, `step`, `compile`, `memory`, `sync`, `log`, `warning`, `run_end`.
//! The parent process writes `run_start` first and `run_end` last, whatever happens to the
//! script; everything in between comes from the agent inside the script's process (or, for
//! `log`, from the script's stdout/stderr). Unknown fields are kept (`extra`), so newer agents
//! and older readers get along; the `schema` number in `run_start` changes only when a field
//! changes meaning.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The schema version written in `run_start.schema`.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    RunStart(RunStart),
    Step(Step),
    Compile(Compile),
    Memory(Memory),
    Sync(Sync),
    Log(Log),
    Warning(Warning),
    RunEnd(RunEnd),
}

impl Event {
    pub fn time(&self) -> f64 {
        match self {
            Event::RunStart(e) => e.t,
            Event::Step(e) => e.t,
            Event::Compile(e) => e.t,
            Event::Memory(e) => e.t,
            Event::Sync(e) => e.t,
            Event::Log(e) => e.t,
            Event::Warning(e) => e.t,
            Event::RunEnd(e) => e.t,
        }
    }

    /// Parse one line of an events file.
    pub fn parse(line: &str) -> Result<Event, serde_json::Error> {
        serde_json::from_str(line)
    }

    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("events serialize")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunStart {
    pub t: f64,
    pub schema: u32,
    /// Wall-clock start, seconds since the Unix epoch.
    pub unix_time: f64,
    pub script: String,
    pub argv: Vec<String>,
    /// `tpu`, `sim` or `host`.
    pub target: String,
    /// Why this target (`--target tpu`, `auto: TPU v5e found on PCI`, ...).
    pub target_reason: String,
    pub chip: Option<String>,
    /// `strict`, `debug` or `defer-fuse`.
    pub mode: String,
    /// `default`, `high` or `highest`.
    pub precision: String,
    /// HBM per device in bytes, when known (chip table).
    pub hbm_bytes: Option<u64>,
    pub pid: u32,
    /// `embedded` (CPython inside tpuport) or `subprocess` (`python -m tpuport_agent`).
    pub runtime: String,
    pub python: Option<String>,
    pub torch: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Step {
    pub t: f64,
    /// 1-based step number.
    pub step: u64,
    /// Seconds since the previous step ended (the first: since the agent started the script).
    pub dt: f64,
    /// `optimizer` (global optimizer post-step hook) or `marker` (`tpuport.step()`).
    pub source: String,
    pub samples: Option<f64>,
    pub tokens: Option<f64>,
    /// Seconds of the step in each measured phase (`data`, `forward`, `backward`, `optimizer`,
    /// `sync`; each exclusive of the others); the rest of `dt` is the script's other code.
    /// Absent with `--no-breakdown` and from older agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<std::collections::BTreeMap<String, f64>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Compile {
    pub t: f64,
    /// Dynamo's id, e.g. `0/3` (frame 0, fourth compile of it).
    pub compile_id: String,
    pub function: String,
    pub file: String,
    pub line: u64,
    /// The guard failure that caused a recompile; None for a first compile.
    pub reason: Option<String>,
    /// Seconds spent compiling the frame.
    pub seconds: f64,
    /// `forward` or `backward` (aot_autograd's lazy backward compile).
    pub kind: String,
    /// The step during which it happened (0 = before the first step).
    pub step: u64,
    /// `ok`, `failed`, or `limit_hit` (recompile limit reached: the frame now runs eagerly).
    pub status: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Memory {
    pub t: f64,
    pub step: u64,
    /// Device memory from `torch.accelerator` (or the sim tracker), where a device exists.
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    pub peak: Option<u64>,
    /// Resident set size of the script's process.
    pub rss: Option<u64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Sync {
    pub t: f64,
    /// The step these host syncs happened in (they are counted until the step ends).
    pub step: u64,
    /// Count per kind: `item`, `cpu`, `tolist`, `numpy`.
    pub counts: std::collections::BTreeMap<String, u64>,
    /// The busiest call sites, `file:line` with a count, most first.
    pub sites: Vec<(String, u64)>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Sync {
    /// Host syncs of every kind; counts come from a file, so the sum saturates instead of
    /// overflowing.
    pub fn total(&self) -> u64 {
        self.counts.values().fold(0, |a, n| a.saturating_add(*n))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Log {
    pub t: f64,
    /// `stdout`, `stderr` (the script's output) or `tpuport` (the runtime's own notes).
    pub stream: String,
    pub line: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Warning {
    pub t: f64,
    pub category: String,
    pub message: String,
    pub file: String,
    pub line: u64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunEnd {
    pub t: f64,
    /// The exit code tpuport returns: the script's, 128+signal, 124 on timeout.
    pub exit_code: i32,
    /// `ok`, `exception`, `exit` (sys.exit with a non-zero code), `signal`, `interrupted`,
    /// `timeout`, or `runtime_error` (tpuport could not start the script).
    pub status: String,
    pub signal: Option<i32>,
    /// The script's final exception, if any.
    pub exception: Option<ExceptionInfo>,
    pub steps: u64,
    pub duration: f64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ExceptionInfo {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    pub traceback: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_unknown_fields() {
        let line = r#"{"type":"step","t":1.5,"step":3,"dt":0.25,"source":"optimizer","samples":64,"tokens":null,"loss":2.5}"#;
        let e = Event::parse(line).unwrap();
        match &e {
            Event::Step(s) => {
                assert_eq!(s.step, 3);
                assert_eq!(s.samples, Some(64.0));
                assert_eq!(s.extra["loss"], 2.5);
            }
            other => panic!("{other:?}"),
        }
        let again = Event::parse(&e.to_line()).unwrap();
        assert_eq!(again, e);
    }

    #[test]
    fn unknown_types_are_errors() {
        assert!(Event::parse(r#"{"type":"nope","t":0}"#).is_err());
        assert!(Event::parse("not json").is_err());
    }
}
