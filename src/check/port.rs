//! The port step of `tpuport check`: `tpuport migrate` on the copy (default settings: safe fixes
//! only; the user's configuration file, if any, applies), first as a diff (kept in the report),
//! then written; its findings, as JSON, say what was rewritten and what is left by hand.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// One finding of the migration, as `migrate --output-format json` gives it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    pub rule: String,
    pub path: String,
    pub line: u64,
    pub message: String,
    pub fix_class: String,
    pub fix_applied: bool,
    #[serde(default)]
    pub advice: Option<String>,
    #[serde(default)]
    pub note: Option<String>,
}

impl Finding {
    /// The rule's family: the letters of its id (`CUD001` → `CUD`).
    pub fn family(&self) -> &str {
        let end = self
            .rule
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(self.rule.len());
        &self.rule[..end]
    }
}

/// Families whose findings are performance advice, not porting work: they never block.
pub const ADVICE_FAMILIES: &[&str] = &["PERF", "PROF", "CMP", "DYN"];
/// Families whose findings mean code a TPU cannot run as it is (custom CUDA/Triton kernels,
/// GPU-only libraries, ATen ops TorchTPU lacks): blocked.
pub const BLOCKING_FAMILIES: &[&str] = &["KRN", "LIB", "OPS"];

#[derive(Debug, Clone, Serialize)]
pub struct Port {
    pub findings: Vec<Finding>,
    /// The migration as a patch (`migrate --diff`).
    pub diff: String,
}

impl Port {
    pub fn fixed(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.fix_applied)
    }

    /// What is left for manual work (not advice).
    pub fn manual(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| !f.fix_applied && !ADVICE_FAMILIES.contains(&f.family()))
    }

    pub fn advice(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| !f.fix_applied && ADVICE_FAMILIES.contains(&f.family()))
    }

    pub fn blocking(&self) -> impl Iterator<Item = &Finding> {
        self.manual()
            .filter(|f| BLOCKING_FAMILIES.contains(&f.family()))
    }
}

/// Migrate `folder` in place (a copy), with `config` (the user's) if there is one.
pub fn migrate(tpuport: &Path, folder: &Path, config: Option<&PathBuf>) -> Result<Port> {
    let run = |extra: &[&str]| -> Result<String> {
        let mut cmd = Command::new(tpuport);
        cmd.arg("migrate").args(extra).arg("--exit-zero");
        match config {
            Some(c) => cmd.arg("--config").arg(c),
            None => cmd.arg("--isolated"),
        };
        let out = cmd
            .arg(".")
            .current_dir(folder)
            .output()
            .with_context(|| format!("cannot run {}", tpuport.display()))?;
        if !out.status.success() {
            bail!(
                "`tpuport migrate {}` failed on the copy in {}: {}",
                extra.join(" "),
                folder.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let diff = run(&["--diff"])?;
    let json = run(&["--write", "--output-format", "json"])?;
    let mut findings: Vec<Finding> =
        serde_json::from_str(&json).context("cannot read the migration's findings (JSON)")?;
    for f in &mut findings {
        f.path = f.path.trim_start_matches("./").to_string();
    }
    Ok(Port { findings, diff })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(rule: &str, applied: bool) -> Finding {
        Finding {
            rule: rule.into(),
            path: "train.py".into(),
            line: 3,
            message: String::new(),
            fix_class: "safe".into(),
            fix_applied: applied,
            advice: None,
            note: None,
        }
    }

    #[test]
    fn findings_sort_into_fixed_manual_advice_and_blocking() {
        let port = Port {
            findings: vec![
                finding("DEV001", true),
                finding("CUD004", false),
                finding("PERF002", false),
                finding("KRN001", false),
            ],
            diff: String::new(),
        };
        assert_eq!(port.fixed().count(), 1);
        assert_eq!(
            port.manual().map(|f| f.rule.as_str()).collect::<Vec<_>>(),
            ["CUD004", "KRN001"]
        );
        assert_eq!(port.advice().count(), 1);
        assert_eq!(port.blocking().count(), 1);
        assert_eq!(finding("XLA016", false).family(), "XLA");
    }
}
