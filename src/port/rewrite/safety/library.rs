//! Library modules serve every backend. A file that is not a program (no `if __name__ ==
//! "__main__":` block, no call at module level) is imported by CUDA users too, so two kinds of
//! safe fix there become unsafe, with a note:
//! - removing a CUDA setting (`os.environ["CUBLAS_WORKSPACE_CONFIG"] = ...` next to
//!   `use_deterministic_algorithms(True)`, `cudnn.benchmark = benchmark`): it does nothing on a
//!   TPU but is still needed on CUDA;
//! - a backend name compared (`if backend == "nccl":`): library code computes the backend from a
//!   device map that already yields "tpu_dist", and the comparison selects NCCL-only handling
//!   (barrier `device_ids`, moving CPU tensors to CUDA), which would then apply to the TPU.
//! - a CUDA availability check (`torch.cuda.is_available()`; not in a test module, which is
//!   run rather than imported): `torch.accelerator.is_available()`
//!   is also true on XPU and MPS machines, whose users would then take the CUDA path, and a
//!   library's CUDA path often leans on the CUDA kernels of what it wraps (a quantizer's
//!   kernels, slow-path warnings about them).
//! - rewrites of CUDA's own AMP APIs (`torch.cuda.amp.*`, `get_autocast_gpu_dtype`): a
//!   library's autocast query or scaler serves its CUDA users too (`timm`'s old-PyTorch fallback to `get_autocast_gpu_dtype()`);
//! - torch.compile's backend, `mode=`, Inductor settings and CUDA-graph step markers (CMP):
//!   Inductor also compiles for the host, and the library's CUDA users rely on them;
//! - a device in a function whose CUDA check stays (the check and the device go together),
//!   or in a function that imports an optional package on demand and most likely hands it the
//!   device (`from sinq.sinqlinear_hf import SINQLinear` in `replace_with_sinq_linear(...,
//!   device="cuda:0")`).
//!
//! In a program the same fixes stay safe: the program is what is being ported.
//!
//! Under `--to portable` (the default) the CUDA users of a library keep what they had, so two
//! of these go: CUDA's AMP APIs become the accelerator's (CUDA keeps float16 and its scaler), and
//! a device chosen by a CUDA check (`"cuda" if torch.cuda.is_available() else "cpu"`, or the same
//! as an `if`/`else` of assignments, `torch.device("cpu")` too) becomes the current
//! accelerator's where one is available: the same on CUDA, the TPU on a TPU VM (where the
//! original trains on the CPU of the TPU VM and exits 0), and MPS or XPU on those machines, which
//! the rules' advice says. The CUDA branch may do other work before it picks the device
//! (`args.batch_size *= torch.cuda.device_count()`, seeding) when every finding in it is ported
//! safely or only seeds CUDA: that work then runs on the accelerator as well.

use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{self as ast, AnyNodeRef};
use ruff_text_size::{Ranged, TextRange};

use crate::port::diagnostic::Diagnostic;
use crate::port::rules::{Action, FixClass, RuleSet, Target};

const SETTING_NOTE: &str = "unsafe: this file is a library module (no `__main__` block or \
    module-level call), imported by CUDA users too; the CUDA setting it removes does nothing on a \
    TPU but may still be needed on CUDA (cuBLAS under deterministic algorithms, a user's \
    benchmark option); remove it where the program runs only on a TPU";

const COMPARE_NOTE: &str = "unsafe: a backend name compared in a library module selects \
    per-backend handling (NCCL's barrier `device_ids`, CPU tensors moved to CUDA); the library \
    may already pick \"tpu_dist\" for a TPU, and rewriting the comparison would apply NCCL's \
    handling to it and drop it on CUDA; check what the branch does";

const CHECK_NOTE: &str = "unsafe: a CUDA check in a library module decides for every user \
    of the library: torch.accelerator.is_available() is also true on XPU and MPS machines, \
    whose users would take the CUDA path, and that path may rely on CUDA kernels of what the \
    library wraps; check what the branch does on a TPU";

const AMP_NOTE: &str = "unsafe: in a library module, autocast and its scaler serve CUDA users \
    too (an old-PyTorch fallback, a CUDA branch); asking about the TPU there changes what they \
    get: port it where the program chooses its precision";

const COMPILE_NOTE: &str = "unsafe: in a library module, torch.compile's backend, mode and \
    Inductor settings serve the library's CUDA and CPU users too (Inductor also compiles for \
    the host, and CUDA graphs need their step markers); change them where the program compiles \
    for the TPU";

const WITH_CHECK_NOTE: &str = "unsafe: this library function also asks whether CUDA is \
    available, and that check is not rewritten in safe mode; a TPU device next to it would mix \
    the two: port the function as a whole";

/// Packages whose devices are PyTorch's: the standard library's usual modules, PyTorch and
/// the numeric stack. A function importing anything else on demand hands its device to an
/// optional package.
const PORTABLE_PACKAGES: &[&str] = &[
    "torch",
    "numpy",
    "os",
    "sys",
    "math",
    "json",
    "re",
    "time",
    "typing",
    "collections",
    "functools",
    "itertools",
    "contextlib",
    "dataclasses",
    "pathlib",
    "warnings",
    "logging",
    "inspect",
    "copy",
    "importlib",
    "tempfile",
    "subprocess",
    "threading",
    "multiprocessing",
    "gc",
    "random",
    "packaging",
    "safetensors",
    "huggingface_hub",
    "tqdm",
    "einops",
];

/// The top-level modules of Python's standard library (`sys.stdlib_module_names` of Python
/// 3.11, without the private ones), one per line, sorted: none hands a device to a TPU-unknown
/// package (set AD: `from datetime import datetime` in a training function made its device
/// choice unsafe, and the script trained on a TPU VM's CPU).
const STDLIB: &str = include_str!("stdlib.txt");

fn standard_library(module: &str) -> bool {
    static NAMES: std::sync::LazyLock<Vec<&str>> =
        std::sync::LazyLock::new(|| STDLIB.lines().collect());
    NAMES.binary_search(&module).is_ok()
}

/// The innermost of `functions` around `range`.
fn innermost(functions: &[TextRange], range: TextRange) -> Option<TextRange> {
    functions
        .iter()
        .filter(|f| f.contains_range(range))
        .min_by_key(|f| f.len())
        .copied()
}

/// Comparisons, function bodies, the optional packages imported inside functions (the
/// innermost function, the package), and device choices: a test whose branches pick a device
/// and `"cpu"` (`"cuda" if torch.cuda.is_available() else "cpu"`, or an `if`/`else` assigning
/// them), with the range of the device branch.
#[derive(Default)]
struct Compares<'a> {
    compares: Vec<TextRange>,
    functions: Vec<TextRange>,
    optional: Vec<(TextRange, &'a str)>,
    choices: Vec<(TextRange, TextRange)>,
    /// Device choices whose CUDA branch does other work too: the test, the branch.
    busy: Vec<(TextRange, TextRange)>,
}

/// Is the expression the CPU: the string `"cpu"`, or `torch.device("cpu")`?
fn is_cpu(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::StringLiteral(s) => s.value.to_str() == "cpu",
        ast::Expr::Call(c) => {
            let device = match &*c.func {
                ast::Expr::Attribute(a) => a.attr.as_str() == "device",
                ast::Expr::Name(n) => n.id.as_str() == "device",
                _ => false,
            };
            device
                && c.arguments.keywords.is_empty()
                && matches!(&*c.arguments.args, [a] if is_cpu(a))
        }
        _ => false,
    }
}

/// The value a block assigns (or returns) when it is one plain assignment (or `return`); a
/// block a fix wrote in two forms for an older torch assigns its portable side's value.
fn assigned(body: &[ast::Stmt]) -> Option<&ast::Expr> {
    match body {
        [ast::Stmt::Assign(a)] => Some(&a.value),
        [ast::Stmt::Return(r)] => r.value.as_deref(),
        _ => super::old_torch::portable_side(body).and_then(assigned),
    }
}

/// The name a block last assigns with one plain `name = value` statement, and the value: the
/// device of a branch that also does other work (`setattr(args, ...)`, seeding) before it.
fn last_assigned(body: &[ast::Stmt]) -> Option<(&str, &ast::Expr)> {
    body.iter().rev().find_map(|s| match s {
        ast::Stmt::Assign(a) => match &*a.targets {
            [ast::Expr::Name(n)] => Some((n.id.as_str(), &*a.value)),
            _ => None,
        },
        _ => None,
    })
}

impl<'a> SourceOrderVisitor<'a> for Compares<'a> {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        let root = match node {
            AnyNodeRef::ExprCompare(c) => {
                self.compares.push(c.range());
                None
            }
            AnyNodeRef::ExprIf(e) if is_cpu(&e.orelse) => {
                self.choices.push((e.test.range(), e.body.range()));
                None
            }
            // `if cuda: <other work>; device = torch.device("cuda") else: device = "cpu"`: the
            // branch does more than pick the device; its other statements then run on the
            // accelerator too, so each must be ported safely or harmless there (checked with
            // the findings, `busy`).
            AnyNodeRef::StmtIf(i)
                if i.elif_else_clauses.len() == 1
                    && i.elif_else_clauses[0].test.is_none()
                    && assigned(&i.body).is_none() =>
            {
                if let (Some((name, v)), Some((other, cpu))) = (
                    last_assigned(&i.body),
                    last_assigned(&i.elif_else_clauses[0].body),
                ) && name == other
                    && is_cpu(cpu)
                    && !is_cpu(v)
                {
                    self.choices.push((i.test.range(), v.range()));
                    let body = TextRange::new(
                        i.body[0].range().start(),
                        i.body[i.body.len() - 1].range().end(),
                    );
                    self.busy.push((i.test.range(), body));
                }
                None
            }
            // `if cuda: device = "cuda" else: device = "cpu"`; or a chain that also tests
            // another backend (`elif mps: ...`), which keeps its CUDA test and gets an
            // accelerator branch (together/branch.rs).
            AnyNodeRef::StmtIf(i)
                if (i.elif_else_clauses.len() == 1
                    && i.elif_else_clauses[0].test.is_none()
                    && assigned(&i.elif_else_clauses[0].body).is_some_and(is_cpu))
                    || i.elif_else_clauses.iter().any(|c| c.test.is_some()) =>
            {
                if let Some(v) = assigned(&i.body) {
                    self.choices.push((i.test.range(), v.range()));
                }
                None
            }

            AnyNodeRef::StmtFunctionDef(f) => {
                self.functions.push(f.range());
                None
            }
            AnyNodeRef::StmtImportFrom(i) if i.level == 0 => i.module.as_ref().map(|m| m.as_str()),
            AnyNodeRef::StmtImport(i) => i.names.first().map(|a| a.name.as_str()),
            _ => None,
        };
        if let Some(root) = root.and_then(|m| m.split('.').next())
            && !PORTABLE_PACKAGES.contains(&root)
            && !standard_library(root)
            && let Some(f) = innermost(&self.functions, node.range())
        {
            self.optional.push((f, root));
        }
        TraversalSignal::Traverse
    }
}

/// Does the module define tests (`def test_...`, `class Test...`) at top level?
pub(in crate::port::rewrite) fn is_test_module(body: &[ast::Stmt]) -> bool {
    body.iter().any(|s| match s {
        ast::Stmt::FunctionDef(f) => f.name.starts_with("test_"),
        ast::Stmt::ClassDef(c) => c.name.starts_with("Test") || c.name.ends_with("Test"),
        _ => false,
    })
}

/// Apply the module comment to the findings of a file that is not a program.
pub(in crate::port::rewrite) fn keep_library_settings(
    rules: &RuleSet,
    path: Option<&std::path::Path>,
    body: &[ast::Stmt],
    diags: &mut [Diagnostic],
    to: Target,
) {
    let portable = to == Target::Portable;
    let safe = |d: &Diagnostic| {
        d.fix
            .as_ref()
            .is_some_and(|f| f.applicability == FixClass::Safe)
    };
    let setting = |d: &Diagnostic| {
        let r = &rules.rules[d.rule];
        matches!(r.family.as_str(), "ENV" | "PRC")
            && matches!(r.literal.action, Some(Action::Remove(_)))
    };
    let backend = |d: &Diagnostic| rules.rules[d.rule].family == "DST";
    // A test module is run, not imported: its CUDA checks are the tests' own.
    let tests = is_test_module(body);
    let check = |d: &Diagnostic| !tests && rules.rules[d.rule].name == "cuda-is-available";
    let device = |d: &Diagnostic| rules.rules[d.rule].family == "DEV";
    // CUDA's own AMP APIs (`torch.cuda.amp.*`, `get_autocast_gpu_dtype`); an explicit
    // `torch.autocast("cuda")` (a rule matched `when` its device is CUDA) is a device like
    // DEV001's and stays safe.
    let amp = |d: &Diagnostic| {
        let r = &rules.rules[d.rule];
        r.family == "AMP" && r.when.is_empty() && !(portable && r.portable_differs())
    };
    // torch.compile's backend, mode and Inductor settings (CMP).
    let compile = |d: &Diagnostic| rules.rules[d.rule].family == "CMP";
    if !diags.iter().any(|d| {
        safe(d) && (setting(d) || backend(d) || check(d) || device(d) || amp(d) || compile(d))
    }) {
        return;
    }
    let mut compares = Compares::default();
    for stmt in body {
        source_order::walk_stmt(&mut compares, stmt);
    }
    // A device chosen by the check, ported with it (portable mode only).
    let fixed_device = |r: TextRange| {
        diags
            .iter()
            .any(|d| safe(d) && rules.rules[d.rule].family == "DEV" && r.contains_range(d.range))
    };
    let choices: Vec<TextRange> = if portable {
        compares
            .choices
            .iter()
            .filter(|(test, device)| {
                // A device to port with the check, or one already ported (no finding left).
                (fixed_device(*device) || !diags.iter().any(|d| device.contains_range(d.range)))
                    && !compares.busy.iter().any(|(t, body)| {
                        // The branch's other work runs on the accelerator too: every finding
                        // in it is ported safely, or seeds CUDA (a no-op without CUDA).
                        t == test
                            && diags.iter().any(|d| {
                                body.contains_range(d.range)
                                    && !device.contains_range(d.range)
                                    && !safe(d)
                                    && rules.rules[d.rule].name != "cuda-manual-seed"
                            })
                    })
            })
            .map(|(test, _)| *test)
            .collect()
    } else {
        vec![]
    };
    let chooses = |d: &Diagnostic| choices.iter().any(|t| t.contains_range(d.range));
    for d in diags.iter_mut().filter(|d| safe(d)) {
        let note = if setting(d) {
            SETTING_NOTE
        } else if check(d) && !chooses(d) {
            CHECK_NOTE
        } else if amp(d) {
            AMP_NOTE
        } else if compile(d) {
            COMPILE_NOTE
        } else if backend(d) && compares.compares.iter().any(|c| c.contains_range(d.range)) {
            COMPARE_NOTE
        } else {
            continue;
        };
        d.make_unsafe(note);
    }
    // A function whose CUDA check stays (in safe mode) keeps its devices with it.
    let kept: Vec<TextRange> = diags
        .iter()
        .filter(|d| check(d) && !safe(d))
        .filter_map(|d| innermost(&compares.functions, d.range))
        .collect();
    for d in diags.iter_mut().filter(|d| {
        rules.rules[d.rule].family == "DEV" && kept.iter().any(|f| f.contains_range(d.range))
    }) {
        d.make_unsafe(WITH_CHECK_NOTE);
    }
    // A device in a function that imports an optional package on demand (`from sinq... import
    // SINQLinear`) is most likely handed to it, and whether that package runs on a TPU is not
    // known here. The package of the file itself is not optional.
    for (f, package) in &compares.optional {
        if path.is_some_and(|p| p.iter().any(|c| c == *package)) {
            continue;
        }
        let note = format!(
            "unsafe: this library function imports `{package}` on demand and most likely hands \
             it this device; whether `{package}` runs on a TPU is not known here: check it"
        );
        for d in diags
            .iter_mut()
            .filter(|d| rules.rules[d.rule].family == "DEV" && f.contains_range(d.range))
        {
            d.make_unsafe(&note);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::port::rewrite::migrated as migrate;

    #[test]
    fn the_standard_library_is_no_optional_package() {
        assert!(super::standard_library("datetime") && super::standard_library("argparse"));
        assert!(!super::standard_library("sinq") && !super::standard_library("modal"));
    }

    const LIBRARY: &str = "import os\nimport torch\nimport torch.distributed as dist\n\n\ndef enable_full_determinism():\n    os.environ[\"CUBLAS_WORKSPACE_CONFIG\"] = \":16:8\"\n    torch.use_deterministic_algorithms(True)\n\n\ndef barrier(backend):\n    if backend == \"nccl\":\n        dist.barrier(device_ids=[0])\n\n\ndef validate():\n    if not torch.cuda.is_available():\n        warn(\"slow without a GPU\")\n    return \"cuda:0\"\n\n\ndef replace(model, device=\"cuda:0\"):\n    from sinq.layers import SINQLinear\n\n    return SINQLinear(model, device=device)\n";

    #[test]
    fn library_modules_keep_cuda_settings_and_backend_comparisons_in_safe_mode() {
        assert_eq!(migrate(LIBRARY, false), LIBRARY);
        let unsafe_ = migrate(LIBRARY, true);
        assert!(!unsafe_.contains("CUBLAS_WORKSPACE_CONFIG"), "{unsafe_}");
        assert!(unsafe_.contains("== \"tpu_dist\""), "{unsafe_}");
        assert!(
            unsafe_.contains("torch.accelerator.is_available()"),
            "{unsafe_}"
        );
    }

    #[test]
    fn programs_are_ported() {
        let program =
            format!("{LIBRARY}\n\nif __name__ == \"__main__\":\n    enable_full_determinism()\n");
        let out = migrate(&program, false);
        assert!(!out.contains("CUBLAS_WORKSPACE_CONFIG"), "{out}");
        assert!(out.contains("== \"tpu_dist\""), "{out}");
        assert!(out.contains("torch.accelerator.is_available()"), "{out}");
    }
}
