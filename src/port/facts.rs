//! Facts about a file as the user gave it: every qualified name it reads. A rule can be unsafe
//! in a multi-process script that does not wrap its model in DDP (`unsafe_if_uses`/
//! `unless_uses`; `xm.optimizer_step(opt)` → `opt.step()` drops the gradient averaging there),
//! or apply only to some files (`only_if_uses`/`not_if_uses`: `xmp.spawn` joins the process
//! group itself only where the script never calls `init_process_group`).

use std::collections::HashSet;

use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor};
use ruff_python_ast::{Expr, ExprContext};

use super::parse::Parsed;
use super::rules::Rule;
use super::semantic::Semantic;

/// Facts about a file as the user gave it.
#[derive(Debug, Default)]
pub struct FileFacts {
    /// Every qualified name the code reads (`torch.nn.parallel.DistributedDataParallel`,
    /// `torch_xla.distributed.xla_multiprocessing.spawn`).
    pub uses: HashSet<String>,
}

impl FileFacts {
    pub fn of(parsed: &Parsed, sem: &Semantic) -> FileFacts {
        struct Names<'s> {
            sem: &'s Semantic,
            imported: HashSet<&'s str>,
            out: HashSet<String>,
        }
        impl<'a> SourceOrderVisitor<'a> for Names<'_> {
            fn visit_expr(&mut self, e: &'a Expr) {
                // Only chains rooted in an imported name can resolve; the longest chain is enough
                // (a name matches everything under it), so its prefixes are not resolved again.
                let mut root = e;
                while let Expr::Attribute(a) = root {
                    root = &a.value;
                }
                let chain = match (e, root) {
                    (Expr::Attribute(a), Expr::Name(n)) => {
                        (a.ctx == ExprContext::Load).then_some(n)
                    }
                    (Expr::Name(n), _) => (n.ctx == ExprContext::Load).then_some(n),
                    _ => None,
                };
                if let Some(n) = chain {
                    if self.imported.contains(n.id.as_str())
                        && let Some(q) = self.sem.qualified_name(e)
                    {
                        // Record the chain and each prefix (`a.b.c` uses `a.b` and `a`).
                        let mut q = q.as_str();
                        loop {
                            self.out.insert(q.to_string());
                            match q.rfind('.') {
                                Some(i) => q = &q[..i],
                                None => break,
                            }
                        }
                    }
                    return;
                }
                source_order::walk_expr(self, e);
            }
        }
        let mut v = Names {
            sem,
            imported: sem.import_names(),
            out: HashSet::new(),
        };
        for s in &parsed.module.body {
            v.visit_stmt(s);
        }
        FileFacts { uses: v.out }
    }
}

impl FileFacts {
    /// Does the file use one of `names` (a name matches itself and everything under it)?
    pub fn uses_any(&self, names: &[String]) -> bool {
        names.iter().any(|n| {
            self.uses
                .iter()
                .any(|u| u == n || (u.starts_with(n.as_str()) && u[n.len()..].starts_with('.')))
        })
    }
}

/// Is the rule's fix unsafe in this file (it uses one of `unsafe_if_uses`, none of
/// `unless_uses`)?
pub fn unsafe_here(rule: &Rule, facts: &FileFacts) -> bool {
    !rule.unsafe_if_uses.is_empty()
        && facts.uses_any(&rule.unsafe_if_uses)
        && !facts.uses_any(&rule.unless_uses)
}

/// Does the rule apply to this file at all (`only_if_uses`, `not_if_uses`)?
pub fn applies_here(rule: &Rule, facts: &FileFacts) -> bool {
    (rule.only_if_uses.is_empty() || facts.uses_any(&rule.only_if_uses))
        && !facts.uses_any(&rule.not_if_uses)
}
