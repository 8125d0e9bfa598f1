//! PRC008: a program that trains in float32 and never sets the matmul precision. CUDA computes
//! float32 matmuls in full float32 (TF32 is off for matmuls by default in torch); a TPU computes
//! them at its default "medium" precision, bfloat16 inputs with float32 accumulation. The same
//! program silently trains with different numbers.
//!
//! Reported once per program, on its entry script ([`crate::port::program`]): where the program
//! (the entry script and the project modules it imports) steps an optimizer after a
//! `.backward()`, targets CUDA or the TPU (not PyTorch/XLA, whose TPU default is the same
//! precision), sets no precision (`torch.set_float32_matmul_precision`, the TF32 switches,
//! `fp32_precision`, `torch.tpu.precision`) and computes in no lower precision (autocast, a
//! float16/bfloat16 model, mixed-precision settings). Its text decides for the other modules.

use std::sync::LazyLock;

use regex::Regex;
use ruff_python_ast::AnyNodeRef;
use ruff_text_size::{Ranged, TextRange};

use super::super::Checker;
use super::{Found, loops, walk};
use crate::port::program::{imports, tree};

/// A precision set somewhere in the program: the choice is made.
static SETS_PRECISION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"set_float32_matmul_precision|allow_tf32|fp32_precision|torch\.tpu\.precision|allow_excess_precision|set_mat_mul_precision|XLA_USE_BF16",
    )
    .unwrap()
});

/// Compute in a lower precision than float32: autocast, a half or bfloat16 model, the mixed
/// precision switches of Lightning, Accelerate, Hugging Face and apex.
static LOWER_PRECISION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"autocast|\.half\(\)|\.bfloat16\(\)|torch\.(bfloat16|float16|half)\b|mixed_precision|\b(bf16|fp16)\b|\bamp\b|16-mixed|16-true|precision\s*=\s*["']?16\b"#,
    )
    .unwrap()
});

/// A program for CUDA or the TPU (mentioned anywhere in its files).
static DEVICE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"cuda|["']tpu|torch\.accelerator"#).unwrap());

/// A training step in a module's text: a `.backward(` and an optimizer's `.step(`.
static BACKWARD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\.backward\(").unwrap());
static STEP: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\.step\(").unwrap());

/// What a file's text says about the program's precision.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Precision {
    /// It sets a precision, or computes in a lower one: nothing to report.
    chosen: bool,
    /// It uses PyTorch/XLA: a TPU's default precision is what it had.
    xla: bool,
    device: bool,
    trains: bool,
}

impl Precision {
    fn of(text: &str) -> Precision {
        // Settings and devices are often strings (`precision="bf16-mixed"`, `"cuda"`): read
        // without comments; a training step is code (not a docstring's `>>> loss.backward()`).
        let plain = &without_comments(text);
        let code = &crate::port::program::networks::code_only(text);
        Precision {
            chosen: SETS_PRECISION.is_match(plain) || LOWER_PRECISION.is_match(plain),
            xla: plain.contains("torch_xla"),
            device: DEVICE.is_match(plain),
            trains: BACKWARD.is_match(code) && STEP.is_match(code),
        }
    }
}

static KEPT: tree::Kept<Precision> = LazyLock::new(Default::default);

/// The text without its `#` comments (a `#` after an odd number of quotes on its line is taken
/// to be in a string): a comment that names autocast chooses no precision.
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut quotes = 0;
        let mut end = line.len();
        for (i, c) in line.char_indices() {
            match c {
                '"' | '\'' => quotes += 1,
                '#' if quotes % 2 == 0 => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        out.push_str(&line[..end]);
        out.push('\n');
    }
    out
}

impl Checker<'_> {
    /// PRC008 on an entry script (see the module doc).
    pub(super) fn fp32_training_of_program(&self, training: &loops::Training) -> Vec<Found> {
        let entry = match self.facts.path.as_deref() {
            Some(path) => tree::is_entry(path, self.src),
            None => self.facts.program,
        };
        if !entry {
            return vec![];
        }
        let own = Precision::of(self.src);
        if own.chosen || own.xla {
            return vec![];
        }
        let mut device = own.device;
        // Where it trains: this file's first optimizer step, or the import that reaches the
        // first module that trains.
        let mut at: Option<(TextRange, String)> = training
            .first_step(self)
            .map(|r| (r, " (its optimizer steps here)".to_string()));
        if let Some(path) = self.facts.path.as_deref() {
            let base = path.parent().unwrap_or(path);
            for m in imports::modules_of(path, self.src) {
                let Some(p) = tree::fact(&KEPT, &m.file, Precision::of) else {
                    continue;
                };
                if p.chosen || p.xla {
                    return vec![];
                }
                device |= p.device;
                if p.trains && at.is_none() {
                    at = Some((
                        super::programs::line_at(self.src, &m.via),
                        format!(
                            " (its optimizer steps in {}, which this import brings in)",
                            tree::shown(&m.file, base)
                        ),
                    ));
                }
            }
        }
        match at {
            Some((range, detail)) if device => vec![Found::with(range, detail)],
            _ => vec![],
        }
    }
}

impl loops::Training<'_> {
    /// The first `.step()` called in a training loop of this file.
    pub(super) fn first_step(&self, c: &Checker) -> Option<TextRange> {
        let mut found: Option<TextRange> = None;
        for body in self.bodies() {
            walk(body, false, &mut |node, _| {
                if let AnyNodeRef::ExprCall(call) = node
                    && c.method_name(call) == Some("step")
                    && found.is_none_or(|f| call.range().start() < f.start())
                {
                    found = Some(call.range());
                }
            });
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The PRC008 findings of `src` (at `path`, if given): line and message.
    fn prc008(src: &str, path: Option<&Path>) -> Vec<String> {
        crate::port::test_support::findings("PRC008", src, path)
    }

    const TRAIN: &str = "import torch\n\n\ndef main():\n    model = torch.nn.Linear(4, 4).cuda()\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    for x in range(3):\n        loss = model(torch.randn(2, 4).cuda()).sum()\n        loss.backward()\n        opt.step()\n\n\nif __name__ == \"__main__\":\n    main()\n";

    #[test]
    fn an_fp32_training_program_is_told_once_on_its_optimizer_step() {
        let found = prc008(TRAIN, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("10: this program trains in float32 and sets no matmul precision (its optimizer steps here)"),
            "{found:?}"
        );
        // A precision chosen, or a lower one computed in: nothing to say.
        for choice in [
            "torch.set_float32_matmul_precision(\"highest\")",
            "torch.backends.cuda.matmul.allow_tf32 = False",
            "torch.backends.cuda.matmul.fp32_precision = \"ieee\"",
            "ctx = torch.autocast(\"cuda\", dtype=torch.bfloat16)",
            "model = model.half()",
        ] {
            let src = TRAIN.replace("def main():\n", &format!("def main():\n    {choice}\n"));
            assert!(prc008(&src, None).is_empty(), "{choice}");
        }
        // Lightning's mixed precision is a choice; a docstring's training step is no training.
        let lightning = TRAIN.replace(
            "def main():\n",
            "def main():\n    trainer = Trainer(precision=\"16-mixed\")\n",
        );
        assert!(prc008(&lightning, None).is_empty());
        // A comment that names autocast chooses nothing.
        let comment = TRAIN.replace("def main():\n", "def main():\n    # TODO: autocast\n");
        assert_eq!(prc008(&comment, None).len(), 1);
        // No optimizer step (inference, guidance), a library module, a PyTorch/XLA program, a
        // program for no device: nothing.
        assert!(prc008(&TRAIN.replace("        opt.step()\n", ""), None).is_empty());
        let library = TRAIN.replace("\n\nif __name__ == \"__main__\":\n    main()\n", "\n");
        assert!(prc008(&library, None).is_empty());
        let xla = TRAIN.replace("import torch\n", "import torch\nimport torch_xla\n");
        assert!(prc008(&xla, None).is_empty());
        assert!(prc008(&TRAIN.replace(".cuda()", ""), None).is_empty());
    }

    #[test]
    fn a_program_is_judged_with_the_modules_it_imports() {
        let d = tempfile::tempdir().unwrap();
        let w = |name: &str, text: &str| std::fs::write(d.path().join(name), text).unwrap();
        let trainer = "import torch\n\n\ndef fit(model, opt, data):\n    for x in data:\n        model(x).sum().backward()\n        opt.step()\n";
        w("trainer.py", trainer);
        let main = "import torch\nfrom trainer import fit\n\nif __name__ == \"__main__\":\n    fit(torch.nn.Linear(2, 2).cuda(), None, [])\n";
        let script = d.path().join("train.py");
        let found = prc008(main, Some(&script));
        assert_eq!(
            found,
            [
                "2: this program trains in float32 and sets no matmul precision (its optimizer steps in trainer.py, which this import brings in): a TPU computes float32 matmuls at \"medium\" precision by default (bfloat16 inputs, float32 accumulation), where CUDA computed them in full float32"
            ]
        );
        // The module trains in bfloat16: the program's choice is made there.
        w(
            "trainer.py",
            &trainer.replace("        model(x)", "        with torch.autocast(\"cuda\", dtype=torch.bfloat16):\n            loss = model(x)\n        model(x)"),
        );
        let other = tempfile::tempdir().unwrap();
        std::fs::copy(d.path().join("trainer.py"), other.path().join("trainer.py")).unwrap();
        assert!(prc008(main, Some(&other.path().join("train.py"))).is_empty());
        // A test file is no program.
        let test = format!("import pytest\n{TRAIN}");
        assert!(prc008(&test, Some(&d.path().join("test_train.py"))).is_empty());
    }
}
