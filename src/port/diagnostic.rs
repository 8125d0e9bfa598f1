//! A finding: the rule, the range it points at, its message and its fix (or why there is none).

use ruff_text_size::TextRange;

use super::edit::Fix;
use super::rules::FixClass;

/// One finding.
/// How the note of a fix begins where the project declares no torch version (the summary counts
/// them, to say how to declare one).
pub const UNDECLARED_TORCH: &str = "this project declares no torch version";

#[derive(Debug, Clone)]
pub struct Diagnostic {
    /// Index into [`RuleSet::rules`](crate::port::rules::RuleSet::rules).
    pub rule: usize,
    pub range: TextRange,
    pub message: String,
    pub fix: Option<Fix>,
    /// Why there is no fix, or why it was downgraded.
    pub note: Option<String>,
}

impl Diagnostic {
    /// Take the fix off, saying why.
    pub fn keep(&mut self, note: impl Into<String>) {
        self.fix = None;
        self.note = Some(note.into());
    }

    /// Show a safe fix as unsafe, saying why; whether there was a safe fix to change.
    pub fn make_unsafe(&mut self, note: &str) -> bool {
        match self.fix.as_mut() {
            Some(f) if f.applicability == FixClass::Safe => {
                f.applicability = FixClass::Unsafe;
                self.note = Some(note.to_string());
                true
            }
            _ => false,
        }
    }
}
