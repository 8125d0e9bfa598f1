//! Where a run's events file goes by default: `runs/<UTC time>-<script>[-rank<N>]-<pid>.jsonl`.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// `runs/20261202-173000-train-4242.jsonl` (`-rank1` before the pid under torchrun).
pub fn default_events_path(script: &Path) -> PathBuf {
    let stem = script
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "run".into());
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Under torchrun every rank runs its own tpuport: the rank in the name keeps them apart.
    let rank = std::env::var("RANK")
        .ok()
        .filter(|r| r.chars().all(|c| c.is_ascii_digit()) && !r.is_empty())
        .map(|r| format!("-rank{r}"))
        .unwrap_or_default();
    PathBuf::from("runs").join(format!(
        "{}-{stem}{rank}-{}.jsonl",
        utc_stamp(secs),
        std::process::id()
    ))
}

/// `YYYYmmdd-HHMMSS` in UTC.
pub fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(1_796_229_000), "20261202-163000");
        assert_eq!(utc_stamp(951_782_400), "20000229-000000");
    }
}
