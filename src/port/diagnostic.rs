//! A finding: the rule, the range it points at, its message and its fix (or why there is none).

use ruff_text_size::TextRange;

use super::edit::Fix;

/// One finding.
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
