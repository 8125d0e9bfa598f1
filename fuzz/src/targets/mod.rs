//! The four targets of the harness, one per kind of input tpuport reads: Python sources
//! (`migrate`), notebooks (`notebook`), rule files and configuration (`rules`), events files
//! (`events`); and the invariants they share ([`outcome_holds`]).

pub mod events;
pub mod migrate;
pub mod notebook;
pub mod rules;

use std::collections::BTreeSet;

use tpuport::port::{Outcome, RuleSet, parse, render};

/// Python tokens for the mutator: syntax that breaks or nests, and the names the rules match.
pub const PYTHON_DICT: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ":",
    ",",
    ".",
    "=",
    "\\\n",
    "'''",
    "\"\"\"",
    "'",
    "\"",
    "#",
    "# noqa",
    "# noqa: DEV001",
    "# tpuport: ignore",
    "# tpuport: ignore-file",
    "\t",
    "    ",
    "\n",
    "\r",
    ";",
    "lambda: ",
    "async ",
    "await ",
    "yield ",
    "def f(x):\n",
    "class C:\n",
    "if x:\n",
    "else:\n",
    "with ",
    " as ",
    "for i in range(3):\n",
    "while True:\n",
    "try:\n",
    "except Exception:\n",
    "finally:\n",
    "return ",
    "pass",
    "global x\n",
    "del ",
    "f\"{x}\"",
    "f'{\"cuda\"}'",
    "rb'x'",
    "@torch.compile\n",
    "match x:\n    case 1:\n",
    "*args",
    "**kw",
    "import torch\n",
    "import torch_xla\n",
    "import torch_xla.core.xla_model as xm\n",
    "import torch_xla.runtime as xr\n",
    "from torch import cuda\n",
    "import os\n",
    "torch",
    "torch.cuda",
    "torch.cuda.synchronize()",
    ".cuda()",
    ".to('cuda')",
    "device='cuda'",
    "\"cuda:0\"",
    "'cuda:%d' % r",
    "torch.device('cuda', i)",
    "torch.cuda.amp.autocast()",
    "torch.autocast('cuda')",
    "torch.cuda.manual_seed(0)",
    "torch.manual_seed(0)",
    "torch.backends.cudnn.benchmark = True",
    "dist.init_process_group('nccl')",
    "'nccl'",
    "os.environ['CUDA_VISIBLE_DEVICES'] = '0'",
    "xm.mark_step()",
    "xm.xla_device()",
    "xm.optimizer_step(opt)",
    "torch.compile(model, backend='inductor')",
    "loss.item()",
    "loss.backward()",
    "opt.step()",
    "torch.cuda.Event(enable_timing=True)",
    "torch.cuda.nvtx.range('x')",
    "GradScaler()",
    "apex.optimizers.FusedAdam(p)",
    "_tpuport_",
    "def _tpuport_sync(",
    "torch.median(x)",
    "x.nonzero()",
    "triton.jit",
];

/// The invariants of one migration, whatever the input: the counts add up per rule, a failed
/// migration leaves the text as it was, a file that parsed still parses, one with syntax errors
/// gets no more of them, and the findings render (text, JSON, diff) without a panic.
pub fn outcome_holds(text: &str, out: &Outcome, rules: &RuleSet) -> Result<(), String> {
    counts_add_up(out)?;
    if (out.internal_error.is_some() || out.skipped || out.ignored) && out.output.is_some() {
        return Err("a failed, skipped or ignored file got new text".into());
    }
    if out.internal_error.is_some() && !out.applied.is_empty() {
        return Err("a failed file counts applied fixes".into());
    }
    if let Some(new) = &out.output {
        let after = parse::parse(new).errors.len();
        let before = out.syntax_errors.len();
        if before == 0 && after > 0 {
            return Err(format!(
                "a file that parsed does not parse after the migration ({after} syntax errors)"
            ));
        }
        if after > before {
            return Err(format!(
                "the migration added syntax errors ({before} before, {after} after)"
            ));
        }
        let _ = render::unified_diff("fuzz.py", text, new);
    }
    for d in &out.diagnostics {
        let (s, e) = (usize::from(d.range.start()), usize::from(d.range.end()));
        if s > e || e > text.len() || !text.is_char_boundary(s) || !text.is_char_boundary(e) {
            return Err(format!(
                "a finding of {} has a range {s}..{e} outside the text or inside a character",
                rules.rules[d.rule].id
            ));
        }
    }
    for required in [
        tpuport::port::FixClass::Safe,
        tpuport::port::FixClass::Unsafe,
    ] {
        let _ = render::diagnostics_text_grouped(
            "fuzz.py",
            text,
            &out.diagnostics,
            rules,
            required,
            true,
        );
        let _ = render::json_diagnostics("fuzz.py", text, &out.diagnostics, rules, required).len();
        let _ = tpuport::port::sarif::results("fuzz.py", text, &out.diagnostics, rules, required);
        let _ =
            tpuport::port::github::annotations("fuzz.py", text, &out.diagnostics, rules, required);
    }
    let _ = out.issues(std::path::Path::new("fuzz.py"), |r| {
        render::location(text, r)
    });
    Ok(())
}

/// Per rule: found + revealed = fixed + left + absorbed (what `--statistics` prints).
pub fn counts_add_up(out: &Outcome) -> Result<(), String> {
    let ids: BTreeSet<&String> = out
        .found
        .keys()
        .chain(out.revealed.keys())
        .chain(out.applied.keys())
        .chain(out.remaining.keys())
        .chain(out.absorbed.keys())
        .collect();
    for id in ids {
        let get = |m: &std::collections::BTreeMap<String, usize>| m.get(id).copied().unwrap_or(0);
        let (found, revealed) = (get(&out.found), get(&out.revealed));
        let (fixed, left, absorbed) = (get(&out.applied), get(&out.remaining), get(&out.absorbed));
        if found + revealed != fixed + left + absorbed {
            return Err(format!(
                "statistics do not add up for {id}: found {found} + revealed {revealed} != fixed {fixed} + left {left} + absorbed {absorbed}"
            ));
        }
    }
    Ok(())
}

/// A coarse summary of what a migration did, for the corpus's novelty test.
pub fn outcome_signature(out: &Outcome) -> u64 {
    let found: Vec<&String> = out.found.keys().collect();
    let applied: Vec<&String> = out.applied.keys().collect();
    crate::runner::hash_of((
        found,
        applied,
        out.internal_error.is_some(),
        out.syntax_errors.is_empty(),
        out.skipped,
        out.ignored,
    ))
}
