//! DEV019: `model.load_state_dict(torch.load(path))`, a checkpoint loaded with no
//! `map_location`. torch restores each tensor onto the device it was saved from, so a checkpoint
//! saved on CUDA holds `cuda:0` storages, and on a TPU VM (no CUDA) `torch.load` raises
//! "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False"
//! before the state reaches the model: the program ports, and its first resume or evaluation
//! fails (set E's LeNet5 `test()`, whose shipped checkpoints are all `cuda:0`).
//!
//! Where the loaded object, or an entry of it (`torch.load(path)["state_dict"]`: the rest is
//! dropped; set N's Lightning inference script), goes straight into `load_state_dict` (no
//! `assign=`), the fix writes
//! `map_location="cpu"`: `load_state_dict` copies each value into the parameter or buffer that
//! already exists, on that one's device, so on CUDA the module ends with the same values on the
//! same device as before (an optimizer's `load_state_dict` casts its state to its parameters'
//! devices too), and on a TPU the load no longer needs CUDA. A checkpoint kept in a variable is
//! not rewritten: its other entries may be used as they were loaded; in a module that uses
//! CUDA, or that an entry script using CUDA imports, it is reported (no fix), unless a CUDA
//! test selects the load (set T: a decoder's `saved = torch.load(opt.start_from)` left five
//! evaluation scripts half-ported, unreported; set W: a loader module naming no device).
//! Where the program defines
//! its own `load_state_dict` (this module, or a project module it imports: an EMA helper may
//! keep the loaded tensors as they are), the fix is unsafe.
//!
//! LIB015: `safetensors.torch.load_file(path, device=...)` and `safe_open(path, framework,
//! device=...)` with a device that is not the literal "cpu". safetensors checks the device
//! string against its own list (cpu, cuda, mps, npu, xpu, xla, ...), so the device a port
//! chooses on a TPU VM raises `device tpu is invalid` (set F's review). Under the portable port,
//! `load_file(path, device=X)` with X a plain value (a name, an attribute, `str(name)`) gets a
//! safe fix that keeps the call where the device is not a TPU and, on a TPU, loads onto the CPU
//! and moves each tensor to X:
//! `load_file(p, device=X) if str(X).split(":")[0] != "tpu" else {k: v.to(X) for k, v in
//! load_file(p).items()}` (X may be a string, a torch.device, an int or None, a parameter's
//! default that safetensors takes and `torch.device(None)` would not). A CUDA machine runs the
//! very call it ran; a TPU gets the same dict on its device. `safe_open` (a handle whose tensors are read later) and other devices are
//! reported, for the program to be named blocked.

use ruff_python_ast::{AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextSize};

use super::super::Checker;
use super::{Found, walk};
use crate::port::edit::{Edit, Fix};
use crate::port::rules::FixClass;

impl Checker<'_> {
    /// DEV019's findings (see the module doc).
    pub(super) fn state_loads_without_map_location(&self) -> Vec<Found> {
        let mut out = self.whole_loads_moved();
        // The rule's needles: a file may be active for the whole-object form alone (a file's
        // load_state_dict calls that break the line before torch.load are not read).
        let names = self.torch_load_names();
        if !names
            .iter()
            .any(|n| self.src.contains(&format!("load_state_dict({n}(")))
        {
            return out;
        }
        let mut own_loader: Option<bool> = None;
        walk(&self.parsed.module.body, true, &mut |node, _| {
            let AnyNodeRef::ExprCall(outer) = node else {
                return;
            };
            let Expr::Attribute(a) = outer.func.as_ref() else {
                return;
            };
            if a.attr.as_str() != "load_state_dict"
                || outer.arguments.find_keyword("assign").is_some()
                || outer.arguments.keywords.iter().any(|k| k.arg.is_none())
            {
                return;
            }
            // `torch.load(path)`, or an entry of it: `torch.load(path)["state_dict"]`.
            let mut first = outer.arguments.args.first();
            while let Some(Expr::Subscript(s)) = first
                && s.slice.is_string_literal_expr()
            {
                first = Some(s.value.as_ref());
            }
            let Some(Expr::Call(load)) = first else {
                return;
            };
            let Some((at, comma)) = self.plain_torch_load(load) else {
                return;
            };
            let own = *own_loader.get_or_insert_with(|| self.defines_load_state_dict());
            out.push(Found {
                range: load.range(),
                detail: String::new(),
                fix: Some(Fix {
                    edits: vec![Edit::insert(at, format!("{comma}map_location=\"cpu\""))],
                    applicability: if own {
                        FixClass::Unsafe
                    } else {
                        FixClass::Safe
                    },
                    imports: vec![],
                    exclusive: None,
                    why_unsafe: own.then(|| {
                        "this program defines its own load_state_dict, which may keep the loaded \
                         tensors where they were loaded (on the CPU) instead of copying them"
                            .to_string()
                    }),
                }),
            });
        });
        out
    }

    /// Is `name`, read where `x` is assigned (at `at`), a device bound before: in the scope of
    /// `x` (every binding there before `at`), or else at module level before `at`, each time
    /// to `torch.device(...)`, a string, or the accelerator? A local assigned later raises
    /// UnboundLocalError; a parameter or an index (`device_id = 0`) is no map_location.
    fn device_bound_before(&self, name: &str, x: &ruff_python_ast::ExprName, at: TextSize) -> bool {
        let bindings = &self.sem.bindings;
        let Some(scope) = bindings
            .iter()
            .find(|b| b.range == x.range)
            .map(|b| b.scope)
        else {
            return false;
        };
        let in_scope = |sc| {
            bindings
                .iter()
                .filter(move |b| b.name == name && b.scope == sc)
        };
        let mut found: Vec<_> = in_scope(scope).collect();
        if found.is_empty() {
            let module = (0..self.sem.scopes.len()).find(|i| self.sem.scopes[*i].parent.is_none());
            found = module.map_or(vec![], |m| in_scope(m).collect());
        }
        let device_value = |b: &crate::port::semantic::Binding| {
            let rest = self.src[b.range.end().to_usize()..].trim_start_matches([' ', '\t']);
            let Some(value) = rest.strip_prefix('=').filter(|v| !v.starts_with('=')) else {
                return false;
            };
            let value = value.trim_start();
            value.starts_with("torch.device(")
                || value.starts_with(['"', '\''])
                || value.contains("current_accelerator")
        };
        !found.is_empty() && found.iter().all(|b| b.range.end() <= at && device_value(b))
    }

    /// How the module spells `torch.load`: `torch.load`, `th.load` after `import torch as th`,
    /// `load` after `from torch import load` (set AC: a model zoo's `load(state_dict)` restored
    /// CUDA weights on a TPU VM unreported).
    fn torch_load_names(&self) -> Vec<String> {
        let mut names = vec!["torch.load".to_string()];
        for (name, qualified) in self.sem.module_imports() {
            let spelled = match qualified {
                "torch.load" => name.to_string(),
                "torch" => format!("{name}.load"),
                _ => continue,
            };
            if !names.contains(&spelled) {
                names.push(spelled);
            }
        }
        names
    }

    /// `torch.load(path)` with no map_location: where the keyword goes, and what goes before it
    /// (", ", or a space after a trailing comma).
    fn plain_torch_load(&self, load: &ruff_python_ast::ExprCall) -> Option<(TextSize, &str)> {
        let args = &load.arguments;
        let plain = args.args.len() == 1
            && !args.args.iter().any(|e| e.is_starred_expr())
            && args.keywords.iter().all(|k| {
                k.arg
                    .as_ref()
                    .is_some_and(|n| !matches!(n.as_str(), "map_location" | "f"))
            });
        if !plain || self.callee(load).is_none_or(|q| q != "torch.load") {
            return None;
        }
        // A call cut off at the end of a file that does not parse has no `)` to write before.
        if !self.text(args.range()).ends_with(')') {
            return None;
        }
        let close = args.end() - TextSize::from(1);
        let inner = self.text(ruff_text_size::TextRange::new(args.start(), close));
        // A comment after the last argument: the keyword goes right after the argument.
        let last = args.iter_source_order().last().map(|a| a.range().end());
        if let Some(end) = last
            && self
                .text(ruff_text_size::TextRange::new(end, close))
                .contains('#')
        {
            return Some((end, ", "));
        }
        let comma = if inner.trim_end().ends_with(',') {
            " "
        } else {
            ", "
        };
        Some((args.start() + TextSize::of(inner.trim_end()), comma))
    }

    /// `model = torch.load(path)` followed (within the next three statements of its block) by
    /// `model.to(D)` or `model = model.to(D)`, where `D` is a name or attribute bound before the
    /// load: the fix loads onto `D` (map_location=D). On a CUDA machine `D` is the GPU the
    /// original moved everything to (its `"cuda"` restores to the current GPU, where a
    /// checkpoint saved on one GPU was); on a TPU VM the load needs no CUDA (set P: a
    /// translation script loading a whole pickled Transformer trained on a GPU).
    fn whole_loads_moved(&self) -> Vec<Found> {
        let mut out = vec![];
        let names = self.torch_load_names();
        if !names.iter().any(|n| {
            self.src.contains(&format!("= {n}(")) || self.src.contains(&format!("return {n}("))
        }) {
            return out;
        }
        walk(&self.parsed.module.body, true, &mut |node, stack| {
            // Not rewritten: reported where the module uses CUDA (its checkpoints are likely
            // saved there), unless a CUDA test selects this load (its `else` loads elsewhere:
            // set T).
            let kept = |load: &ruff_python_ast::ExprCall| {
                let guarded = stack.iter().any(|n| {
                    matches!(n, AnyNodeRef::StmtIf(i) if self.text(i.test.range()).contains("cuda"))
                });
                ((self.src.contains("cuda") || self.imported_by_cuda_program()) && !guarded)
                    .then(|| Found::with(load.range(), String::new()))
            };
            // A checkpoint handed to the caller (`return torch.load(path)`, or an entry of it):
            // kept as a variable is (set Y: a logger's loader whose bare `except` turned a GPU
            // checkpoint into "no checkpoint" on a TPU VM).
            if let AnyNodeRef::StmtReturn(r) = node {
                let load = match r.value.as_deref() {
                    Some(Expr::Call(load)) => Some(load),
                    Some(e) => entry_of(e),
                    None => None,
                };
                if let Some(load) = load
                    && self.plain_torch_load(load).is_some()
                {
                    out.extend(kept(load));
                }
                return;
            }
            let AnyNodeRef::StmtAssign(a) = node else {
                return;
            };
            // An entry of the checkpoint kept (`sd = torch.load(path)["state_dict"]`, then
            // changed before `load_state_dict`, set X): reported as a whole load kept is.
            if let (Some(load), [Expr::Name(_)]) = (entry_of(&a.value), a.targets.as_slice()) {
                if self.plain_torch_load(load).is_some() {
                    out.extend(kept(load));
                }
                return;
            }
            let ([Expr::Name(x)], Expr::Call(load)) = (a.targets.as_slice(), a.value.as_ref())
            else {
                return;
            };
            let Some((at, comma)) = self.plain_torch_load(load) else {
                return;
            };
            let kept = || kept(load);
            let blocks = match stack.last() {
                Some(parent) => crate::port::parse::child_bodies(*parent),
                None => vec![self.parsed.module.body.as_slice()],
            };
            let Some((block, pos)) = blocks.into_iter().find_map(|b| {
                let pos = b.iter().position(|s| s.range() == a.range)?;
                Some((b, pos))
            }) else {
                out.extend(kept());
                return;
            };
            let device = block[pos + 1..]
                .iter()
                .take(3)
                .find_map(|s| moved_to(s, x.id.as_str()));
            let Some(Expr::Name(root)) = device else {
                out.extend(kept());
                return;
            };
            if !self.device_bound_before(root.id.as_str(), x, a.start()) {
                out.extend(kept());
                return;
            }
            let Some(device) = device else { return };
            let d = self.text(device.range());
            out.push(Found {
                range: load.range(),
                detail: String::new(),
                fix: Some(Fix {
                    edits: vec![Edit::insert(at, format!("{comma}map_location={d}"))],
                    applicability: FixClass::Safe,
                    imports: vec![],
                    exclusive: None,
                    why_unsafe: None,
                }),
            });
        });
        out
    }

    /// Is this module imported by an entry script of its tree that uses CUDA? Its checkpoints
    /// are that program's, most likely saved on a GPU (set W: a loader module that names no
    /// device, whose failed load a bare `except` turned into training from scratch).
    fn imported_by_cuda_program(&self) -> bool {
        use crate::port::program::{imports, tree};
        let Some(path) = self.facts.path.as_deref() else {
            return false;
        };
        // The program's CUDA may live in another of its modules (set Y: an entry script that
        // names no device, whose experiment module picks "cuda:0").
        imports::entry_importing(path)
            .or_else(|| imports::project_entry_importing(path))
            .is_some_and(|entry| {
                tree::cuda_on_disk(&entry)
                    || crate::port::texts::text(&entry).is_some_and(|t| {
                        imports::modules_of(&entry, &t)
                            .iter()
                            .any(|m| tree::cuda_on_disk(&m.file))
                    })
            })
    }

    /// Does this module, or a project module it imports, define a `load_state_dict`?
    fn defines_load_state_dict(&self) -> bool {
        const DEF: &str = "def load_state_dict(";
        if self.src.contains(DEF) {
            return true;
        }
        let Some(path) = self.facts.path.as_deref() else {
            return false;
        };
        crate::port::program::imports::module_within_that(path, self.src, usize::MAX, &|t| {
            t.contains(DEF)
        })
        .is_some()
    }

    /// LIB015's findings (see the module doc).
    pub(super) fn safetensors_devices(&self) -> Vec<Found> {
        let mut out = vec![];
        walk(&self.parsed.module.body, true, &mut |node, stack| {
            let AnyNodeRef::ExprCall(call) = node else {
                return;
            };
            let Some(q) = self.callee(call) else { return };
            let Some(at) = LOADERS.iter().position(|l| *l == q) else {
                return;
            };
            // Already kept off the TPU (this fix's own form).
            let guarded = stack.iter().any(|n| {
                matches!(n, AnyNodeRef::ExprIf(e) if self.text(e.test.range()).contains("\"tpu\""))
            });
            if guarded {
                return;
            }
            // Parenthesized where the call is an operand of a larger expression.
            let operand = !matches!(
                stack.last(),
                None | Some(
                    AnyNodeRef::StmtAssign(_)
                        | AnyNodeRef::StmtAnnAssign(_)
                        | AnyNodeRef::StmtReturn(_)
                        | AnyNodeRef::StmtExpr(_)
                        | AnyNodeRef::Arguments(_)
                        | AnyNodeRef::Keyword(_)
                )
            );
            let Some(device) = loader_device(call, at) else {
                return;
            };
            let cpu = matches!(device, Expr::StringLiteral(s) if s.value.to_str() == "cpu");
            if !cpu {
                let fix = (at == 0 && self.target == crate::port::rules::Target::Portable)
                    .then(|| self.safetensors_load_off_the_tpu(call, device, operand))
                    .flatten();
                out.push(Found {
                    range: call.range(),
                    detail: String::new(),
                    fix,
                });
            }
        });
        out
    }

    /// LIB015's portable fix for `load_file(path, device=X)` (see the module doc): only where
    /// the path and X are plain values, read twice without harm.
    fn safetensors_load_off_the_tpu(
        &self,
        call: &ruff_python_ast::ExprCall,
        device: &Expr,
        operand: bool,
    ) -> Option<Fix> {
        fn plain(e: &Expr) -> bool {
            match e {
                Expr::Name(_) | Expr::StringLiteral(_) | Expr::NumberLiteral(_) => true,
                Expr::Attribute(a) => plain(&a.value),
                Expr::Subscript(s) => plain(&s.value) && plain(&s.slice),
                // `str(device)`, `os.path.join(d, name)`: pure calls of plain values.
                Expr::Call(c) => {
                    c.arguments.keywords.is_empty()
                        && c.arguments.args.iter().all(plain)
                        && matches!(&*c.func, Expr::Name(n) if n.id.as_str() == "str")
                }
                Expr::FString(_) => true,
                _ => false,
            }
        }
        let args = &call.arguments;
        let [path] = args.args.first().map(std::slice::from_ref)? else {
            return None;
        };
        let only = args.args.len() <= 2
            && args.keywords.iter().all(|k| {
                k.arg
                    .as_ref()
                    .is_some_and(|n| matches!(n.as_str(), "device" | "filename"))
            });
        if !only || !plain(path) || !plain(device) || matches!(device, Expr::StringLiteral(_)) {
            return None;
        }
        let func = self.text(call.func.range());
        let (p, x) = (self.text(path.range()), self.text(device.range()));
        // The device's type read from its text: a string, a torch.device, an int or None (a
        // parameter's default: safetensors takes it, `torch.device(None)` would raise).
        let text = match device {
            Expr::Call(_) | Expr::StringLiteral(_) | Expr::FString(_) => x.to_string(),
            _ => format!("str({x})"),
        };
        let form = format!(
            "{} if {text}.split(\":\")[0] != \"tpu\" else {{k: v.to({x}) for k, v in {func}({p}).items()}}",
            self.text(call.range())
        );
        let form = if operand { format!("({form})") } else { form };
        Some(Fix {
            edits: vec![Edit::replace(call.range(), form)],
            applicability: FixClass::Safe,
            imports: vec![],
            exclusive: None,
            why_unsafe: None,
        })
    }

    /// The device arguments of this module's safetensors loads (not the literal "cpu"): a
    /// device fix there would hand safetensors "tpu", which it refuses.
    pub(in crate::port::rewrite) fn safetensors_device_arguments(
        &self,
    ) -> Vec<ruff_text_size::TextRange> {
        if !self.src.contains("safetensors") {
            return vec![];
        }
        let mut out = vec![];
        walk(&self.parsed.module.body, true, &mut |node, _| {
            let AnyNodeRef::ExprCall(call) = node else {
                return;
            };
            let Some(at) = self
                .callee(call)
                .and_then(|q| LOADERS.iter().position(|l| *l == q))
            else {
                return;
            };
            if let Some(device) = loader_device(call, at) {
                out.push(device.range());
            }
        });
        out
    }
}

/// `x.to(D)` or `x = x.to(D)` (D a name named for a device, positional or `device=`): D.
/// The load an entry of a checkpoint is taken from: `torch.load(path)` in
/// `torch.load(path)["state_dict"]`.
fn entry_of(e: &Expr) -> Option<&ruff_python_ast::ExprCall> {
    match e {
        Expr::Subscript(sub) => match sub.value.as_ref() {
            Expr::Call(load) => Some(load),
            _ => None,
        },
        _ => None,
    }
}

fn moved_to<'s>(stmt: &'s ruff_python_ast::Stmt, x: &str) -> Option<&'s Expr> {
    use ruff_python_ast::Stmt;
    let call = match stmt {
        Stmt::Expr(e) => e.value.as_call_expr()?,
        Stmt::Assign(a) if matches!(a.targets.as_slice(), [Expr::Name(t)] if t.id.as_str() == x) => {
            a.value.as_call_expr()?
        }
        _ => return None,
    };
    let Expr::Attribute(to) = call.func.as_ref() else {
        return None;
    };
    let on_x = matches!(to.value.as_ref(), Expr::Name(n) if n.id.as_str() == x);
    let args = &call.arguments;
    let device = match (args.args.as_ref(), args.keywords.as_ref()) {
        ([d], []) => d,
        ([], [k]) if k.arg.as_ref().is_some_and(|a| a.as_str() == "device") => &k.value,
        _ => return None,
    };
    // Named for a device (`DEVICE`, `args.device`, `dev`): an index (`model.to(rank)`) is no
    // map_location.
    let named = match device {
        Expr::Name(n) => n.id.as_str(),
        _ => return None,
    }
    .to_ascii_lowercase();
    (to.attr.as_str() == "to" && on_x && (named.contains("device") || named == "dev"))
        .then_some(device)
}

/// safetensors' loaders: `load_file(filename, device)`, `safe_open(filename, framework, device)`.
const LOADERS: [&str; 3] = [
    "safetensors.torch.load_file",
    "safetensors.safe_open",
    "safetensors.torch.safe_open",
];

/// The device a loader call (`at`: its index in [`LOADERS`]) is given.
fn loader_device(call: &ruff_python_ast::ExprCall, at: usize) -> Option<&Expr> {
    call.arguments
        .find_keyword("device")
        .map(|k| &k.value)
        .or_else(|| call.arguments.args.get(if at == 0 { 1 } else { 2 }))
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
