//! Lints that are analyses of the syntax tree rather than matches of one name (`match.lint` in a
//! rule file): the rule file gives the id, message and advice; these find the places.
//!
//! `loops.rs`: training loops (a `for`/`while` whose body calls `.backward()`) and the host
//! syncs in them, shuffled loaders that keep a partial last batch; `compiled.rs`: which functions
//! `torch.compile` traces, and the data-dependent shapes, host reads and rank branches in them;
//! `model.rs`: convolutional networks without channels-last, float16 casts, padding to the
//! longest sequence; `programs.rs` and `precision.rs`: advice about a whole program (an entry
//! script and the project modules it imports), given once on the entry script, or once per
//! package; `ties.rs`: weights two modules share, moved to the TPU; `ddp.rs`: DDP's device
//! index; `extension.rs`: imports of a CUDA extension the project compiles; `checkpoint.rs`:
//! checkpoints loaded into a module with no `map_location`, safetensors loads onto a device;
//! `configs.rs`: Lightning Trainers a Hydra config builds; `unmoved.rs`: models an entry script
//! never moves in a program that uses CUDA. Most findings are manual: the advice says what to change.

mod checkpoint;
mod compiled;
mod config_device;
mod configs;
mod ddp;
mod extension;
mod installed;
mod loops;
mod model;
mod precision;
mod programs;
mod ties;
mod unmoved;

use ruff_python_ast::visitor::source_order::{SourceOrderVisitor, TraversalSignal, walk_expr};
use ruff_python_ast::{self as ast, AnyNodeRef, Expr, Stmt};
use ruff_text_size::TextRange;

use super::Checker;
use crate::port::diagnostic::Diagnostic;
use crate::port::rules::{Lint, Matcher};

pub(super) use config_device::forget as forget_device_configs;
pub(super) use configs::forget as forget_configs;

/// One place a lint found, with the words that fill the rule message's `{detail}`, and the fix
/// where the lint has one (most findings are manual).
pub(super) struct Found {
    pub range: TextRange,
    pub detail: String,
    pub fix: Option<crate::port::edit::Fix>,
}

impl Found {
    fn at(range: TextRange) -> Found {
        Found::with(range, String::new())
    }

    /// A manual finding at `range` whose message's `{detail}` is `detail`.
    fn with(range: TextRange, detail: String) -> Found {
        Found {
            range,
            detail,
            fix: None,
        }
    }
}

impl<'a> Checker<'a> {
    /// Run every active lint rule over the module and add its findings.
    pub(super) fn run_lints(&mut self) {
        let ids: Vec<usize> = self
            .index
            .lints
            .iter()
            .copied()
            .filter(|i| self.is_active(*i))
            .collect();
        if ids.is_empty() {
            return;
        }
        let mut compiled: Option<compiled::Compiled<'a>> = None;
        let mut training: Option<loops::Training<'a>> = None;
        for i in ids {
            let Matcher::Lint(lint) = self.rule(i).matcher else {
                continue;
            };
            let found = match lint {
                Lint::HostSyncInLoop => {
                    let t = training.get_or_insert_with(|| loops::Training::of(self));
                    t.host_syncs(self)
                }
                Lint::PartialLastBatch => {
                    let t = training.get_or_insert_with(|| loops::Training::of(self));
                    t.partial_batches(self)
                }
                Lint::ConvWithoutChannelsLast => self.conv_nets_of_program(),
                Lint::Fp32Training => {
                    let t = training.get_or_insert_with(|| loops::Training::of(self));
                    self.fp32_training_of_program(t)
                }
                Lint::SharedWeightsMove => self.shared_weights_moves(),
                Lint::OptimizerBeforeMove => self.optimizer_before_move(),
                Lint::DdpDeviceIndex => self.ddp_device_indices(),
                Lint::CudaExtensionImport => self.cuda_extension_imports(),
                Lint::StateLoadWithoutMapLocation => self.state_loads_without_map_location(),
                Lint::SafetensorsDevice => self.safetensors_devices(),
                Lint::TrainerFromConfig => self.trainers_from_configs(),
                Lint::ModelNeverMoved => self.models_never_moved(),
                Lint::DeviceFromConfig => self.devices_from_configs(),
                Lint::InstalledProjectPackage => self.installed_project_packages(),
                // Judged over the whole run, not per file (`port::program`, the driver).
                Lint::ProgramBlocked => vec![],
                Lint::HalfPrecision => model::half_casts(self),
                // Padding matters where batches are fed to a model: in programs and in modules
                // that train (a library pipeline pads prompts to check their length).
                Lint::VariablePadding => {
                    let t = training.get_or_insert_with(|| loops::Training::of(self));
                    if self.facts.program || t.trains() {
                        model::variable_padding(self)
                    } else {
                        vec![]
                    }
                }
                Lint::NonzeroInCompiled
                | Lint::MaskReadInCompiled
                | Lint::UniqueInCompiled
                | Lint::HostValueInCompiled
                | Lint::RankBranchInCompiled => {
                    let c = compiled.get_or_insert_with(|| compiled::Compiled::of(self));
                    c.find(self, lint)
                }
            };
            let rule = self.rule(i);
            for f in found {
                let message = self
                    .message(rule, None, f.range)
                    .replace("{detail}", &f.detail);
                self.diags.push(Diagnostic {
                    rule: i,
                    range: f.range,
                    message,
                    fix: f.fix,
                    note: None,
                });
            }
        }
    }

    /// The qualified name of a call's callee (`torch.nonzero`), resolved through imports. Only
    /// chains rooted in an imported name can resolve, so the rest costs one set lookup.
    fn callee(&self, call: &ast::ExprCall) -> Option<String> {
        if !self.rooted_in_import(&call.func) {
            return None;
        }
        self.sem.qualified_name(&call.func)
    }

    /// [`Checker::callee`] for calls whose last name is one of `last` (checked first, cheaply).
    fn callee_named(&self, call: &ast::ExprCall, last: &[&str]) -> Option<String> {
        let name = match call.func.as_ref() {
            Expr::Attribute(a) => a.attr.as_str(),
            Expr::Name(n) => n.id.as_str(),
            _ => return None,
        };
        if !last.contains(&name) {
            return None;
        }
        self.callee(call)
    }

    /// `x.name(...)` on a value (not on an imported module): the method's name.
    fn method_name<'b>(&self, call: &'b ast::ExprCall) -> Option<&'b str> {
        match call.func.as_ref() {
            Expr::Attribute(a) if !self.sem.root_is_import(&a.value) => Some(a.attr.as_str()),
            _ => None,
        }
    }
}

/// Visit every node under `body` in source order with its ancestors (from `body`'s level down).
/// Nested functions, classes and lambdas are visited but not entered unless `nested`.
pub(super) fn walk<'a>(
    body: &'a [Stmt],
    nested: bool,
    f: &mut dyn FnMut(AnyNodeRef<'a>, &[AnyNodeRef<'a>]),
) {
    struct W<'a, 'f> {
        stack: Vec<AnyNodeRef<'a>>,
        nested: bool,
        f: &'f mut dyn FnMut(AnyNodeRef<'a>, &[AnyNodeRef<'a>]),
    }
    fn closed(node: AnyNodeRef) -> bool {
        matches!(
            node,
            AnyNodeRef::StmtFunctionDef(_)
                | AnyNodeRef::StmtClassDef(_)
                | AnyNodeRef::ExprLambda(_)
        )
    }
    impl<'a> SourceOrderVisitor<'a> for W<'a, '_> {
        fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
            (self.f)(node, &self.stack);
            if !self.nested && closed(node) {
                return TraversalSignal::Skip;
            }
            self.stack.push(node);
            TraversalSignal::Traverse
        }
        fn leave_node(&mut self, node: AnyNodeRef<'a>) {
            if self.nested || !closed(node) {
                self.stack.pop();
            }
        }
    }
    let mut w = W {
        stack: vec![],
        nested,
        f,
    };
    for stmt in body {
        w.visit_stmt(stmt);
    }
}

/// Does any expression within `expr` (itself included) satisfy `pred`?
pub(super) fn any_in(expr: &Expr, pred: &mut dyn FnMut(&Expr) -> bool) -> bool {
    struct A<'p> {
        pred: &'p mut dyn FnMut(&Expr) -> bool,
        hit: bool,
    }
    impl<'a> SourceOrderVisitor<'a> for A<'_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if self.hit {
                return;
            }
            if (self.pred)(expr) {
                self.hit = true;
                return;
            }
            walk_expr(self, expr);
        }
    }
    let mut a = A { pred, hit: false };
    a.visit_expr(expr);
    a.hit
}

#[cfg(test)]
mod tests {
    use crate::port::{RuleIndex, RuleSet, Settings, migrate_source};

    /// The ids of the findings on `src` (every built-in rule).
    fn ids(src: &str) -> Vec<String> {
        let rules = RuleSet::builtin();
        let index = RuleIndex::new(&rules);
        let out = migrate_source(src, &rules, &index, Settings::default());
        out.diagnostics
            .iter()
            .map(|d| rules.rules[d.rule].id.clone())
            .collect()
    }

    #[test]
    fn one_patch_convolution_is_not_a_cnn() {
        let vit = "import torch.nn as nn\n\nclass PatchEmbed(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.proj = nn.Conv2d(3, 768, kernel_size=16, stride=16)\n";
        assert!(!ids(vit).contains(&"PERF001".to_string()));
        let cnn = vit.replace(
            "stride=16)\n",
            "stride=16)\n        self.conv = nn.Conv2d(768, 768, 3)\n",
        );
        assert!(ids(&cnn).contains(&"PERF001".to_string()));
        let with_cl = format!("{cnn}\nmodel = model.to(memory_format=torch.channels_last)\n");
        assert!(!ids(&with_cl).contains(&"PERF001".to_string()));
    }

    #[test]
    fn host_syncs_count_only_in_loops_that_train() {
        let train = "for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n    opt.step()\n    log(loss.item())\n";
        assert!(ids(train).contains(&"PERF002".to_string()));
        let guidance = train.replace("    opt.step()\n", "");
        assert!(!ids(&guidance).contains(&"PERF002".to_string()));
        let periodic = train.replace(
            "    log(loss.item())\n",
            "    if step % 10 == 0:\n        log(loss.item())\n",
        );
        assert!(!ids(&periodic).contains(&"PERF002".to_string()));
    }

    #[test]
    fn compiled_code_is_found_through_calls_and_models() {
        let src = "import torch\n\ndef helper(x):\n    return torch.nonzero(x)\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return helper(x)\n\nmodel = Net()\nmodel = torch.compile(model)\n\ndef eager(x):\n    return torch.nonzero(x)\n";
        let found = ids(src);
        assert_eq!(
            found.iter().filter(|i| *i == "DYN001").count(),
            1,
            "{found:?}"
        );
    }
}
