//! Match rules against one parsed module and turn each match into a diagnostic with a fix.
//!
//! The walk keeps the chain of ancestors, so a string literal knows where it sits (the `device=`
//! keyword, the first argument of `torch.device`, the value assigned to `args.device`, the other
//! side of `x.device.type == ...`): these *roles* are what position classes match. Per node, the
//! first rule in load order wins; fallback rules (`torch.cuda.*`, strings `in = ["*"]`) only fire
//! where no other rule did.
//!
//! This file holds the walk and the [`Checker`] state; each job has its own file, each an
//! `impl Checker` block: `names.rs` (calls, references, methods, attributes, keywords),
//! `called.rs` (mapped functions named without a call), `strings.rs` (string literals and
//! f-strings), `roles.rs` (where a string sits), `fix.rs` (a match into a diagnostic and its
//! fix), `bind.rs` (arguments to parameters), `args.rs` (the new argument list), `remove.rs`
//! (statement removal, duplicates), `assign.rs` (assignments rewritten by their value),
//! `unwrap.rs` (`with` unwrapping), `suppress.rs` (`# tpuport: ignore`), `flow.rs` (a string
//! assigned to a name takes the roles of the name's uses), `probe.rs` (calls made to see whether
//! they raise). What keeps a fix off or makes it unsafe: `guard.rs` (tests that guard CUDA-only
//! code keep their meaning; `cuda_only.rs` says what is CUDA-only), `foreign.rs` (device-like
//! strings that are not this program's devices), `scope.rs` (device findings inside code named
//! for CUDA), `named.rs` (CUD fixes in code about CUDA itself are unsafe), `together.rs` (a CUDA
//! test and the code it selects are ported together or not at all), `library.rs` (CUDA
//! settings, backend comparisons and CUDA checks in library modules), `runtimes.rs` (devices
//! of modules that drive ONNX Runtime, ExecuTorch and the like), `params.rs` (test parameters
//! fed by values computed elsewhere), `comments.rs` (code a
//! comment ties to CUDA or NCCL), `group.rs` (a fix that needs a call made first, such as a
//! barrier's process group, on every path of the program to it, or another fix made too, such
//! as the port of the PyTorch/XLA device that a step rewrite needs) and `own.rs` (attributes the program defines itself, such as a
//! class's own `self.is_cuda`, are not PyTorch's).

mod args;
mod assign;
mod bind;
mod called;
mod extend;
mod fix;
mod flow;
mod lints;
mod names;
mod portable;
mod remove;
mod roles;
pub mod safety;
mod strings;
mod suppress;
mod unwrap;

use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};

/// Forget what the rewrite learnt from files beside the code (pins, configs) in an earlier run
/// (`migrate --watch` runs again after a change).
pub fn forget() {
    safety::forget();
    lints::forget_configs();
    lints::forget_device_configs();
}

use ruff_python_ast::visitor::source_order::{SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{self as ast, AnyNodeRef, Expr, ExprContext};
use ruff_text_size::TextRange;

use super::diagnostic::Diagnostic;
use super::facts::{self, FileFacts};
use super::index::RuleIndex;
use super::parse::Parsed;
use super::rules::{Rule, RuleSet, Target, Variant};
use super::semantic::Semantic;

pub struct Checker<'a> {
    src: &'a str,
    parsed: &'a Parsed,
    sem: &'a Semantic,
    rules: &'a RuleSet,
    index: &'a RuleIndex,
    active: &'a [bool],
    facts: &'a FileFacts,
    stack: Vec<AnyNodeRef<'a>>,
    diags: Vec<Diagnostic>,
    fallbacks: Vec<Diagnostic>,
    import_names: rustc_hash::FxHashSet<&'a str>,
    /// The module's CUDA-only functions, found once when a guard first asks (`guard.rs`).
    cuda_defs: OnceCell<HashMap<String, String>>,
    /// [`Self::cuda_defs`] and the names the module's own top level assigns from CUDA-only code
    /// (`safety::guard`: the same for every guard of the file).
    module_kernels: OnceCell<HashMap<String, String>>,
    /// The attribute names of attribute rules that the program defines itself (`own.rs`).
    own_attributes: OnceCell<HashMap<String, safety::own::OwnAttribute>>,
    /// The classes with their own `cuda()` in this file and the modules it imports
    /// (`safety::cuda_methods`), found once when a `.cuda()` fix first asks.
    cuda_classes: OnceCell<Vec<safety::cuda_methods::CudaClass>>,
    /// Which machine the fixes write for (`--to`).
    target: Target,
    /// Fixes that extend a CUDA test to the TPU, with the code the test selects
    /// (`portable.rs`): kept off in `finish` where that code is not right on a TPU.
    extensions: Vec<extend::Extension>,
    /// CUDA checks whose failing branch raises an error naming only a GPU: kept or lifted with
    /// the whole program in view (`safety/requirement.rs`).
    gpu_requirements: Vec<TextRange>,
}

/// Run the rules over one parsed module. `facts` describe the file as the user gave it (not
/// the partly rewritten text of a later round), so a fix's class does not change between rounds.
pub fn run(
    src: &str,
    parsed: &Parsed,
    sem: &Semantic,
    rules: &RuleSet,
    index: &RuleIndex,
    active: &[bool],
    facts: &FileFacts,
) -> Vec<Diagnostic> {
    let mut c = Checker {
        src,
        parsed,
        sem,
        rules,
        index,
        active,
        facts,
        stack: vec![],
        diags: vec![],
        fallbacks: vec![],
        import_names: sem.import_names(),
        cuda_defs: OnceCell::new(),
        module_kernels: OnceCell::new(),
        own_attributes: OnceCell::new(),
        cuda_classes: OnceCell::new(),
        target: facts.to,
        extensions: vec![],
        gpu_requirements: vec![],
    };
    for stmt in &parsed.module.body {
        c.visit_stmt(stmt);
    }
    c.run_lints();
    let mut diags = c.finish();
    if let Some(name) = facts.framework_own {
        facts::demote_in_framework(&mut diags, name);
    }
    diags
}
impl<'a> SourceOrderVisitor<'a> for Checker<'a> {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        let found = (self.diags.len(), self.fallbacks.len());
        match node {
            AnyNodeRef::StmtImport(_) | AnyNodeRef::StmtImportFrom(_) => {
                return TraversalSignal::Skip;
            }
            AnyNodeRef::ExprCall(call) => self.check_call(call),
            AnyNodeRef::ExprAttribute(attr) => {
                if attr.ctx != ExprContext::Del {
                    self.check_reference(node);
                }
                if attr.ctx == ExprContext::Load {
                    self.check_value_attribute(attr);
                }
            }
            AnyNodeRef::ExprName(name)
                if name.ctx == ExprContext::Load
                    && self.import_names.contains(name.id.as_str()) =>
            {
                self.check_reference(node);
            }
            AnyNodeRef::ExprStringLiteral(s) => self.check_string_literal(s),
            AnyNodeRef::ExprFString(f) => self.check_fstring(f),
            _ => {}
        }
        if found != (self.diags.len(), self.fallbacks.len()) {
            self.keep_cuda_guards(found.0, found.1);
            self.keep_cuda_only_devices(found.0);
            self.keep_cuda_scopes(found.0);
            self.keep_cuda_only_file(found.0, found.1);
        }
        self.stack.push(node);
        TraversalSignal::Traverse
    }

    fn leave_node(&mut self, node: AnyNodeRef<'a>) {
        if !matches!(
            node,
            AnyNodeRef::StmtImport(_) | AnyNodeRef::StmtImportFrom(_)
        ) {
            self.stack.pop();
        }
    }
}

/// What a rule matched, with what the fix needs.
struct Match<'a> {
    rule: usize,
    /// The node the diagnostic points at.
    range: TextRange,
    qualified: Option<String>,
    call: Option<&'a ast::ExprCall>,
    /// For method/attribute matches: the receiver expression.
    receiver: Option<&'a Expr>,
    /// For reference matches: the reference expression.
    reference: Option<TextRange>,
    keyword: Option<&'a ast::Keyword>,
}

impl<'a> Checker<'a> {
    fn finish(mut self) -> Vec<Diagnostic> {
        let claimed: Vec<TextRange> = self.diags.iter().map(|d| d.range).collect();
        let mut seen: HashSet<TextRange> = HashSet::new();
        for f in std::mem::take(&mut self.fallbacks) {
            let overlaps = claimed
                .iter()
                .any(|c| c.contains_range(f.range) || f.range.contains_range(*c));
            if !overlaps && seen.insert(f.range) {
                self.diags.push(f);
            }
        }
        // A device string inside an autocast or GradScaler call an AMP rule rewrites whole is
        // that rule's: DEV001 alone would keep CUDA's float16 under the TPU's name.
        let amp: Vec<TextRange> = self
            .diags
            .iter()
            .filter(|d| d.fix.is_some() && self.rule(d.rule).family == "AMP")
            .map(|d| d.range)
            .collect();
        if !amp.is_empty() {
            let rules = self.rules;
            self.diags.retain(|d| {
                rules.rules[d.rule].family != "DEV"
                    || !amp.iter().any(|a| a.contains_range(d.range))
            });
        }
        // The safety stage's passes over the whole module (safety/mod.rs).
        self.module_passes();
        self.diags.sort_by_key(|d| (d.range.start(), d.rule));
        let mut diags = std::mem::take(&mut self.diags);
        diags.retain(|d| !self.suppressed(d));
        diags
    }

    /// How this module imports Triton at top level (`"Triton"`, or the project module through
    /// which it does), when it has device or stream fixes for that to matter.
    fn triton_import(&self) -> Option<String> {
        let devices = |d: &Diagnostic| {
            d.fix.is_some() && matches!(self.rule(d.rule).family.as_str(), "DEV" | "STM")
        };
        if !self.diags.iter().any(devices) {
            return None;
        }
        self.cuda_only_import()
    }

    /// How this module imports Triton or another CUDA-only library at top level, itself or
    /// through a project module it imports.
    fn cuda_only_import(&self) -> Option<String> {
        use crate::port::neighbours::{HOPS, imports_triton_at_top, triton_import_in};
        // The portable port also reads optional imports (`try: import triton`) and packages'
        // re-exports: a Triton path taken wherever Triton imports is taken on a TPU VM too.
        let optional = self.target == Target::Portable;
        if imports_triton_at_top(self.src, optional) {
            return Some("Triton".into());
        }
        // Another CUDA-only library (`import flash_attn`), imported unconditionally; in a test
        // module, a CUDA-only PyTorch name too (`from torch.nn.attention import
        // activate_flash_attention_impl`: the module tests FA3). A program importing
        // `torch.utils.cpp_extension` for one op keeps its devices.
        let tests = safety::library::is_test_module(&self.parsed.module.body);
        for stmt in &self.parsed.module.body {
            let names: Vec<String> = match stmt {
                ast::Stmt::Import(i) => i.names.iter().map(|a| a.name.to_string()).collect(),
                // The module itself, or a PyTorch name: a project's `skip_if_no_cuda` is not
                // a compiled extension.
                ast::Stmt::ImportFrom(i) if i.level == 0 => {
                    let module = i.module.as_ref().map(|m| m.as_str()).unwrap_or("");
                    let torch = module == "torch" || module.starts_with("torch.");
                    if torch && !tests {
                        continue;
                    }
                    let names = i.names.iter().filter(|_| torch);
                    std::iter::once(module.to_string())
                        .chain(names.map(|a| format!("{module}.{}", a.name)))
                        .collect()
                }
                _ => continue,
            };
            // vLLM drives its own devices (`LLM(..., device="cuda")`: foreign.rs); the rest of
            // a module that imports it is the program's.
            let vllm = |n: &&String| n.as_str() == "vllm" || n.starts_with("vllm.");
            if let Some(what) = names
                .iter()
                .filter(|n| !vllm(n))
                .find_map(|n| safety::cuda_only::cuda_only_name(n))
            {
                return Some(format!("{what}, which is CUDA-only,"));
            }
        }
        let path = self.facts.path.as_deref()?;
        let via = triton_import_in(path, self.src, HOPS, optional)?;
        let name = via.file_stem().map(|s| s.to_string_lossy().into_owned());
        Some(format!(
            "`{}` (which imports Triton)",
            name.unwrap_or_default()
        ))
    }

    fn rule(&self, i: usize) -> &'a Rule {
        &self.rules.rules[i]
    }

    /// The rule's fix in this run's mode (`--to`).
    fn v<'r>(&self, rule: &'r Rule) -> &'r Variant {
        rule.variant(self.target)
    }

    fn is_active(&self, i: usize) -> bool {
        self.active[i] && facts::applies_here(self.rule(i), self.facts)
    }

    fn text(&self, r: TextRange) -> &'a str {
        &self.src[r]
    }

    /// Cheap filter before resolving: only a chain rooted in a name some import binds (in any
    /// scope) can resolve to a qualified name.
    fn rooted_in_import(&self, expr: &Expr) -> bool {
        let mut e = expr;
        loop {
            match e {
                Expr::Attribute(a) => e = &a.value,
                Expr::Name(n) => return self.import_names.contains(n.id.as_str()),
                _ => return false,
            }
        }
    }

    fn qualified(&self, expr: &Expr) -> Option<String> {
        if !self.rooted_in_import(expr) {
            return None;
        }
        let q = self.sem.qualified_name(expr)?;
        let root = q.split('.').next().unwrap_or("");
        self.index.roots.contains(root).then_some(q)
    }
}

/// The text `migrate --to tpu` leaves (with every built-in rule), for the unit tests of the
/// checks.
#[cfg(test)]
pub(super) fn migrated(src: &str, unsafe_fixes: bool) -> String {
    use crate::port::{RuleIndex, RuleSet, Settings, migrate_source};
    let rules = RuleSet::builtin();
    let index = RuleIndex::new(&rules);
    let settings = Settings {
        unsafe_fixes,
        to: Target::Tpu,
        min_torch: None,
    };
    let out = migrate_source(src, &rules, &index, settings);
    out.output.unwrap_or_else(|| src.to_string())
}
