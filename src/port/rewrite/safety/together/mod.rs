//! A CUDA test and the code it selects are ported together or not at all. Each finding is
//! decided where it sits, so a test can be rewritten while the branch it selects keeps naming
//! CUDA (`if torch.cuda.is_available(): accelerator_name = "cuda"`, a `torch.cuda` call no rule
//! maps, `self.forward_cuda(x)`, `"CUDAExecutionProvider"`, `is_sm_at_least_90()`), or a
//! branch's device can be rewritten while the test that selects it stays about CUDA (`"tpu" if
//! device.type == "cuda" and is_rocm_platform()`). Either way a TPU would be sent to CUDA code,
//! or CUDA would be given a TPU device. After the walk, per `if`/`elif`, conditional expression
//! and skip decorator (`@skipIf(test)` selects the function or class it decorates):
//! - a test with fixed CUD/DEV findings keeps no fix when CUDA is left in the test or its
//!   branches (a finding there without fix, or a CUDA name no fix rewrites); when what is left
//!   has only an unsafe fix, the test's safe fixes become unsafe (they go together);
//! - when CUDA is left in the test, the DEV findings in its branches keep no fix (or become
//!   unsafe, likewise);
//! - a device compared with `!=`/`not in` is a gate for what runs off CUDA: unsafe;
//! - a CUD/DEV finding in the tests of a chain that already has a TPU (or PyTorch/XLA) branch,
//!   or a DEV finding in its other branches, keeps no fix;
//! - a CUDA availability check in a chain that also tests another backend (`elif
//!   torch.xpu.is_available()`, `mps.is_available() and not torch.cuda.is_available()`) keeps no
//!   fix: `torch.accelerator.is_available()` is true on that backend too and would take it over.
//!
//! A module-level flag whose value still asks about CUDA (`_SUPPORTS_FLEX_ATTENTION =
//! torch.cuda.is_available() and torch.cuda.get_device_capability() >= (7, 5)`) counts as CUDA
//! where it is read.
//!
//! Repeated until nothing changes, since a test that loses its fix leaves CUDA behind for an
//! enclosing one.

mod branch;
mod collect;
mod flag;
mod question;

pub(in crate::port::rewrite) use collect::Guards;
use collect::{Guard, TPU_BRANCH, naming, other_backend, says_cuda};

use ruff_text_size::{TextRange, TextSize};

use crate::port::diagnostic::Diagnostic;
use crate::port::rules::{FixClass, RuleSet};

/// The families whose fixes this pass may take off: CUD/DEV/DST findings in tests, DEV/STM
/// findings in the branches they select. The walk runs the pass where one of them has a fix.
pub(in crate::port::rewrite) const FAMILIES: &[&str] = &["CUD", "DEV", "DST", "STM", "AMP"];

/// Does this finding's fix go through in the mode asked about (any fix, or safe ones only)?
fn fixed(d: &Diagnostic, safe_only: bool) -> bool {
    d.fix
        .as_ref()
        .is_some_and(|f| !safe_only || f.applicability == FixClass::Safe)
}

/// What CUDA is left in `range` of the module whose guards and CUDA names are `g` once its safe
/// fixes apply (none inside `harmless`): a finding there without a safe fix that names CUDA,
/// or a CUDA name no safe fix rewrites.
pub(in crate::port::rewrite) fn cuda_left_in(
    src: &str,
    diags: &[Diagnostic],
    g: &Guards,
    range: TextRange,
    harmless: &[TextRange],
) -> Option<TextRange> {
    left_cuda(src, diags, &g.names, range, true, harmless)
}

/// What CUDA is left in `range` when only the fixes allowed by `safe_only` apply: a finding
/// there that is not fixed and names CUDA, or a CUDA name that no fixed finding covers; none
/// inside `harmless` (CUDA seeds, a no-op without CUDA).
fn left_cuda(
    src: &str,
    diags: &[Diagnostic],
    names: &[TextRange],
    range: TextRange,
    safe_only: bool,
    harmless: &[TextRange],
) -> Option<TextRange> {
    let kept = |r: &TextRange| !harmless.iter().any(|h| h.contains_range(*r));
    let unfixed = diags.iter().find(|d| {
        !fixed(d, safe_only)
            && range.contains_range(d.range)
            && kept(&d.range)
            && says_cuda(&src[d.range])
    });
    if let Some(d) = unfixed {
        return Some(d.range);
    }
    names
        .iter()
        .filter(|n| range.contains_range(**n) && kept(n))
        .find(|n| {
            !diags
                .iter()
                .any(|d| fixed(d, safe_only) && d.range.contains_range(**n))
        })
        .copied()
}

/// cuDNN flags set on a line of their own (`cudnn.benchmark = True`): no-ops without CUDA, so
/// a test that selects them may send a TPU there (set T: a device guard moving the model beside
/// `cudnn.benchmark = True` stayed CUDA's while the guards moving the data were ported).
fn cudnn_flags<'a>(src: &'a str, names: &'a [TextRange]) -> impl Iterator<Item = TextRange> + 'a {
    names.iter().copied().filter(move |n| {
        let start = src[..n.start().to_usize()].rfind('\n').map_or(0, |i| i + 1);
        let end = src[n.end().to_usize()..]
            .find('\n')
            .map_or(src.len(), |i| n.end().to_usize() + i);
        CUDNN_FLAG.is_match(&src[start..end])
    })
}

static CUDNN_FLAG: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"^[ \t]*(?:torch\.backends\.)?cudnn\.(?:benchmark|deterministic|enabled|allow_tf32)[ \t]*=[ \t]*(?:True|False)[ \t]*(?:#.*)?$",
    )
    .unwrap()
});

fn line_of(src: &str, at: TextSize) -> usize {
    src[..at.to_usize()].bytes().filter(|b| *b == b'\n').count() + 1
}

pub(in crate::port::rewrite) fn snippet(src: &str, r: TextRange) -> String {
    let text = src[r].split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() > 60 {
        let cut: String = text.chars().take(57).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// Take the fixes off (or, with `to_unsafe`, make unsafe the safe fixes of) the findings `pick`
/// selects; whether anything changed.
fn demote(
    diags: &mut [Diagnostic],
    pick: &dyn Fn(&Diagnostic) -> bool,
    to_unsafe: bool,
    note: &str,
) -> bool {
    let mut changed = false;
    let (unsafe_note, kept_note) = (format!("unsafe: {note}"), format!("not rewritten: {note}"));
    for d in diags.iter_mut().filter(|d| pick(d)) {
        if to_unsafe {
            changed |= d.make_unsafe(&unsafe_note);
        } else {
            d.keep(kept_note.clone());
            changed = true;
        }
    }
    changed
}

/// Apply the module comment's rules to `diags` (all findings of the module) until nothing
/// changes. With `portable` (`--to portable`), a device, stream or autocast in code that a test
/// still asking about CUDA selects keeps its fix: the portable form is CUDA's own on a CUDA
/// machine, and that code does not run on a TPU (the test sends the TPU elsewhere).
///
/// Returns the findings that need nothing more: a CUDA check whose chain already has the
/// accelerator branch the portable port adds.
pub(in crate::port::rewrite) fn keep_together(
    src: &str,
    rules: &RuleSet,
    g: &Guards,
    diags: &mut [Diagnostic],
    portable: bool,
    old_torch: &dyn Fn() -> Option<String>,
) -> Vec<TextRange> {
    let mut done = vec![];
    let family = |d: &Diagnostic| rules.rules[d.rule].family.as_str();
    let ported = |d: &Diagnostic| matches!(family(d), "CUD" | "DEV" | "DST");
    // Where the CUD/DEV/DST findings are (blanked out when a test is searched for another
    // backend); taking fixes off changes no range.
    let findings: Vec<TextRange> = diags
        .iter()
        .filter(|d| ported(d))
        .map(|d| d.range)
        .collect();
    // A flag whose value still asks about CUDA is CUDA wherever it is read.
    let mut names = g.names.clone();
    for (flag, at) in &g.flag_uses {
        if let Some(value) = g.flags.get(flag)
            && left_cuda(src, diags, &g.names, *value, false, &[]).is_some()
        {
            names.push(*at);
        }
    }
    // Only tests that hold a CUD/DEV finding or a CUDA name can be about CUDA.
    let relevant: Vec<&Guard> = g
        .guards
        .iter()
        .filter(|guard| {
            findings.iter().any(|f| guard.test.contains_range(*f))
                || names.iter().any(|n| guard.test.contains_range(*n))
        })
        .collect();
    // `device.type != "cuda"`: a gate that switches something off where CUDA is missing
    // (peak-memory stats, a CUDA-only path); asking about the TPU instead switches it on there.
    let negated = |d: &Diagnostic| {
        fixed(d, true)
            && matches!(family(d), "DEV" | "STM" | "AMP")
            && g.negated.iter().any(|n| n.contains_range(d.range))
    };
    demote(
        diags,
        &negated,
        true,
        "a device compared with `!=`/`not in` gates what runs off CUDA (stats, a CUDA-only \
         path); asking about the TPU instead switches that on for the TPU: check that it works \
         there",
    );
    // A chain that rejects the devices it does not name (`else: assert False, "Unsupported
    // device"`): each branch is that device's own code, and a TPU renamed into the CUDA one
    // would take CUDA's (kernels, configs) instead of the honest rejection.
    for chain in &g.chains {
        let Some(reject) = chain.iter().find(|c| c.rejects) else {
            continue;
        };
        let in_tests = |d: &Diagnostic| {
            fixed(d, true)
                && matches!(family(d), "CUD" | "DEV")
                && chain
                    .iter()
                    .filter_map(|c| c.test)
                    .any(|t| t.contains_range(d.range))
        };
        let note = format!(
            "this chain dispatches per device and rejects the others (line {}: `{}`); its CUDA \
             branch holds CUDA's code (kernels, configurations), so a TPU would take it instead \
             of the rejection: check that branch on a TPU, or add a TPU branch",
            line_of(src, reject.body.start()),
            snippet(src, reject.body)
        );
        demote(diags, &in_tests, true, &note);
    }
    // A chain with a TPU (or PyTorch/XLA) branch: its other branches are for other devices.
    for chain in g.chains.iter().filter(|_| !portable) {
        let tests: Vec<TextRange> = chain.iter().filter_map(|c| c.test).collect();
        let Some(tpu) = naming(&TPU_BRANCH, src, &tests, &findings) else {
            continue;
        };
        let note = format!(
            "this chain already has a TPU (or PyTorch/XLA) branch (line {}: `{}`), which is \
             where a TPU goes; this branch serves another device and keeps its own",
            line_of(src, tpu.start()),
            snippet(src, tpu)
        );
        for clause in chain.iter().filter(|c| c.test != Some(tpu)) {
            let in_body = |d: &Diagnostic| {
                d.fix.is_some()
                    && matches!(family(d), "DEV" | "STM" | "AMP")
                    && clause.body.contains_range(d.range)
            };
            demote(diags, &in_body, false, &note);
        }
    }
    // Under --to portable, a CUDA seed (`torch.cuda.manual_seed_all(s)`, RNG001 whose fix is
    // left) in a branch that picks a device ported safely is not CUDA left there: without CUDA
    // it is a no-op, so the branch runs as it is on the accelerator (library.rs ports such a
    // device choice with its check). A branch that only seeds keeps its CUDA test.
    let picks_device = |arm: &TextRange| {
        diags
            .iter()
            .any(|d| fixed(d, true) && family(d) == "DEV" && arm.contains_range(d.range))
    };
    let seeds: Vec<TextRange> = diags
        .iter()
        .filter(|d| portable && rules.rules[d.rule].name == "cuda-manual-seed")
        .filter(|d| {
            g.guards.iter().any(|guard| {
                guard
                    .arms
                    .iter()
                    .any(|a| a.contains_range(d.range) && picks_device(a))
            })
        })
        .map(|d| d.range)
        .chain(cudnn_flags(src, &names).filter(|_| portable))
        .collect();
    let left = |diags: &[Diagnostic], r: TextRange, safe_only| {
        left_cuda(src, diags, &names, r, safe_only, &seeds)
    };
    let mut arm_names = names.clone();
    arm_names.extend(&g.arm_names);
    let left_in_arm = |diags: &[Diagnostic], r: TextRange, safe_only| {
        left_cuda(src, diags, &arm_names, r, safe_only, &seeds)
    };
    chosen_for_cuda(src, rules, g, &relevant, diags);
    for _ in 0..8 {
        let mut changed = false;
        for guard in &relevant {
            let in_test =
                |d: &Diagnostic| d.fix.is_some() && ported(d) && guard.test.contains_range(d.range);
            // A CUDA availability check in a chain with another backend.
            let other = other_backend(src, &guard.chain, &findings);
            let tpu_branch = naming(&TPU_BRANCH, src, &guard.chain, &findings);
            if let Some(other) = tpu_branch
                && diags.iter().any(in_test)
            {
                let note = format!(
                    "this chain already has a TPU (or PyTorch/XLA) branch (line {}: `{}`), which \
                     is where a TPU goes; the CUDA branch stays CUDA's",
                    line_of(src, other.start()),
                    snippet(src, other)
                );
                changed |= demote(diags, &in_test, false, &note);
            }
            if let Some(other) = other {
                let check = |d: &Diagnostic| {
                    in_test(d) && family(d) == "CUD" && {
                        let t = &src[d.range];
                        t.contains("is_available") || t.contains("device_count")
                    }
                };
                if diags.iter().any(check) {
                    // Portable: the CUDA branch stays, and an accelerator branch goes in before
                    // the chain's last clause (once; afterwards the chain has it).
                    let added = branch::has_accelerator_branch(src, &guard.chain);
                    let fix = g
                        .branches
                        .iter()
                        .find(|b| b.test == guard.test)
                        .filter(|_| portable && added.is_none())
                        .and_then(|b| {
                            let old = old_torch();
                            Some((branch::accelerator_branch(src, b, old.is_some())?, old))
                        });
                    let note = match added {
                        Some(at) if portable => format!(
                            "not rewritten: this chain also tests for another backend (line {}: \
                             `{}`) and has an accelerator branch (line {}), where a TPU goes; \
                             the CUDA branch stays CUDA's",
                            line_of(src, other.start()),
                            snippet(src, other),
                            line_of(src, at.start())
                        ),
                        _ => format!(
                            "this chain also tests for another backend (line {}: `{}`), and \
                             torch.accelerator.is_available() is true there too, so the CUDA \
                             branch would take that backend over; add a TPU branch by hand",
                            line_of(src, other.start()),
                            snippet(src, other)
                        ),
                    };
                    match fix {
                        Some((fix, old)) => {
                            for d in diags.iter_mut().filter(|d| check(d)) {
                                if d.fix.as_ref().map(|f| &f.edits) != Some(&fix.edits) {
                                    d.fix = Some(fix.clone());
                                    d.note = old.clone();
                                    changed = true;
                                }
                            }
                        }
                        None if added.is_some() && portable => {
                            for d in diags.iter_mut().filter(|d| check(d)) {
                                d.keep(note.clone());
                                done.push(d.range);
                                changed = true;
                            }
                        }
                        None => changed |= demote(diags, &check, false, &note),
                    }
                }
            }
            let test_left = left(diags, guard.test, false);
            if diags.iter().any(in_test) {
                for safe_only in [false, true] {
                    let found = left(diags, guard.test, safe_only)
                        .map(|l| (l, true))
                        .or_else(|| {
                            guard
                                .arms
                                .iter()
                                .find_map(|a| left_in_arm(diags, *a, safe_only))
                                .map(|l| (l, false))
                        });
                    let Some((l, in_own_test)) = found else {
                        continue;
                    };
                    let (line, what) = (line_of(src, l.start()), snippet(src, l));
                    let how = if safe_only {
                        "only an unsafe fix rewrites"
                    } else {
                        "no fix rewrites"
                    };
                    let note = if in_own_test {
                        format!(
                            "the rest of this test still asks about CUDA (line {line}: \
                             `{what}`), which {how}; rewriting only this part would mix the \
                             TPU and CUDA in one test"
                        )
                    } else {
                        format!(
                            "the code this test selects still names CUDA (line {line}: \
                             `{what}`), which {how}; asking about the TPU here would send the \
                             TPU there, so the test goes with that code"
                        )
                    };
                    changed |= demote(diags, &in_test, safe_only, &note);
                    break;
                }
            }
            for (l, safe_only) in [(test_left, false), (left(diags, guard.test, true), true)] {
                let Some(l) = l.filter(|_| !portable) else {
                    continue;
                };
                let in_arms = |d: &Diagnostic| {
                    d.fix.is_some()
                        && matches!(family(d), "DEV" | "STM" | "AMP")
                        && guard.arms.iter().any(|a| a.contains_range(d.range))
                };
                if diags.iter().any(in_arms) {
                    let how = if safe_only {
                        "only an unsafe fix rewrites"
                    } else {
                        "no fix rewrites"
                    };
                    let note = format!(
                        "this code runs when `{}` holds, a test that still asks about CUDA \
                         (`{}`, which {how}); a TPU device here would be chosen on CUDA, so \
                         the test and this code go together",
                        snippet(src, guard.test),
                        snippet(src, l)
                    );
                    changed |= demote(diags, &in_arms, safe_only, &note);
                }
                break;
            }
        }
        let safe_in =
            |d: &Diagnostic, t: TextRange| fixed(d, true) && ported(d) && t.contains_range(d.range);
        changed |= g.ask_once && question::same_question(src, &relevant, diags, &safe_in, &left);
        if !changed {
            break;
        }
    }
    // Helpers called only from code that CUDA tests still select keep CUDA's devices too.
    let held: Vec<(TextRange, TextRange)> = relevant
        .iter()
        .filter_map(|guard| {
            let l = left(diags, guard.test, true)?;
            Some(guard.arms.iter().map(move |a| (*a, l)))
        })
        .flatten()
        .collect();
    for (name, body) in g.helpers.iter().filter(|_| !portable) {
        let calls: Vec<TextRange> = g.calls[name]
            .iter()
            .copied()
            .filter(|at| !body.contains_range(*at))
            .collect();
        let holder = |c: &TextRange| held.iter().find(|(a, _)| a.contains_range(*c));
        let Some((_, test)) = calls.first().and_then(holder) else {
            continue;
        };
        if !calls.iter().all(|c| holder(c).is_some()) {
            continue;
        }
        let in_body = |d: &Diagnostic| {
            fixed(d, true)
                && matches!(family(d), "DEV" | "STM" | "AMP")
                && body.contains_range(d.range)
        };
        let note = format!(
            "`{name}` is called only from code that tests still asking about CUDA select (line \
             {}: `{}`), so its devices are CUDA's too",
            line_of(src, test.start()),
            snippet(src, *test)
        );
        demote(diags, &in_body, true, &note);
    }
    done
}

/// What a test selects for CUDA that is CUDA's choice, not the program's device: the test's
/// fixes become unsafe, with a note saying why.
/// - `torch.float16 if device.type == "cuda" else torch.float32`: half precision chosen for
///   CUDA. A TPU computes in bfloat16 (float16 is emulated, with float16's narrow range).
/// - `if device.type == "cuda": log(training.get_memory_stats(device))`: memory statistics
///   through a library's or the project's own helper, which often supports only the backends
///   it names (TorchTPU reports memory through `torch.accelerator` only).
fn chosen_for_cuda(
    src: &str,
    rules: &RuleSet,
    g: &Guards,
    relevant: &[&Guard],
    diags: &mut [Diagnostic],
) {
    for guard in relevant {
        let Some(selected) = guard.arms.first() else {
            continue;
        };
        let inside =
            |list: &[TextRange]| list.iter().copied().find(|h| selected.contains_range(*h));
        let note = if let Some(half) = inside(&g.fp16) {
            format!(
                "what this test selects for CUDA uses `{}` (line {}); on a TPU the matching \
                 dtype is torch.bfloat16 (float16 is not native there and overflows where \
                 bfloat16 does not): port the dtype choice by hand",
                snippet(src, half),
                line_of(src, half.start())
            )
        } else if let Some(stats) = inside(&g.stats) {
            format!(
                "what this test selects for CUDA gathers memory statistics through `{}` (line \
                 {}), a helper that may support only the backends it names; TorchTPU reports \
                 memory through torch.accelerator: check the helper before enabling it on a TPU",
                snippet(src, stats),
                line_of(src, stats.start())
            )
        } else {
            continue;
        };
        let in_test = |d: &Diagnostic| {
            matches!(rules.rules[d.rule].family.as_str(), "CUD" | "DEV")
                && guard.test.contains_range(d.range)
        };
        demote(diags, &in_test, true, &note);
    }
}

#[cfg(test)]
mod tests {
    use crate::port::rewrite::migrated as migrate;

    /// A stream or event in a branch whose test still asks about CUDA stays, even where the
    /// file has no other CUDA finding to rewrite.
    #[test]
    fn events_in_branches_of_cuda_tests_stay_cuda() {
        let src = "import torch\n\n\ndef timer(provider):\n    if provider == \"CUDAExecutionProvider\":\n        return torch.cuda.Event(enable_timing=True)\n    return None\n";
        assert_eq!(migrate(src, true), src);
        let plain = src.replace(
            "provider == \"CUDAExecutionProvider\"",
            "provider is not None",
        );
        assert!(migrate(&plain, false).contains("torch.Event(device=\"tpu\""));
    }

    /// Half precision chosen for CUDA is not the TPU's dtype: the test's fix is only unsafe.
    #[test]
    fn fp16_chosen_for_cuda_is_unsafe() {
        let src = "import torch\n\n\ndef pick(device):\n    return torch.float16 if device.type == \"cuda\" else torch.float32\n";
        assert_eq!(migrate(src, false), src);
        assert!(migrate(src, true).contains("device.type == \"tpu\""));
        let bf16 = src.replace("float16", "bfloat16");
        assert!(migrate(&bf16, false).contains("device.type == \"tpu\""));
    }

    /// Code selected for CUDA that counts CUDA devices or asks a GPU-named helper stays CUDA's;
    /// a test reading a user's `use_cuda` flag is still the program's device choice.
    #[test]
    fn cuda_variables_and_gpu_helpers_in_branches_keep_the_test() {
        let probe = "import torch\n\n\ndef bf16_ok(device):\n    if device == \"cuda\":\n        return is_torch_bf16_gpu_available()\n    return True\n";
        assert_eq!(migrate(probe, true), probe);
        let count = "def devices(params):\n    cuda_devices = set()\n    for p in params:\n        if p.device.type == \"cuda\":\n            cuda_devices.add(p.device.index)\n    return cuda_devices\n";
        assert_eq!(migrate(count, true), count);
        let flag = "import torch\n\nuse_cuda = True\nif use_cuda and torch.cuda.is_available():\n    device = \"cuda\"\nprint(device)\n";
        assert!(migrate(flag, false).contains("device = \"tpu\""));
    }

    /// A per-device dispatch that rejects the rest keeps CUDA's branch in safe mode.
    #[test]
    fn chains_that_reject_other_devices_are_unsafe() {
        let src = "def config(device):\n    if device == \"cuda\":\n        return Int4Config()\n    elif device == \"cpu\":\n        return CpuConfig()\n    else:\n        assert False, \"Unsupported device\"\n";
        assert_eq!(migrate(src, false), src);
        assert!(migrate(src, true).contains("device == \"tpu\""));
        let open = src.replace(
            "        assert False, \"Unsupported device\"",
            "        return None",
        );
        assert!(migrate(&open, false).contains("device == \"tpu\""));
    }

    /// A helper called only from tests that stay CUDA's keeps its device in safe mode.
    #[test]
    fn helpers_of_cuda_only_tests_keep_their_devices() {
        let src = "import torch\nimport unittest\n\n\nclass T(unittest.TestCase):\n    @unittest.skipUnless(_is_hopper(), \"FA3\")\n    def test_fa3(self):\n        x = make()\n\n\ndef make():\n    return torch.randn(4, device=\"cuda\")\n";
        assert_eq!(migrate(src, false), src);
        let also = src.replace(
            "        x = make()\n",
            "        x = make()\n\n    def test_plain(self):\n        y = make()\n",
        );
        assert!(migrate(&also, false).contains("device=\"tpu\""));
    }

    /// Memory statistics gathered through a helper for CUDA: the test's fix is only unsafe.
    #[test]
    fn memory_stats_helpers_selected_for_cuda_are_unsafe() {
        let src = "def log(self):\n    if self._device.type == \"cuda\":\n        stats = training.get_memory_stats(device=self._device)\n";
        assert_eq!(migrate(src, false), src);
        let torch = format!(
            "import torch\n\n\n{}",
            src.replace(
                "training.get_memory_stats",
                "torch.cuda.max_memory_allocated"
            )
        );
        assert!(migrate(&torch, false).contains("type == \"tpu\""));
    }
}
