//! Lines of an events file that a reader skips, counted by kind, so that every reader (the
//! dashboard, `top`, `report`, `check`, the rank table) can say what it skipped instead of
//! stopping or going quiet: unreadable lines (not JSON, cut short, too long, fields of the wrong
//! type) and events of a type this tpuport does not know (written by a newer one), each kind with
//! the first one's line number.

use serde_json::Value;

/// The event types of schema 1 (see [`super::event::Event`]).
pub const KNOWN_TYPES: [&str; 8] = [
    "run_start",
    "step",
    "compile",
    "memory",
    "sync",
    "log",
    "warning",
    "run_end",
];

/// A line longer than this is not an event (a binary file, a stuck writer): it is skipped
/// without being held in memory whole.
pub const MAX_LINE: usize = 64 << 20;

/// Why a line was skipped.
#[derive(Debug, Clone, PartialEq)]
pub enum Skip {
    /// Not an event: the parser's reason.
    Unreadable(String),
    /// A JSON object whose `type` this reader does not know.
    Unknown(String),
}

impl Skip {
    /// Classify a line that did not parse as an event.
    pub fn of(line: &[u8], err: String) -> Skip {
        if let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(line)
            && let Some(Value::String(t)) = o.get("type")
            && !KNOWN_TYPES.contains(&t.as_str())
        {
            return Skip::Unknown(t.clone());
        }
        Skip::Unreadable(err)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Skipped {
    pub unreadable: u64,
    /// The first unreadable line: (line number, why).
    pub first_unreadable: Option<(u64, String)>,
    pub unknown: u64,
    /// The first event of an unknown type: (line number, its type).
    pub first_unknown: Option<(u64, String)>,
}

fn lines(n: u64) -> &'static str {
    if n == 1 { "line" } else { "lines" }
}

impl Skipped {
    pub fn add(&mut self, line_no: u64, why: Skip) {
        match why {
            Skip::Unreadable(e) => {
                self.unreadable += 1;
                self.first_unreadable.get_or_insert((line_no, e));
            }
            Skip::Unknown(t) => {
                self.unknown += 1;
                self.first_unknown.get_or_insert((line_no, t));
            }
        }
    }

    pub fn total(&self) -> u64 {
        self.unreadable + self.unknown
    }

    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// One sentence for a person, e.g. `skipped 3 unreadable lines (the first at line 17:
    /// expected value at line 1 column 1)`; `None` when nothing was skipped.
    pub fn describe(&self) -> Option<String> {
        let mut parts = vec![];
        if let Some((line, why)) = &self.first_unreadable {
            parts.push(format!(
                "{} unreadable {} (the first at line {line}: {})",
                self.unreadable,
                lines(self.unreadable),
                crate::port::located::one_line(why)
            ));
        }
        if let Some((line, kind)) = &self.first_unknown {
            parts.push(format!(
                "{} {} with an event type this tpuport does not know (the first at line {line}: `{}`; written by a newer tpuport? update tpuport to read them)",
                self.unknown,
                lines(self.unknown),
                crate::port::located::one_line(kind)
            ));
        }
        (!parts.is_empty()).then(|| format!("skipped {}", parts.join(" and ")))
    }

    /// A few words for the dashboard's header: `3 unreadable lines skipped`.
    pub fn short(&self) -> Option<String> {
        let mut parts = vec![];
        if self.unreadable > 0 {
            parts.push(format!(
                "{} unreadable {}",
                self.unreadable,
                lines(self.unreadable)
            ));
        }
        if self.unknown > 0 {
            parts.push(format!("{} unknown events", self.unknown));
        }
        (!parts.is_empty()).then(|| format!("{} skipped", parts.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_what_was_skipped() {
        let mut s = Skipped::default();
        assert_eq!(s.describe(), None);
        s.add(17, Skip::of(b"{not json", "expected value".into()));
        s.add(
            20,
            Skip::of(b"{\"type\":\"step\"}", "missing field `t`".into()),
        );
        s.add(
            9,
            Skip::of(b"{\"type\":\"future\",\"t\":1}", "unknown variant".into()),
        );
        assert_eq!((s.unreadable, s.unknown), (2, 1));
        let d = s.describe().unwrap();
        assert!(
            d.starts_with("skipped 2 unreadable lines (the first at line 17: expected value) and 1 line with an event type this tpuport does not know (the first at line 9: `future`;"),
            "{d}"
        );
        assert_eq!(
            s.short().unwrap(),
            "2 unreadable lines, 1 unknown events skipped"
        );
    }
}
