//! Fixes that are right only after a call the program must make first (`safe_after` in a rule
//! file): `xm.rendezvous` → `torch.distributed.barrier()` (XM026) needs a process group, which
//! `init_process_group` creates. In a program whose `xmp.spawn` is kept (XMP010's fix is
//! unsafe), or that never creates a process group, the barrier raises where the rendezvous did
//! not: the fix is safe only where every path of the program to it makes the call first.
//!
//! The paths are followed through the file: the function holding the finding, else each of its
//! callers in the file (a function started by `xmp.spawn` has no process group until XMP010's
//! fix runs it through `_tpuport_torchrun_main`, which creates one). A library module is not a
//! program: what runs before its code is decided elsewhere.
//!
//! The same holds for a fix that is right only together with another one (`safe_if_ported`):
//! `xm.optimizer_step(opt)` → `opt.step()`, `xm.mark_step()` removed, `xm.wait_device_ops()` →
//! `torch.accelerator.synchronize()` are right on TorchTPU's eager device, not on the
//! PyTorch/XLA device a file keeps where its `xm.xla_device(2)` is left (manual, or an unsafe
//! fix not applied): the branch would be half-ported, and its torch_xla import could go with
//! the last call the safe fixes rewrote. Such a fix is safe only where every call of the named
//! device functions in the file is ported by a safe fix too ([`keep_unported_devices`]).

use std::collections::HashSet;

use ruff_python_ast::{self as ast, AnyNodeRef, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};

use crate::port::facts::called_before;
use crate::port::rewrite::Checker;
use crate::port::rewrite::lints::walk;
use crate::port::rules::Rule;

/// How many callers deep the paths are followed.
const DEPTH: u8 = 6;

/// Launchers that start a function in new processes with no process group (torch_xla's).
const SPAWNS: [&str; 3] = [
    "torch_xla.distributed.xla_multiprocessing.spawn",
    "torch_xla.launch",
    "torch_xla.torch_xla.launch",
];

/// The helper of XMP010's fix: it creates the process group, then calls the function.
const TORCHRUN_MAIN: &str = "_tpuport_torchrun_main";

/// What the paths to a site make first.
#[derive(Debug, PartialEq)]
enum Paths {
    /// Every path makes one of the calls first.
    Covered,
    /// The function holding the site is started by a torch_xla launcher (its name, the launcher).
    Spawned(String, String),
    /// Not a program: its callers are elsewhere.
    Library,
    /// Some path is not shown to make the call first.
    Uncovered,
}

impl Checker<'_> {
    /// Why the fix of `rule` at `site` is not shown to follow one of its `safe_after` calls on
    /// every path of the program; None when it is.
    pub(in crate::port::rewrite) fn not_after(
        &self,
        rule: &Rule,
        site: TextSize,
    ) -> Option<String> {
        let first = rule
            .safe_after
            .iter()
            .map(|n| format!("`{}`", n.rsplit('.').next().unwrap_or(n)))
            .collect::<Vec<_>>()
            .join(" or ");
        let mut seen = HashSet::new();
        match self.paths(rule, site, DEPTH, &mut seen) {
            Paths::Covered => None,
            Paths::Spawned(f, spawn) => Some(format!(
                "not proven safe: `{f}` is started by `{spawn}`, which makes no {first} call; the spawn stays as it is by default (XMP010's unsafe fix runs it under torchrun through `{TORCHRUN_MAIN}`, which creates the process group)"
            )),
            Paths::Library => Some(format!(
                "not proven safe: this module is not a program, so whether {first} runs before this is up to the program that calls it"
            )),
            Paths::Uncovered => Some(format!(
                "not proven safe: no path of this program to here is shown to call {first} first (in the same function, at module level, or before each call of the function in this file)"
            )),
        }
    }

    fn paths(
        &self,
        rule: &Rule,
        site: TextSize,
        depth: u8,
        seen: &mut HashSet<TextRange>,
    ) -> Paths {
        let module = &self.parsed.module.body;
        let is_first = |c: &ast::ExprCall| {
            self.sem.qualified_name(&c.func).is_some_and(|q| {
                rule.safe_after.iter().any(|n| {
                    q == *n || (q.starts_with(n.as_str()) && q[n.len()..].starts_with('.'))
                })
            })
        };
        let Some((def, method)) = innermost_def(module, site) else {
            return if called_before(module, site, &is_first) {
                Paths::Covered
            } else if self.facts.program {
                Paths::Uncovered
            } else {
                Paths::Library
            };
        };
        if called_before(&def.body, site, &is_first) {
            return Paths::Covered;
        }
        if !self.facts.program {
            return Paths::Library;
        }
        if method || depth == 0 || !seen.insert(def.range) {
            return Paths::Uncovered;
        }
        let name = def.name.as_str();
        let mut uses: Vec<(TextSize, Use)> = vec![];
        walk(module, true, &mut |node, stack| {
            let AnyNodeRef::ExprName(n) = node else {
                return;
            };
            if n.id.as_str() != name || n.ctx != ast::ExprContext::Load {
                return;
            }
            // The callee's parent is the call; an argument's, the call's argument list.
            let call = match stack {
                [.., AnyNodeRef::ExprCall(c)] if c.func.range() == n.range => {
                    uses.push((c.range().start(), Use::Call));
                    return;
                }
                [.., AnyNodeRef::ExprCall(c), AnyNodeRef::Arguments(_)]
                | [
                    ..,
                    AnyNodeRef::ExprCall(c),
                    AnyNodeRef::Arguments(_),
                    AnyNodeRef::Keyword(_),
                ] => *c,
                _ => {
                    uses.push((n.range.start(), Use::Other));
                    return;
                }
            };
            let launcher = match call.func.as_ref() {
                Expr::Name(f) if f.id.as_str() == TORCHRUN_MAIN => Use::GroupMain,
                f => match self.sem.qualified_name(f) {
                    Some(q) if SPAWNS.contains(&q.as_str()) => Use::Spawn(q),
                    _ => Use::Other,
                },
            };
            uses.push((call.range().start(), launcher));
        });
        if uses.is_empty() {
            return Paths::Uncovered;
        }
        let mut worst = Paths::Covered;
        for (at, u) in uses {
            let p = match u {
                Use::Call => self.paths(rule, at, depth - 1, seen),
                Use::GroupMain => Paths::Covered,
                Use::Spawn(q) => {
                    let short = q.replace("torch_xla.distributed.xla_multiprocessing", "xmp");
                    Paths::Spawned(name.to_string(), short)
                }
                Use::Other => Paths::Uncovered,
            };
            // A launcher's reason says most; any uncovered path makes the fix unsafe.
            match (&worst, &p) {
                (_, Paths::Covered) | (Paths::Spawned(..), _) => {}
                _ => worst = p,
            }
        }
        worst
    }
}

/// Make unsafe the safe fixes of rules with `safe_if_ported` in a file where a call of one of
/// those names is left: no safe fix covers it (`suppressed` tells the findings that
/// `# tpuport: ignore` keeps off).
pub(super) fn keep_unported_devices(
    src: &str,
    sem: &crate::port::semantic::Semantic,
    rules: &crate::port::rules::RuleSet,
    body: &[Stmt],
    diags: &mut [crate::port::diagnostic::Diagnostic],
    suppressed: &dyn Fn(&crate::port::diagnostic::Diagnostic) -> bool,
) {
    use crate::port::rules::FixClass;
    let safe = |d: &crate::port::diagnostic::Diagnostic| {
        d.fix
            .as_ref()
            .is_some_and(|f| f.applicability == FixClass::Safe)
    };
    let wants = |d: &crate::port::diagnostic::Diagnostic| {
        safe(d) && !rules.rules[d.rule].safe_if_ported.is_empty()
    };
    if !diags.iter().any(wants) {
        return;
    }
    // The calls of every name some finding's rule asks about, with the name.
    let names: HashSet<&str> = diags
        .iter()
        .filter(|d| wants(d))
        .flat_map(|d| {
            rules.rules[d.rule]
                .safe_if_ported
                .iter()
                .map(String::as_str)
        })
        .collect();
    let mut calls: Vec<(TextRange, String)> = vec![];
    walk(body, true, &mut |node, _| {
        if let AnyNodeRef::ExprCall(c) = node
            && let Some(q) = sem.qualified_name(&c.func)
            && names.contains(q.as_str())
        {
            calls.push((c.range(), q));
        }
    });
    let left: Vec<&(TextRange, String)> = calls
        .iter()
        .filter(|(call, _)| {
            !diags
                .iter()
                .any(|d| safe(d) && !suppressed(d) && d.range.contains_range(*call))
        })
        .collect();
    for d in diags.iter_mut().filter(|d| wants(d)) {
        let asks = &rules.rules[d.rule].safe_if_ported;
        let Some((call, _)) = left.iter().find(|(_, q)| asks.contains(q)) else {
            continue;
        };
        let line = src[..call.start().to_usize()].matches('\n').count() + 1;
        d.make_unsafe(&format!(
            "not proven safe: this file keeps its PyTorch/XLA device `{}` (line {line}, not ported by a safe fix), and this rewrite is right only on TorchTPU's device: port that device too (or apply both with --unsafe-fixes)",
            super::together::snippet(src, *call)
        ));
    }
}

/// How the program uses a function's name.
enum Use {
    /// Calls it.
    Call,
    /// Gives it to XMP010's helper, which creates the process group first.
    GroupMain,
    /// Gives it to a torch_xla launcher (its qualified name).
    Spawn(String),
    /// Anything else (stored, passed on): its calls are not known.
    Other,
}

/// The innermost `def` holding `site`, and whether it is a method (its parent is a class).
fn innermost_def(body: &[Stmt], site: TextSize) -> Option<(&ast::StmtFunctionDef, bool)> {
    let mut found = None;
    let mut stmts = body;
    let mut in_class = false;
    'down: loop {
        for s in stmts {
            if !s.range().contains(site) {
                continue;
            }
            match s {
                Stmt::FunctionDef(f) => {
                    found = Some((f, in_class));
                    in_class = false;
                    stmts = &f.body;
                }
                Stmt::ClassDef(c) => {
                    in_class = true;
                    stmts = &c.body;
                }
                other => {
                    let Some(b) = crate::port::facts::blocks(other)
                        .into_iter()
                        .find(|b| b.iter().any(|s| s.range().contains(site)))
                    else {
                        return found;
                    };
                    stmts = b;
                }
            }
            continue 'down;
        }
        return found;
    }
}

#[cfg(test)]
mod tests {
    use crate::port::rules::FixClass;

    /// XM026's fix class and note on the first rendezvous of `src`.
    fn barrier(src: &str) -> (FixClass, Option<String>) {
        let out = crate::port::test_support::migrate("XM026", src, None);
        let d = &out.diagnostics[0];
        (d.fix.as_ref().unwrap().applicability, d.note.clone())
    }

    const HEAD: &str = "import torch.distributed as dist\nimport torch_xla.core.xla_model as xm\nimport torch_xla.distributed.xla_multiprocessing as xmp\n\n";

    #[test]
    fn a_barrier_is_safe_where_the_program_created_a_process_group_first() {
        let own = format!(
            "{HEAD}def _mp_fn(i):\n    dist.init_process_group(\"xla\", init_method=\"xla://\")\n    xm.rendezvous(\"init\")\n\nif __name__ == \"__main__\":\n    xmp.spawn(_mp_fn)\n"
        );
        assert_eq!(barrier(&own), (FixClass::Safe, None));
        // Through a helper called after the process group was made, on every path.
        let helper = format!(
            "{HEAD}def train():\n    xm.rendezvous(\"epoch\")\n\ndef _mp_fn(i):\n    dist.init_process_group(\"xla\")\n    for e in range(3):\n        train()\n\nif __name__ == \"__main__\":\n    xmp.spawn(_mp_fn)\n"
        );
        assert_eq!(barrier(&helper).0, FixClass::Safe);
        let top = format!("{HEAD}dist.init_process_group(\"gloo\")\nxm.rendezvous(\"x\")\n");
        assert_eq!(barrier(&top).0, FixClass::Safe);
    }

    #[test]
    fn no_safe_barrier_without_a_process_group_on_the_way() {
        // The spawn is kept by default: no process group.
        let spawned = format!(
            "{HEAD}def _mp_fn(i):\n    xm.rendezvous(\"init\")\n\nif __name__ == \"__main__\":\n    xmp.spawn(_mp_fn)\n"
        );
        let (class, note) = barrier(&spawned);
        assert_eq!(class, FixClass::Unsafe);
        let note = note.unwrap();
        assert!(
            note.contains("`_mp_fn` is started by `xmp.spawn`"),
            "{note}"
        );
        // One caller makes the group, another does not.
        let one_path = format!(
            "{HEAD}def sync():\n    xm.rendezvous(\"x\")\n\ndef a():\n    dist.init_process_group(\"xla\")\n    sync()\n\ndef b():\n    sync()\n\nif __name__ == \"__main__\":\n    a()\n    b()\n"
        );
        assert_eq!(barrier(&one_path).0, FixClass::Unsafe);
        // The group comes after the barrier.
        let after = format!(
            "{HEAD}if __name__ == \"__main__\":\n    xm.rendezvous(\"x\")\n    dist.init_process_group(\"xla\")\n"
        );
        assert_eq!(barrier(&after).0, FixClass::Unsafe);
        // A library module: its caller is elsewhere.
        let library = format!("{HEAD}def sync():\n    xm.rendezvous(\"x\")\n");
        let (class, note) = barrier(&library);
        assert_eq!(class, FixClass::Unsafe);
        assert!(note.unwrap().contains("not a program"));
        // XMP010's helper creates the process group before it calls the function.
        let helper = format!(
            "{HEAD}def _mp_fn(i):\n    xm.rendezvous(\"init\")\n\nif __name__ == \"__main__\":\n    _tpuport_torchrun_main(_mp_fn, ())\n"
        );
        assert_eq!(barrier(&helper).0, FixClass::Safe);
    }
}
