//! One question, one answer: a module that asks the same CUDA question in several tests (`if
//! torch.cuda.is_available():` before moving the model, and again before moving each batch)
//! ports all of them or none. Where one of them stays CUDA's (its code keeps a CUDA name, or a
//! finding there has no safe fix), the others would send the data to the TPU while the model
//! stays on the CPU: a device-mismatch crash where the original ran on the CPU throughout
//! (set T: a classifier whose model-moving test was left, its batch-moving tests ported). In
//! programs under `--to portable` only: `--to tpu` keeps its literal output, and a library's
//! functions are called apart.

use ruff_text_size::TextRange;

use super::collect::Guard;
use super::{demote, line_of, snippet};
use crate::port::diagnostic::Diagnostic;

/// What CUDA stays in a range once the fixes apply (safe ones only, with `true`).
type LeftIn<'a> = dyn Fn(&[Diagnostic], TextRange, bool) -> Option<TextRange> + 'a;

/// A test's text without its spacing, to compare two tests.
fn spelled(src: &str, r: TextRange) -> String {
    src[r].split_whitespace().collect()
}

/// A question about the machine, the same wherever it is asked: `torch.cuda.is_available()`,
/// `torch.cuda.device_count() > 1`, `not ...` (a test of a function's own `device` asks about
/// that argument, which differs between functions).
fn about_the_machine(test: &str) -> bool {
    static MACHINE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"^(not|\(|\)|and|or|torch\.cuda\.(is_available|device_count)\(\)|[<>=!]=?|\d+)*$",
        )
        .unwrap()
    });
    test.contains("torch.cuda.") && MACHINE.is_match(test)
}

/// Make unsafe the safe fixes in tests that ask what another test of the module, left CUDA's,
/// asks (`left(diags, test, true)`: what CUDA stays in a test once the safe fixes apply);
/// whether anything changed.
pub(super) fn same_question(
    src: &str,
    guards: &[&Guard],
    diags: &mut [Diagnostic],
    in_tests: &dyn Fn(&Diagnostic, TextRange) -> bool,
    left: &LeftIn<'_>,
) -> bool {
    let mut changed = false;
    for guard in guards {
        let fixed_here = |d: &Diagnostic| in_tests(d, guard.test);
        if !diags.iter().any(fixed_here) {
            continue;
        }
        let question = spelled(src, guard.test);
        if !about_the_machine(&question) {
            continue;
        }
        let Some(kept) = guards.iter().find(|other| {
            other.test != guard.test
                && spelled(src, other.test) == question
                && !diags.iter().any(|d| in_tests(d, other.test))
                && left(diags, other.test, true).is_some()
        }) else {
            continue;
        };
        let note = format!(
            "the same test at line {} (`{}`) stays CUDA's, so porting this one would put this \
             code on the TPU and that code on the CPU: port them together",
            line_of(src, kept.test.start()),
            snippet(src, kept.test)
        );
        changed |= demote(diags, &fixed_here, true, &note);
    }
    changed
}

#[cfg(test)]
mod tests {
    use crate::port::test_support::ported;

    /// A test that moves the batch is ported only with the test that moves the model.
    #[test]
    fn tests_asking_the_same_question_go_together() {
        let src = "import torch\n\n\ndef run(model, x):\n    if torch.cuda.is_available():\n        model = model.cuda()\n        torch.cuda.reset_peak_memory_stats_custom()\n    if torch.cuda.is_available():\n        x = x.cuda()\n    return model(x)\n\n\nif __name__ == \"__main__\":\n    run(None, None)\n";
        let out = ported(src);
        assert!(!out.contains("accelerator.is_available"), "{out}");
        let both = src.replace("        torch.cuda.reset_peak_memory_stats_custom()\n", "");
        let out = ported(&both);
        assert_eq!(out.matches("is_available").count(), 2, "{out}");
        assert!(!out.contains("torch.cuda"), "{out}");
    }
}
