//! Simple local data flow for strings: `loc = f"cuda:{rank}"` assigned once to a name, and the
//! name later used in a device place (`torch.load(p, map_location=loc)`, `.to(loc)`): the string
//! takes the roles of the name's uses (and any reason a use gives not to rewrite it).

use ruff_python_ast::visitor::source_order::{SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{self as ast, AnyNodeRef, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange};

use super::Checker;
use super::roles::Role;
use crate::port::parse::child_bodies;

/// Collects the ancestors of the names at the target ranges.
struct Uses<'a> {
    targets: Vec<TextRange>,
    stack: Vec<AnyNodeRef<'a>>,
    found: Vec<(Vec<AnyNodeRef<'a>>, TextRange)>,
}

impl<'a> SourceOrderVisitor<'a> for Uses<'a> {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        let r = node.range();
        if let AnyNodeRef::ExprName(n) = node
            && self.targets.contains(&n.range)
        {
            self.found.push((self.stack.clone(), n.range));
        }
        self.stack.push(node);
        if self.targets.iter().any(|t| r.contains_range(*t)) {
            TraversalSignal::Traverse
        } else {
            TraversalSignal::Skip
        }
    }

    fn leave_node(&mut self, _node: AnyNodeRef<'a>) {
        self.stack.pop();
    }
}

impl<'a> Checker<'a> {
    /// The roles of the string at `range` (ancestors: the stack less `depth`), with those of the
    /// uses of the name it is assigned to, and why a use says it is not a device (if one does).
    pub(super) fn roles_with_flow(
        &self,
        range: TextRange,
        depth: usize,
    ) -> (Vec<Role>, Option<String>) {
        let ancestors = &self.stack[..self.stack.len() - depth];
        let mut roles = self.roles_in(ancestors, range);
        let mut veto = None;
        for (anc, at) in self.uses_of_assigned(ancestors, range, false) {
            roles.extend(self.roles_in(&anc, at));
            veto = veto.or_else(|| self.not_a_device(&anc, at));
        }
        (roles, veto)
    }

    /// For `name = <string>` (through conditional expressions and `or`; with `test`, also
    /// through `not`, comparisons and the callee of a call: `use_triton = not x.is_cuda`), where
    /// `name` is bound once in its scope: each read of it, with its ancestors.
    pub(super) fn uses_of_assigned(
        &self,
        ancestors: &[AnyNodeRef<'a>],
        range: TextRange,
        test: bool,
    ) -> Vec<(Vec<AnyNodeRef<'a>>, TextRange)> {
        let mut child = range;
        let mut target = None;
        for anc in ancestors.iter().rev() {
            match anc {
                AnyNodeRef::ExprIf(e) if e.test.range() != child => child = e.range,
                AnyNodeRef::ExprBoolOp(e) => child = e.range,
                AnyNodeRef::ExprUnaryOp(e) if test => child = e.range,
                AnyNodeRef::ExprCompare(e) if test => child = e.range,
                AnyNodeRef::ExprCall(e) if test && e.func.range() == child => child = e.range(),
                AnyNodeRef::StmtAssign(a) if a.targets.len() == 1 => {
                    if let Expr::Name(n) = &a.targets[0] {
                        target = Some(n);
                    }
                    break;
                }
                _ => break,
            }
        }
        let Some(name) = target else { return vec![] };
        self.reads_of(name)
    }

    /// Each read of `name` (a target bound once in its scope), with its ancestors.
    pub(in crate::port::rewrite) fn reads_of(
        &self,
        name: &ast::ExprName,
    ) -> Vec<(Vec<AnyNodeRef<'a>>, TextRange)> {
        let Some(b) = self.sem.bindings.iter().position(|b| b.range == name.range) else {
            return vec![];
        };
        let scope = self.sem.bindings[b].scope;
        let bound = self
            .sem
            .bindings
            .iter()
            .filter(|x| x.scope == scope && x.name == name.id.as_str())
            .count();
        if bound != 1 {
            return vec![];
        }
        let targets: Vec<TextRange> = self
            .sem
            .loads
            .iter()
            .filter(|(_, to)| *to == Some(b))
            .map(|(r, _)| *r)
            .collect();
        self.uses_at(targets)
    }

    /// The reads of the flags that the blocks of a guard set to `True` or `False` (`if
    /// torch.cuda.device_count() > 1: data_parallel = True` / `else: data_parallel = False`),
    /// with their ancestors: what a flag selects later, the guard selects (set P's translation
    /// Transformer, whose flag turned on `nn.DataParallel`).
    pub(in crate::port::rewrite) fn flag_reads(
        &self,
        blocks: &[&'a [Stmt]],
    ) -> Vec<(Vec<AnyNodeRef<'a>>, TextRange)> {
        let mut targets = vec![];
        for stmt in blocks.iter().flat_map(|b| b.iter()) {
            let Stmt::Assign(a) = stmt else { continue };
            let ([Expr::Name(n)], Expr::BooleanLiteral(_)) = (a.targets.as_slice(), &*a.value)
            else {
                continue;
            };
            let Some(flag) = self.sem.bindings.iter().find(|b| b.range == n.range) else {
                continue;
            };
            let same: Vec<usize> = (0..self.sem.bindings.len())
                .filter(|i| {
                    let b = &self.sem.bindings[*i];
                    b.scope == flag.scope && b.name == flag.name
                })
                .collect();
            targets.extend(
                self.sem
                    .loads
                    .iter()
                    .filter(|(r, to)| to.is_some_and(|t| same.contains(&t)) && !targets.contains(r))
                    .map(|(r, _)| *r)
                    .collect::<Vec<_>>(),
            );
        }
        self.uses_at(targets)
    }

    /// The names read at `targets`, with their ancestors.
    pub(in crate::port::rewrite) fn uses_at(
        &self,
        targets: Vec<TextRange>,
    ) -> Vec<(Vec<AnyNodeRef<'a>>, TextRange)> {
        if targets.is_empty() {
            return vec![];
        }
        let mut v = Uses {
            targets,
            stack: vec![],
            found: vec![],
        };
        for stmt in &self.parsed.module.body {
            v.visit_stmt(stmt);
        }
        v.found
    }
}

impl<'a> Checker<'a> {
    /// For a name read by the call being walked (`torch.cuda.set_device(device)`): the index `X`
    /// of the CUDA device the nearest assignment before it in the same block gives the name
    /// (`device = f"cuda:{X}"`, `device = torch.device("cuda", X)`), where `X` is a name and
    /// nothing between that assignment and the call binds either name again. The call then
    /// selects device `X` on every path to it: what the device string says, the index says.
    pub(super) fn device_index_of(&self, name: &ast::ExprName) -> Option<&'a Expr> {
        self.device_index_in(&self.stack, name)
    }

    /// [`Checker::device_index_of`] for a name read with these ancestors (outermost first).
    pub(in crate::port::rewrite) fn device_index_in(
        &self,
        ancestors: &[AnyNodeRef<'a>],
        name: &ast::ExprName,
    ) -> Option<&'a Expr> {
        let at = ancestors
            .iter()
            .rposition(|n| n.is_statement() && n.range().contains_range(name.range))?;
        let stmt = ancestors[at].range();
        let bodies = match at.checked_sub(1) {
            Some(p) => child_bodies(ancestors[p]),
            None => vec![self.parsed.module.body.as_slice()],
        };
        let body = bodies
            .into_iter()
            .find(|b| b.iter().any(|s| s.range() == stmt))?;
        let pos = body.iter().position(|s| s.range() == stmt)?;
        let binds = |s: &Stmt, id: &str| {
            self.sem
                .bindings
                .iter()
                .any(|b| b.name == id && s.range().contains_range(b.range))
        };
        let (def, index) = body[..pos]
            .iter()
            .enumerate()
            .rev()
            .find(|(_, s)| binds(s, &name.id))?;
        let Stmt::Assign(a) = index else { return None };
        let [Expr::Name(target)] = a.targets.as_slice() else {
            return None;
        };
        if target.id != name.id {
            return None;
        }
        let x = self.indexed_cuda_device(&a.value)?;
        let Expr::Name(xn) = x else { return None };
        let rebound = body[def + 1..pos].iter().any(|s| binds(s, &xn.id));
        (xn.id != name.id && !rebound).then_some(x)
    }

    /// `f"cuda:{X}"` or `torch.device("cuda", X)`: `X`.
    fn indexed_cuda_device(&self, e: &'a Expr) -> Option<&'a Expr> {
        match e {
            Expr::FString(f) if !f.value.is_implicit_concatenated() => {
                let Some(ast::FStringPart::FString(fs)) = f.value.iter().next() else {
                    return None;
                };
                match fs.elements.iter().collect::<Vec<_>>().as_slice() {
                    [
                        ast::InterpolatedStringElement::Literal(l),
                        ast::InterpolatedStringElement::Interpolation(i),
                    ] if &*l.value == "cuda:"
                        && i.format_spec.is_none()
                        && i.conversion == ast::ConversionFlag::None
                        && i.debug_text.is_none() =>
                    {
                        Some(&i.expression)
                    }
                    _ => None,
                }
            }
            Expr::Call(c)
                if c.arguments.keywords.is_empty()
                    && self.qualified(&c.func).as_deref() == Some("torch.device") =>
            {
                match c.arguments.args.as_ref() {
                    [Expr::StringLiteral(s), x] if s.value.to_str() == "cuda" => Some(x),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}
