//! An accelerator branch for a device choice that also tests another backend (`--to
//! portable`): `if torch.cuda.is_available(): device = "cuda" elif mps: device = "mps" else:
//! device = "cpu"` keeps its CUDA branch (never replaced) and gains
//! `elif torch.accelerator.is_available(): device = "cuda"` before its `else`, whose device the
//! next round of the fix loop makes the current accelerator's. The CUDA and MPS machines take the
//! branches they took; a TPU VM (and an XPU machine, which took the CPU before) takes the new one.
//! A conditional expression gets the same in its last `else` value.

use ruff_text_size::{TextRange, TextSize};

use super::collect::{Branch, BranchKind};
use crate::port::edit::{self, Edit, Fix};
use crate::port::rules::FixClass;

/// The test of the added branch.
const AVAILABLE: &str = "torch.accelerator.is_available()";

/// The test where the project supports a torch without `torch.accelerator` (set S: a chain in
/// a project declaring `torch>=2.0` raised AttributeError where torch 2.0 took its CPU branch).
const AVAILABLE_IF_ANY: &str =
    "hasattr(torch, \"accelerator\") and torch.accelerator.is_available()";

/// Does the chain already ask for an accelerator (a branch added before)?
pub(super) fn has_accelerator_branch(src: &str, chain: &[TextRange]) -> Option<TextRange> {
    chain
        .iter()
        .copied()
        .find(|t| src[*t].contains("accelerator.is_available"))
}

/// The fix that adds the accelerator branch to the chain `b`; `old_torch`: tested for
/// `torch.accelerator` first, so a torch without one takes the chain's last clause, as before.
pub(super) fn accelerator_branch(src: &str, b: &Branch, old_torch: bool) -> Option<Fix> {
    let available = if old_torch {
        AVAILABLE_IF_ANY
    } else {
        AVAILABLE
    };
    let eol = if src.contains("\r\n") { "\r\n" } else { "\n" };
    let edit = match b.kind {
        BranchKind::Stmt { start, before, end } => {
            let indent = edit::indent_of(src, start)?;
            let body_line = line_start(src, b.body.start());
            // The body must start on its own line to be copied as lines.
            if !src[body_line.to_usize()..b.body.start().to_usize()]
                .chars()
                .all(|c| c == ' ' || c == '\t')
            {
                return None;
            }
            let body = &src[body_line.to_usize()..b.body.end().to_usize()];
            let head = format!("{indent}elif {available}:{eol}{body}");
            match before {
                Some(at) => {
                    let at = line_start(src, at);
                    if !src[at.to_usize()..].starts_with(indent) {
                        return None;
                    }
                    Edit::insert(at, format!("{head}{eol}"))
                }
                None => Edit::insert(end, format!("{eol}{head}")),
            }
        }
        BranchKind::Expr { last } => Edit::replace(
            last,
            format!("{} if {available} else {}", &src[b.body], &src[last]),
        ),
    };
    Some(Fix {
        edits: vec![edit],
        applicability: FixClass::Safe,
        imports: vec!["torch".into()],
        exclusive: None,
        why_unsafe: None,
    })
}

fn line_start(src: &str, at: TextSize) -> TextSize {
    let i = src[..at.to_usize()].rfind('\n').map_or(0, |i| i + 1);
    TextSize::try_from(i).unwrap_or_default()
}
