//! How the dashboard writes numbers and paths: step times (`3.1 ms`), rates (`12.5k`), durations
//! (`3m05s`) and file names without their directory. Byte sizes come from
//! [`crate::profile::summary::bytes`], shared with the reports.

/// The file name of a path (`external_utils.py:41` rather than the whole path).
pub fn short_path(p: &str) -> String {
    match p.rsplit_once('/') {
        Some((_, name)) => name.to_string(),
        None => p.to_string(),
    }
}

/// A path in at most `width` characters: whole when it fits, else its leading folders folded
/// into `…` (`…/scripts/train.py`), keeping at least the file name.
pub fn fit_path(p: &str, width: usize) -> String {
    let n = p.chars().count();
    if n <= width {
        return p.to_string();
    }
    let name = short_path(p);
    // The longest tail of whole folders that fits after "…/".
    let mut tail = name.clone();
    let mut rest = p
        .strip_suffix(name.as_str())
        .unwrap_or("")
        .trim_end_matches('/');
    while let Some((head, dir)) = rest.rsplit_once('/') {
        let longer = format!("{dir}/{tail}");
        if longer.chars().count() + 2 > width {
            break;
        }
        tail = longer;
        rest = head;
    }
    format!("…/{tail}")
}

/// A time in seconds: `1.25 s` from one second up, else `3.1 ms`.
pub fn ms(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.1} ms", s * 1e3)
    }
}

/// A rate per second: `950`, `12.5k`, `1.20M`.
pub fn rate(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2}M", r / 1e6)
    } else if r >= 1e4 {
        format!("{:.1}k", r / 1e3)
    } else {
        format!("{r:.0}")
    }
}

/// `42s`, `3m05s`, `1h02m`; `-` when not a time.
pub fn duration(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "-".into();
    }
    let s = s.round() as u64;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(short_path("/a/b/train.py"), "train.py");
        assert_eq!(short_path("train.py"), "train.py");
        assert_eq!(fit_path("/a/b/train.py", 40), "/a/b/train.py");
        assert_eq!(
            fit_path("/tmp/long/tests/scripts/train.py", 20),
            "…/scripts/train.py"
        );
        assert_eq!(
            fit_path("/tmp/long/tests/scripts/train.py", 5),
            "…/train.py"
        );
        assert_eq!(ms(0.0031), "3.1 ms");
        assert_eq!(ms(1.25), "1.25 s");
        assert_eq!(rate(950.4), "950");
        assert_eq!(rate(12_500.0), "12.5k");
        assert_eq!(rate(1_200_000.0), "1.20M");
        assert_eq!(duration(42.4), "42s");
        assert_eq!(duration(185.0), "3m05s");
        assert_eq!(duration(3720.0), "1h02m");
        assert_eq!(duration(f64::INFINITY), "-");
        assert_eq!(duration(-1.0), "-");
    }
}
