//! Code about CUDA (or XLA) itself. A CUD fix there is only unsafe, since asking about the TPU changes
//! what the code means:
//! - code named for CUDA: inside a function or class whose name says CUDA (`class
//!   CUDA_Accelerator`, `class CUDAOpBuilder`, `def is_torch_cuda_available`), or a value
//!   assigned to a name that says CUDA (`cuda_available = ...`, `self.is_cuda = ...`): it
//!   implements or reports CUDA (DeepSpeed's CUDA accelerator would claim a TPU host); an
//!   `assert` whose message names a CUDA-only library (`"CUDA required for APEX optimizers"`);
//!   not a flag whose every read picks the training device (`together/flag.rs`: `use_cuda =
//!   not args.no_cuda and torch.cuda.is_available()`, then `if use_cuda: device = ...`);
//! - code that reads the CUDA toolkit or hardware (`torch.version.cuda`,
//!   `torch.cuda.get_device_capability`, `torch.utils.cpp_extension`, Triton, bitsandbytes) in
//!   the same class (else function), or in the module's own statements (a CUDA-only import):
//!   its `torch.cuda.is_available()` asks whether CUDA kernels can be built or run.

use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor};
use ruff_python_ast::{AnyNodeRef, Expr, Stmt};
use ruff_text_size::Ranged;

use super::scope::target_says_cuda;
use crate::port::rewrite::Checker;
use crate::port::rules::Rule;
use crate::port::semantic::Semantic;

/// Names (and everything under them) that read the CUDA toolkit, the GPU's hardware, or run
/// CUDA-only libraries: no TPU counterpart a test of availability could select.
const CUDA_SPECIFIC: &[&str] = &[
    "torch.version.cuda",
    "torch.version.hip",
    "torch.cuda.get_device_capability",
    "torch.cuda.get_device_properties",
    "torch.cuda.get_arch_list",
    "torch.cuda.get_gencode_flags",
    "torch.cuda.is_bf16_supported",
    "torch.utils.cpp_extension",
    "triton",
    "bitsandbytes",
    "apex",
    "flash_attn",
    "xformers",
    "deep_gemm",
    "transformer_engine",
    "cupy",
    "pycuda",
    "numba.cuda",
];

impl Checker<'_> {
    /// Is this torch_xla finding inside a framework's XLA backend: a class named for XLA that
    /// subclasses a per-backend abstraction (Lightning's `XLAStrategy(DDPStrategy)`,
    /// `XLAEnvironment(ClusterEnvironment)`, `XLAAccelerator(Accelerator)`)? Its launcher,
    /// environment and collectives are ported together or not at all: `xm.rendezvous` →
    /// `dist.barrier()` fails where the XLA launcher made no process group, and a rank read from
    /// torchrun's variables is 0 of 1 under `xmp.spawn`.
    pub(in crate::port::rewrite) fn in_xla_backend_class(&self, rule: &Rule) -> bool {
        let xla_family = matches!(
            rule.family.as_str(),
            "XM" | "XR" | "XLA" | "XMP" | "XPL" | "XMET" | "XU" | "XS" | "XAMP"
        );
        xla_family
            && self.stack.iter().any(|n| {
                matches!(n, AnyNodeRef::StmtClassDef(c)
                    if c.name.to_ascii_lowercase().contains("xla")
                        && c.arguments.as_ref().is_some_and(|a| !a.args.is_empty()))
            })
    }

    /// Is this CUD finding in code about CUDA itself (see the module comment)?
    pub(in crate::port::rewrite) fn in_cuda_named_code(&self, rule: &Rule) -> bool {
        if rule.family != "CUD" {
            return false;
        }
        if self.cuda_scope().is_some() {
            return true;
        }
        let mut innermost_stmt = true;
        let mut scope = None;
        for node in self.stack.iter().rev() {
            let named = match node {
                AnyNodeRef::StmtFunctionDef(f) => {
                    if scope.is_none() {
                        scope = Some(&f.body[..]);
                    }
                    false
                }
                AnyNodeRef::StmtClassDef(c) => {
                    scope = Some(&c.body[..]);
                    false
                }
                AnyNodeRef::StmtAssign(a) if innermost_stmt => {
                    a.targets.iter().any(target_says_cuda) && !self.flag_selects_device_only(a)
                }
                AnyNodeRef::StmtAnnAssign(a) if innermost_stmt => target_says_cuda(&a.target),
                // `assert torch.cuda.is_available(), "CUDA required for APEX optimizers"`
                AnyNodeRef::StmtAssert(a) if innermost_stmt => a.msg.as_ref().is_some_and(|m| {
                    let text = self.text(m.range()).to_ascii_lowercase();
                    CUDA_SPECIFIC
                        .iter()
                        .any(|n| !n.contains('.') && text.contains(&n.replace('_', "")))
                }),
                _ => false,
            };
            if named {
                return true;
            }
            if node.as_stmt_ref().is_some() {
                innermost_stmt = false;
            }
        }
        let module = &self.parsed.module.body[..];
        let mut scan = Specific {
            sem: self.sem,
            found: false,
        };
        for stmt in scope.unwrap_or_default() {
            scan.visit_stmt(stmt);
        }
        // The module's own statements (imports included), not the functions it defines.
        for stmt in module {
            if !matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                scan.visit_stmt(stmt);
            }
        }
        scan.found
    }
}

/// Finds a [`CUDA_SPECIFIC`] name read or imported in some code.
struct Specific<'s> {
    sem: &'s Semantic,
    found: bool,
}

impl<'a> SourceOrderVisitor<'a> for Specific<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if self.found {
            return;
        }
        match stmt {
            Stmt::Import(i) => self.found = i.names.iter().any(|a| specific(&a.name)),
            Stmt::ImportFrom(i) => {
                let m = i.module.as_ref().map(|m| m.as_str()).unwrap_or("");
                self.found =
                    specific(m) || i.names.iter().any(|a| specific(&format!("{m}.{}", a.name)));
            }
            _ => source_order::walk_stmt(self, stmt),
        }
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.found {
            return;
        }
        if matches!(expr, Expr::Name(_) | Expr::Attribute(_))
            && self.sem.qualified_name(expr).is_some_and(|q| specific(&q))
        {
            self.found = true;
            return;
        }
        source_order::walk_expr(self, expr);
    }
}

fn specific(q: &str) -> bool {
    CUDA_SPECIFIC
        .iter()
        .any(|n| q == *n || (q.starts_with(n) && q[n.len()..].starts_with('.')))
}
