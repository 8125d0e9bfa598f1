//! A comment that says the code next to it is about CUDA or NCCL (`# right now, only CUDA is
//! implemented`, `# the all-to-all stays on NCCL`) would no longer be true once that code is
//! rewritten, and it usually records a reason the rewrite cannot see (a library that supports
//! nothing else, a backend chosen on purpose). The fixes on such lines become unsafe, with a
//! note quoting the comment: the reader decides, and updates the comment with the code.

use std::sync::LazyLock;

use crate::port::diagnostic::Diagnostic;
use crate::port::edit::line_start;
use crate::port::rules::{FixClass, RuleSet};
use regex::Regex;

/// Comments that restrict code to CUDA.
static CUDA_ONLY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bonly (on |for |with )?(cuda|nvidia|gpus?)\b|\b(cuda|nvidia)[- ]only\b|\brequires? (a )?(cuda|nvidia)\b|\bcuda (is )?required\b").unwrap()
});

/// Comments that name NCCL (for backend rewrites).
static NCCL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)\bnccl\b").unwrap());

/// A comment that lists the backends to choose from (`# 'nccl', 'gloo', etc.`, `# options:
/// nccl, gloo, mpi`): it records no reason to keep NCCL. The portable port still picks NCCL on
/// a CUDA machine (the accelerator's default backend), so the list stays true.
static LISTS_OPTIONS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(gloo|mpi|ucc|xccl|hccl|etc|e\.g|options?|choices?|examples?|one of)\b")
        .unwrap()
});

/// Words that make a comment about NCCL a reason: the code must stay on it.
static KEEPS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(only|must|stays?|keeps?|requires?|required|needs?|needed|always|forced?|instead|because|since|so that|workaround|bug|hang|deadlock)\b")
        .unwrap()
});

/// A comment that names NCCL and says the code must stay on it, not one that lists options.
fn keeps_nccl(c: &str) -> bool {
    NCCL.is_match(c) && (KEEPS.is_match(c) || !LISTS_OPTIONS.is_match(c))
}

/// The comment on the line that holds `at` and the block of comment lines directly above it
/// (at most three), each with its line number.
fn comments_near(src: &str, at: usize) -> Vec<(usize, &str)> {
    let mut out = vec![];
    let start = usize::from(line_start(src, at.try_into().unwrap_or_default()));
    let line_no = src[..start].bytes().filter(|b| *b == b'\n').count() + 1;
    let line = src[start..].split('\n').next().unwrap_or("");
    if let Some(i) = line.find('#') {
        out.push((line_no, &line[i..]));
    }
    let mut above = &src[..start];
    for k in 1..=3 {
        let Some(prev) = above.strip_suffix('\n') else {
            break;
        };
        let s = prev.rfind('\n').map(|i| i + 1).unwrap_or(0);
        let text = prev[s..].trim();
        if !text.starts_with('#') {
            break;
        }
        out.push((line_no - k, text));
        above = &prev[..s];
    }
    out
}

/// Make unsafe the safe fixes that a nearby comment ties to CUDA or NCCL.
pub(in crate::port::rewrite) fn keep_commented(
    src: &str,
    rules: &RuleSet,
    diags: &mut [Diagnostic],
) {
    for d in diags.iter_mut() {
        if d.fix
            .as_ref()
            .is_none_or(|f| f.applicability != FixClass::Safe)
        {
            continue;
        }
        let dst = rules.rules[d.rule].family == "DST";
        let near = comments_near(src, usize::from(d.range.start()));
        let said = near
            .iter()
            .find(|(_, c)| CUDA_ONLY.is_match(c) || (dst && keeps_nccl(c)));
        if let Some((line, comment)) = said {
            let comment: String = comment.chars().take(80).collect();
            d.make_unsafe(&format!(
                "unsafe: the comment at line {line} (`{comment}`) ties this code to CUDA or \
                 NCCL, for a reason the rewrite cannot see, and would no longer be true after \
                 it: check the reason, then update the comment with the code"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::port::rewrite::migrated as migrate;

    #[test]
    fn comments_that_tie_code_to_cuda_or_nccl_make_it_unsafe() {
        let src = "import torch\n\n\ndef weights():\n    # right now, only CUDA is implemented\n    return torch.device(\"cuda\", 0)\n";
        assert_eq!(migrate(src, false), src);
        assert!(migrate(src, true).contains("torch.device(\"tpu\", 0)"));
        let nccl = "import torch.distributed as dist\n\n# the all-to-all stays on NCCL.\ndist.init_process_group(backend=\"nccl\")\n";
        assert_eq!(migrate(nccl, false), nccl);
        // A comment listing the backends to choose from is no reason to keep NCCL.
        let options = "import torch.distributed as dist\n\nbackend = 'nccl' # 'nccl', 'gloo', etc.\ndist.init_process_group(backend=backend)\n";
        assert!(migrate(options, false).contains("tpu_dist"));
        let must = "import torch.distributed as dist\n\nbackend = 'nccl' # must be nccl, not gloo\ndist.init_process_group(backend=backend)\n";
        assert_eq!(migrate(must, false), must);
        let plain = "import torch\n\n# move the model to the GPU\nmodel = model.to(\"cuda\")\n";
        assert!(migrate(plain, false).contains("model.to(\"tpu\")"));
    }
}
