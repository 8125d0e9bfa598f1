//! The Rust↔Python contract: the configuration the agent receives, as JSON in the environment
//! variable [`ENV_VAR`].
//!
//! Every field is typed here and serialised with serde; the agent (`agent/tpuport_agent`) reads
//! these keys and nothing else from Rust. The chip is sent as the whole record of the chip
//! table ([`Chip`]), so the Python side keeps no table of its own.

use std::path::PathBuf;

use serde::{Serialize, Serializer};

use super::chips::Chip;
use super::target::{Mode, Precision, Target};

/// The environment variable that carries the configuration to the agent.
pub const ENV_VAR: &str = "TPUPORT_AGENT_CONFIG";

/// What the agent is told: the script, the target and its settings, and the sim's options.
#[derive(Debug, Clone, Serialize)]
pub struct AgentConfig {
    /// The script (absolute), or the module's name with `module`.
    pub script: PathBuf,
    /// Run this module as `python -m` does.
    pub module: Option<String>,
    pub args: Vec<String>,
    pub target: Target,
    pub mode: Mode,
    /// The float32 matmul precision the sim emulates (TorchTPU's default when none was asked).
    pub precision: Precision,
    pub excess_precision: bool,
    pub debug_checks: bool,
    /// Sim: run the ops a TPU lacks on the host and list them, instead of failing.
    pub cpu_fallback: bool,
    /// The chip (simulated, or found on the TPU target); none on the host target without --chip.
    pub chip: Option<&'static Chip>,
    /// HBM per device in effect on the sim: `--hbm`, else the chip's.
    pub hbm_bytes: Option<u64>,
    pub strict_hbm: bool,
    pub hbm_track: HbmTrack,
    /// `tpuport numerics`: what this run of the two does.
    pub numerics: Option<NumericsSpec>,
    /// Stop the script once this many steps have ended (the agent ends it as a clean exit).
    pub max_steps: Option<u32>,
    /// Host target: the script's CUDA devices run on the CPU where torch sees no CUDA.
    pub cuda_on_cpu: bool,
    /// `tpuport check`: what this run of the two does.
    pub check: Option<CheckSpec>,
    /// Time each step's phases (agent `phases.py`; `--no-breakdown` turns it off).
    pub breakdown: bool,
    /// Python statements run after `import torch`, before the script (see `target::Plan`).
    pub calls: Vec<String>,
    /// Folders put at the front of `sys.path` before the script runs (xla-cpu: TorchTPU's).
    pub python_path: Vec<PathBuf>,
    /// The run's start (Unix seconds): event times are relative to it.
    pub t0: f64,
}

impl AgentConfig {
    /// The JSON text for [`ENV_VAR`].
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }
}

/// How the sim tracks HBM on a CPU host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HbmTrack {
    /// The first steps and one in 25.
    #[default]
    Sampled,
    /// Every op: exact, slower.
    Full,
    Off,
}

/// One of the two runs of `tpuport check`: same seeds, the loss of each step, and the outputs
/// of every module on the first step, saved (the original) or compared (the port).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CheckSpec {
    pub layers: LayersSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LayersSpec {
    /// Save the first step's module outputs here (the original run)...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub save: Option<PathBuf>,
    /// ...or compare with the ones saved here (the port)...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<PathBuf>,
    /// ...and write the comparison here (JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out: Option<PathBuf>,
}

/// One of the two runs of `tpuport numerics`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NumericsSpec {
    /// Optimizer steps to run, then stop.
    pub steps: u32,
    /// The emulated matmul precision; none = plain float32 (`"off"`).
    #[serde(serialize_with = "precision_or_off")]
    pub precision: Option<Precision>,
    /// Save the parameters here after the last step (the float32 run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub save: Option<PathBuf>,
    /// Compare the parameters with the ones saved here (the emulated run)...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<PathBuf>,
    /// ...and write the comparison here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare_out: Option<PathBuf>,
}

fn precision_or_off<S: Serializer>(p: &Option<Precision>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => p.serialize(s),
        None => s.serialize_str("off"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::runtime::chips::chip_by_name;

    fn config() -> AgentConfig {
        AgentConfig {
            script: PathBuf::from("/work/train.py"),
            module: None,
            args: vec!["--epochs".into(), "1".into()],
            target: Target::Sim,
            mode: Mode::DeferFuse,
            precision: Precision::High,
            excess_precision: true,
            debug_checks: false,
            cpu_fallback: false,
            chip: chip_by_name("v5e"),
            hbm_bytes: Some(512 << 20),
            strict_hbm: true,
            hbm_track: HbmTrack::Full,
            numerics: None,
            max_steps: Some(5),
            cuda_on_cpu: false,
            check: None,
            breakdown: true,
            calls: vec!["torch.tpu.allow_excess_precision = True".into()],
            python_path: vec!["/cache/xla-cpu/site".into()],
            t0: 1.5,
        }
    }

    /// Exactly the keys and values the agent reads (`tpuport_agent/__init__.py`, `sim.py`,
    /// `sim_memory.py`).
    #[test]
    fn the_config_has_the_keys_the_agent_reads() {
        let v: Value = serde_json::from_str(&config().to_json().unwrap()).unwrap();
        assert_eq!(
            v,
            json!({
                "script": "/work/train.py",
                "module": null,
                "args": ["--epochs", "1"],
                "target": "sim",
                "mode": "defer-fuse",
                "precision": "high",
                "excess_precision": true,
                "debug_checks": false,
                "cpu_fallback": false,
                "chip": {
                    "name": "v5e",
                    "device_name": "TPU v5e",
                    "pci_device": 0x0063,
                    "hbm_per_device": 16u64 << 30,
                    "devices_per_chip": 1,
                    "bf16_flops_per_chip": 197e12,
                    "topologies": {"1": "1,1,1", "4": "2,2,1", "8": "2,4,1"},
                },
                "hbm_bytes": 512 << 20,
                "strict_hbm": true,
                "hbm_track": "full",
                "numerics": null,
                "max_steps": 5,
                "cuda_on_cpu": false,
                "check": null,
                "breakdown": true,
                "calls": ["torch.tpu.allow_excess_precision = True"],
                "python_path": ["/cache/xla-cpu/site"],
                "t0": 1.5,
            })
        );
        let host = AgentConfig {
            target: Target::Host,
            chip: None,
            hbm_bytes: None,
            ..config()
        };
        let v = serde_json::to_value(host).unwrap();
        assert_eq!((&v["target"], &v["chip"]), (&json!("host"), &Value::Null));
    }

    /// The enums serialise to the strings the CLI and events use (`as_str`).
    #[test]
    fn enums_serialise_to_their_names() {
        let s = |v: Value| v.as_str().unwrap().to_string();
        for t in [Target::Tpu, Target::XlaCpu, Target::Sim, Target::Host] {
            assert_eq!(s(serde_json::to_value(t).unwrap()), t.as_str());
        }
        for m in [Mode::Strict, Mode::Debug, Mode::DeferFuse] {
            assert_eq!(s(serde_json::to_value(m).unwrap()), m.as_str());
        }
        for p in [Precision::Default, Precision::High, Precision::Highest] {
            assert_eq!(s(serde_json::to_value(p).unwrap()), p.as_str());
        }
        let tracks = [HbmTrack::Sampled, HbmTrack::Full, HbmTrack::Off].map(|h| {
            let v = serde_json::to_value(h).unwrap();
            s(v)
        });
        assert_eq!(tracks, ["sampled", "full", "off"]);
    }

    #[test]
    fn numerics_sends_only_the_paths_of_its_run() {
        let reference = NumericsSpec {
            steps: 5,
            precision: None,
            save: Some("/tmp/r/reference.pt".into()),
            compare: None,
            compare_out: None,
        };
        assert_eq!(
            serde_json::to_value(&reference).unwrap(),
            json!({"steps": 5, "precision": "off", "save": "/tmp/r/reference.pt"})
        );
        let emulated = NumericsSpec {
            precision: Some(Precision::Default),
            save: None,
            compare: Some("/tmp/r/reference.pt".into()),
            compare_out: Some("/tmp/r/compare.json".into()),
            ..reference
        };
        assert_eq!(
            serde_json::to_value(&emulated).unwrap(),
            json!({"steps": 5, "precision": "default", "compare": "/tmp/r/reference.pt",
                   "compare_out": "/tmp/r/compare.json"})
        );
    }
}
