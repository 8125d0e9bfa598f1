//! Match rules against one parsed module and turn each match into a diagnostic with a fix.
//!
//! The walk keeps the chain of ancestors, so a string literal knows where it sits (the `device=`
//! keyword, the first argument of `torch.device`, the value assigned to `args.device`, the other
//! side of `x.device.type == ...`): these *roles* are what position classes match. Per node, the
//! first rule in load order wins; fallback rules (`torch.cuda.*`, strings `in = ["*"]`) only fire
//! where no other rule did.

use std::collections::{HashMap, HashSet};

use aho_corasick::AhoCorasick;
use ruff_python_ast::visitor::source_order::{SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{self as ast, AnyNodeRef, Expr, ExprContext, Number, Stmt, StringFlags};
use ruff_text_size::{Ranged, TextRange, TextSize};

use super::edit::{Edit, Fix};
use super::parse::{self, Parsed};
use super::rules::{
    Action, ArgKind, FixClass, Matcher, PositionPattern, RemoveKind, Rule, RuleSet, StringForm,
};
use super::semantic::Semantic;
use super::structural::{self, FileFacts};
use super::template::{self, Ctx, Skip, Value};

/// One finding.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    /// Index into [`RuleSet::rules`].
    pub rule: usize,
    pub range: TextRange,
    pub message: String,
    pub fix: Option<Fix>,
    /// Why there is no fix, or why it was downgraded.
    pub note: Option<String>,
}

/// Lookup tables over a rule set, built once and shared by all files.
pub struct RuleIndex {
    calls: HashMap<String, Vec<usize>>,
    refs: HashMap<String, Vec<usize>>,
    prefixes: Vec<(String, usize)>,
    methods: HashMap<String, Vec<usize>>,
    attributes: HashMap<String, Vec<usize>>,
    keywords: HashMap<String, Vec<usize>>,
    strings: Vec<usize>,
    roots: HashSet<String>,
    needle_set: Option<AhoCorasick>,
    /// Per rule: all of these groups must be present, each group = any of its needles.
    needle_ids: Vec<Vec<Vec<usize>>>,
    needle_count: usize,
}

impl RuleIndex {
    pub fn new(set: &RuleSet) -> RuleIndex {
        let mut ix = RuleIndex {
            calls: HashMap::new(),
            refs: HashMap::new(),
            prefixes: vec![],
            methods: HashMap::new(),
            attributes: HashMap::new(),
            keywords: HashMap::new(),
            strings: vec![],
            roots: set.module_roots(),
            needle_set: None,
            needle_ids: vec![],
            needle_count: 0,
        };
        let mut needles: Vec<String> = vec![];
        for (i, r) in set.rules.iter().enumerate() {
            match &r.matcher {
                Matcher::Call(names) => {
                    for n in names {
                        ix.calls.entry(n.clone()).or_default().push(i);
                    }
                }
                Matcher::Reference { exact, prefixes } => {
                    for n in exact {
                        ix.refs.entry(n.clone()).or_default().push(i);
                    }
                    for p in prefixes {
                        ix.prefixes.push((p.clone(), i));
                    }
                }
                Matcher::Method(names) => {
                    for n in names {
                        ix.methods.entry(n.clone()).or_default().push(i);
                    }
                }
                Matcher::Attribute(names) => {
                    for n in names {
                        ix.attributes.entry(n.clone()).or_default().push(i);
                    }
                }
                Matcher::Keyword { names, .. } => {
                    for n in names {
                        ix.keywords.entry(n.clone()).or_default().push(i);
                    }
                }
                Matcher::String { .. } => ix.strings.push(i),
            }
            let mut groups = vec![];
            for group in &r.needles {
                let mut ids = vec![];
                for n in group.split('|') {
                    let lower = n.to_ascii_lowercase();
                    let id = match needles.iter().position(|x| *x == lower) {
                        Some(id) => id,
                        None => {
                            needles.push(lower);
                            needles.len() - 1
                        }
                    };
                    ids.push(id);
                }
                groups.push(ids);
            }
            ix.needle_ids.push(groups);
        }
        // Longest prefix first, so the most specific fallback wins.
        ix.prefixes
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        ix.needle_count = needles.len();
        ix.needle_set = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&needles)
            .ok();
        ix
    }

    /// Which rules could fire on this text (every needle of the rule occurs in it).
    pub fn active(&self, source: &str) -> Vec<bool> {
        let mut present = vec![false; self.needle_count];
        if let Some(ac) = &self.needle_set {
            for m in ac.find_overlapping_iter(source) {
                present[m.pattern().as_usize()] = true;
            }
        }
        self.needle_ids
            .iter()
            .map(|groups| groups.iter().all(|g| g.iter().any(|i| present[*i])))
            .collect()
    }
}

/// A place a string literal can occupy.
#[derive(Debug, Clone, PartialEq)]
enum Role {
    Ident(String),
    Slot {
        callee: String,
        key: String,
        nargs: usize,
    },
}

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
    import_names: HashSet<&'a str>,
}

/// Run the rules over one parsed module. `facts` describe the file as the user gave it (not
/// the partly rewritten text of a later round), so a fix's class does not change between rounds.
pub fn check(
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
        import_names: sem
            .bindings
            .iter()
            .filter(|b| matches!(b.kind, super::semantic::BindingKind::Import { .. }))
            .map(|b| b.name.as_str())
            .collect(),
    };
    for stmt in &parsed.module.body {
        c.visit_stmt(stmt);
    }
    c.finish()
}

impl<'a> SourceOrderVisitor<'a> for Checker<'a> {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
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
        self.diags.sort_by_key(|d| (d.range.start(), d.rule));
        let mut diags = std::mem::take(&mut self.diags);
        diags.retain(|d| !self.suppressed(d));
        diags
    }

    /// `# tpuport: ignore` (all rules) or `# tpuport: ignore[DEV001, CUD004]` on the line where
    /// a finding starts silences it.
    fn suppressed(&self, d: &Diagnostic) -> bool {
        let start = usize::from(d.range.start());
        let line_start = self.src[..start].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let line_end = self.src[start..]
            .find('\n')
            .map(|i| i + start)
            .unwrap_or(self.src.len());
        let first = self
            .parsed
            .comments
            .partition_point(|c| usize::from(c.start()) < line_start);
        self.parsed.comments[first..]
            .iter()
            .take_while(|c| usize::from(c.start()) < line_end)
            .any(|c| {
                let text = &self.src[*c];
                let Some(rest) = text.split("tpuport: ignore").nth(1) else {
                    return false;
                };
                match rest.trim_start().strip_prefix('[') {
                    None => true,
                    Some(list) => list
                        .split(']')
                        .next()
                        .unwrap_or("")
                        .split(',')
                        .any(|id| id.trim() == self.rules.rules[d.rule].id),
                }
            })
    }

    fn rule(&self, i: usize) -> &'a Rule {
        &self.rules.rules[i]
    }

    fn is_active(&self, i: usize) -> bool {
        self.active[i] && structural::applies_here(self.rule(i), self.facts)
    }

    fn text(&self, r: TextRange) -> &'a str {
        &self.src[r]
    }

    fn qualified(&self, expr: &Expr) -> Option<String> {
        // Cheap filter: only chains rooted in an imported name can resolve.
        let mut e = expr;
        loop {
            match e {
                Expr::Attribute(a) => e = &a.value,
                Expr::Name(n) => {
                    if !self.import_names.contains(n.id.as_str()) {
                        return None;
                    }
                    break;
                }
                _ => return None,
            }
        }
        let q = self.sem.qualified_name(expr)?;
        let root = q.split('.').next().unwrap_or("");
        self.index.roots.contains(root).then_some(q)
    }

    // ---- calls, methods, keywords ---------------------------------------------------------

    fn check_call(&mut self, call: &'a ast::ExprCall) {
        let q = self.qualified(&call.func);
        if let Some(q) = &q
            && let Some(ids) = self.index.calls.get(q)
            && let Some(&i) = ids.iter().find(|i| self.is_active(**i))
        {
            self.emit(Match {
                rule: i,
                range: call.range(),
                qualified: Some(q.clone()),
                call: Some(call),
                receiver: None,
                reference: None,
                keyword: None,
            });
        }
        if let Expr::Attribute(a) = call.func.as_ref()
            && !self.sem.root_is_import(&a.value)
            && let Some(ids) = self.index.methods.get(a.attr.as_str())
            && let Some(i) = self.first_for_receiver(ids, &a.value)
        {
            self.emit(Match {
                rule: i,
                range: call.range(),
                qualified: None,
                call: Some(call),
                receiver: Some(&a.value),
                reference: None,
                keyword: None,
            });
        }
        for kw in &call.arguments.keywords {
            let Some(name) = &kw.arg else { continue };
            let Some(ids) = self.index.keywords.get(name.as_str()) else {
                continue;
            };
            let hit = ids.iter().copied().find(|i| {
                self.is_active(*i)
                    && match &self.rule(*i).matcher {
                        Matcher::Keyword { calls, .. } => {
                            calls.is_empty() || q.as_ref().is_some_and(|q| calls.contains(q))
                        }
                        _ => false,
                    }
            });
            if let Some(i) = hit {
                self.emit(Match {
                    rule: i,
                    range: kw.range(),
                    qualified: q.clone(),
                    call: Some(call),
                    receiver: None,
                    reference: None,
                    keyword: Some(kw),
                });
            }
        }
    }

    /// The first active rule among `ids` whose `receiver` pattern (if any) fits the object.
    fn first_for_receiver(&self, ids: &[usize], receiver: &Expr) -> Option<usize> {
        let recv = self.text(receiver.range());
        ids.iter().copied().find(|i| {
            self.is_active(*i)
                && self
                    .rule(*i)
                    .receiver
                    .as_ref()
                    .is_none_or(|re| re.is_match(recv))
        })
    }

    fn check_value_attribute(&mut self, attr: &'a ast::ExprAttribute) {
        // `x.is_cuda` (not called, not a module attribute).
        let Some(ids) = self.index.attributes.get(attr.attr.as_str()) else {
            return;
        };
        if let Some(AnyNodeRef::ExprCall(c)) = self.stack.last()
            && c.func.range() == attr.range
        {
            return;
        }
        if self.sem.root_is_import(&attr.value) {
            return;
        }
        if let Some(i) = self.first_for_receiver(ids, &attr.value) {
            self.emit(Match {
                rule: i,
                range: attr.range,
                qualified: None,
                call: None,
                receiver: Some(&attr.value),
                reference: Some(attr.range),
                keyword: None,
            });
        }
    }

    fn check_reference(&mut self, node: AnyNodeRef<'a>) {
        let range = node.range();
        let maximal = !matches!(self.stack.last(), Some(AnyNodeRef::ExprAttribute(p)) if p.value.range() == range);
        if self.index.refs.is_empty() && self.index.prefixes.is_empty() {
            return;
        }
        let q = match node {
            AnyNodeRef::ExprAttribute(a) => self.qualified(&a.value).map(|mut q| {
                q.push('.');
                q.push_str(a.attr.as_str());
                q
            }),
            AnyNodeRef::ExprName(n) => match &self
                .sem
                .resolve(n.id.as_str(), n.range.start())
                .map(|b| &b.kind)
            {
                Some(super::semantic::BindingKind::Import { qualified }) => Some(qualified.clone()),
                _ => None,
            },
            _ => None,
        };
        let Some(q) = q else { return };
        if let Some(ids) = self.index.refs.get(&q)
            && let Some(&i) = ids.iter().find(|i| self.is_active(**i))
        {
            let call = match self.stack.last() {
                Some(AnyNodeRef::ExprCall(c)) if c.func.range() == range => Some(*c),
                _ => None,
            };
            self.emit(Match {
                rule: i,
                range,
                qualified: Some(q),
                call,
                receiver: None,
                reference: Some(range),
                keyword: None,
            });
            return;
        }
        if !maximal {
            return;
        }
        let hit = self.index.prefixes.iter().find(|(p, i)| {
            self.is_active(*i)
                && (q == *p
                    || (q.starts_with(p.as_str()) && q.as_bytes().get(p.len()) == Some(&b'.')))
        });
        if let Some((_, i)) = hit {
            let m = Match {
                rule: *i,
                range,
                qualified: Some(q),
                call: None,
                receiver: None,
                reference: Some(range),
                keyword: None,
            };
            if let Some(d) = self.diagnostic(&m) {
                self.fallbacks.push(d);
            }
        }
    }

    // ---- strings ----------------------------------------------------------------------------

    fn check_string_literal(&mut self, s: &'a ast::ExprStringLiteral) {
        if self.index.strings.is_empty() || s.value.is_implicit_concatenated() {
            return;
        }
        let lit = &s.value.as_slice()[0];
        let value = lit.value.to_string();
        let content = content_range(lit.range, lit.flags);
        let exact = self
            .src
            .get(usize::from(content.start())..usize::from(content.end()))
            == Some(value.as_str());
        // Which form: the literal alone, or the head of a %-format, .format() or + concatenation.
        let parent = self.stack.last().copied();
        let grand = self.stack.len().checked_sub(2).map(|i| self.stack[i]);
        let (form, form_range, depth, static_text) = match (parent, grand) {
            (Some(AnyNodeRef::ExprBinOp(b)), _)
                if b.left.range() == s.range && b.op == ast::Operator::Mod =>
            {
                (StringForm::Percent, b.range, 1, value.clone())
            }
            (Some(AnyNodeRef::ExprBinOp(b)), _)
                if b.left.range() == s.range && b.op == ast::Operator::Add =>
            {
                (StringForm::Concat, b.range, 1, format!("{value}{{}}"))
            }
            (Some(AnyNodeRef::ExprAttribute(a)), Some(AnyNodeRef::ExprCall(c)))
                if a.attr.as_str() == "format" && c.func.range() == a.range =>
            {
                (StringForm::Format, c.range(), 2, value.clone())
            }
            _ => (StringForm::Plain, s.range, 0, value.clone()),
        };
        let segments = if exact {
            vec![(0usize, value.len(), content.start())]
        } else {
            vec![]
        };
        let requote = if exact || form != StringForm::Plain {
            None
        } else {
            Some((lit.range, lit.flags))
        };
        self.check_string(StringSite {
            range: s.range,
            form,
            form_range,
            depth,
            static_text,
            segments,
            requote,
        });
    }

    fn check_fstring(&mut self, f: &'a ast::ExprFString) {
        if self.index.strings.is_empty() || f.value.is_implicit_concatenated() {
            return;
        }
        let Some(ast::FStringPart::FString(fs)) = f.value.iter().next() else {
            return;
        };
        let mut static_text = String::new();
        let mut segments = vec![];
        for el in fs.elements.iter() {
            match el {
                ast::InterpolatedStringElement::Literal(l) => {
                    let exact = self
                        .src
                        .get(usize::from(l.range.start())..usize::from(l.range.end()))
                        == Some(&*l.value);
                    if exact {
                        segments.push((
                            static_text.len(),
                            static_text.len() + l.value.len(),
                            l.range.start(),
                        ));
                    }
                    static_text.push_str(&l.value);
                }
                ast::InterpolatedStringElement::Interpolation(_) => static_text.push_str("{}"),
            }
        }
        self.check_string(StringSite {
            range: f.range,
            form: StringForm::Fstring,
            form_range: f.range,
            depth: 0,
            static_text,
            segments,
            requote: None,
        });
    }

    fn check_string(&mut self, site: StringSite) {
        let mut roles: Option<Vec<Role>> = None;
        let mut fallback_hit = None;
        for &i in &self.index.strings {
            if !self.is_active(i) {
                continue;
            }
            let rule = self.rule(i);
            let Matcher::String {
                regex,
                positions,
                forms,
            } = &rule.matcher
            else {
                continue;
            };
            if !forms.contains(&site.form) || !regex.is_match(&site.static_text) {
                continue;
            }
            match positions {
                None => {
                    if fallback_hit.is_none() {
                        fallback_hit = Some(i);
                    }
                }
                Some(classes) => {
                    let roles =
                        roles.get_or_insert_with(|| self.roles(site.form_range, site.depth));
                    let in_position = classes
                        .iter()
                        .any(|c| self.class_matches(c, roles, rule.min_args));
                    if in_position {
                        let d = self.string_diagnostic(i, &site);
                        self.diags.push(d);
                        return;
                    }
                }
            }
        }
        if let Some(i) = fallback_hit {
            let d = self.string_diagnostic(i, &site);
            self.fallbacks.push(d);
        }
    }

    fn class_matches(&self, class: &str, roles: &[Role], min_args: Option<usize>) -> bool {
        let Some(patterns) = self.rules.positions.get(class) else {
            return false;
        };
        roles.iter().any(|role| {
            patterns.iter().any(|p| match (p, role) {
                // A rule that needs a call with at least N arguments only matches call slots.
                (PositionPattern::Ident(re), Role::Ident(name)) => {
                    min_args.is_none() && re.is_match(name)
                }
                (
                    PositionPattern::Slot { callee, key },
                    Role::Slot {
                        callee: c,
                        key: k,
                        nargs,
                    },
                ) => {
                    callee == c && (key == "*" || key == k) && min_args.is_none_or(|m| *nargs >= m)
                }
                _ => false,
            })
        })
    }

    /// The roles of an expression at `range`, found by walking up through transparent parents.
    fn roles(&self, range: TextRange, depth: usize) -> Vec<Role> {
        let mut roles = vec![];
        let mut child = range;
        let mut keyword: Option<&str> = None;
        let ancestors = &self.stack[..self.stack.len() - depth];
        for (pos, anc) in ancestors.iter().enumerate().rev() {
            match anc {
                AnyNodeRef::ExprIf(e) if e.test.range() != child => child = e.range,
                AnyNodeRef::ExprBoolOp(e) => child = e.range,
                AnyNodeRef::ExprList(e) => child = e.range,
                AnyNodeRef::ExprTuple(e) => child = e.range,
                AnyNodeRef::ExprSet(e) => child = e.range,
                AnyNodeRef::ExprDict(d) => {
                    // A key is a name, not a value of the dict's role: `map_location=
                    // {"cuda:0": ...}` keys are the checkpoint's own tags and must stay.
                    if d.items
                        .iter()
                        .any(|i| i.key.as_ref().is_some_and(|k| k.range() == child))
                    {
                        break;
                    }
                    for item in &d.items {
                        if item.value.range() == child
                            && let Some(Expr::StringLiteral(k)) = &item.key
                        {
                            roles.push(Role::Ident(k.value.to_str().to_string()));
                        }
                    }
                    child = d.range;
                }
                AnyNodeRef::Keyword(k) => {
                    keyword = k.arg.as_ref().map(|a| a.as_str());
                    if let Some(a) = keyword {
                        roles.push(Role::Ident(a.to_string()));
                    }
                    child = k.range;
                }
                AnyNodeRef::Arguments(_) => {}
                AnyNodeRef::ExprCall(c) => {
                    if c.func.range().contains_range(child) {
                        break;
                    }
                    let callee = self.callee_name(c);
                    let nargs = c.arguments.args.len() + c.arguments.keywords.len();
                    match keyword {
                        Some(kw) => {
                            if callee == ".add_argument"
                                && matches!(kw, "default" | "choices" | "const")
                                && let Some(dest) = argparse_dest(c)
                            {
                                roles.push(Role::Ident(dest));
                            }
                            roles.push(Role::Slot {
                                callee,
                                key: kw.to_string(),
                                nargs,
                            });
                        }
                        None => {
                            if let Some(idx) =
                                c.arguments.args.iter().position(|a| a.range() == child)
                            {
                                roles.push(Role::Slot {
                                    callee,
                                    key: idx.to_string(),
                                    nargs,
                                });
                            }
                        }
                    }
                    break;
                }
                AnyNodeRef::ExprSubscript(s) => {
                    if s.slice.range() == child
                        && let Some(q) = self.qualified(&s.value)
                    {
                        roles.push(Role::Slot {
                            callee: q,
                            key: "[]".into(),
                            nargs: 1,
                        });
                    }
                    break;
                }
                AnyNodeRef::StmtAssign(a) => {
                    for t in &a.targets {
                        roles.extend(ident_of(t).map(Role::Ident));
                    }
                    break;
                }
                AnyNodeRef::StmtAnnAssign(a) => {
                    roles.extend(ident_of(&a.target).map(Role::Ident));
                    break;
                }
                AnyNodeRef::ExprNamed(n) => {
                    roles.extend(ident_of(&n.target).map(Role::Ident));
                    break;
                }
                AnyNodeRef::ExprCompare(c) => {
                    for op in std::iter::once(c.left.as_ref()).chain(c.comparators.iter()) {
                        if op.range() != child {
                            roles.extend(ident_of(op).map(Role::Ident));
                        }
                    }
                    break;
                }
                AnyNodeRef::ParameterWithDefault(p) => {
                    roles.push(Role::Ident(p.parameter.name.to_string()));
                    break;
                }
                AnyNodeRef::StmtReturn(_) => {
                    let func = ancestors[..pos].iter().rev().find_map(|a| match a {
                        AnyNodeRef::StmtFunctionDef(f) => Some(f.name.to_string()),
                        _ => None,
                    });
                    roles.extend(func.map(Role::Ident));
                    break;
                }
                _ => break,
            }
        }
        roles
    }

    /// `torch.device`, `.to` (method on a value) or a plain local name.
    fn callee_name(&self, c: &ast::ExprCall) -> String {
        if let Some(q) = self.qualified(&c.func) {
            return q;
        }
        match c.func.as_ref() {
            Expr::Attribute(a) => format!(".{}", a.attr.as_str()),
            Expr::Name(n) => n.id.to_string(),
            _ => "?".to_string(),
        }
    }

    fn string_diagnostic(&self, rule_idx: usize, site: &StringSite) -> Diagnostic {
        let rule = self.rule(rule_idx);
        let mut d = Diagnostic {
            rule: rule_idx,
            range: site.range,
            message: self.message(rule, None, site.range),
            fix: None,
            note: None,
        };
        match &rule.action {
            Some(Action::String(replacement)) => {
                let Matcher::String { regex, .. } = &rule.matcher else {
                    unreachable!()
                };
                let new = regex
                    .replace(&site.static_text, replacement.as_str())
                    .into_owned();
                match string_edit(&site.static_text, &new, &site.segments) {
                    Some(edit) => d.fix = Some(self.make_fix(rule, vec![edit], vec![], false)),
                    None => match site.requote {
                        Some((range, flags)) => {
                            let quote = flags.quote_str();
                            let prefix = &self.src[usize::from(range.start())..usize::from(range.start() + flags.opener_len() - flags.quote_len())];
                            let escaped = new.replace('\\', "\\\\").replace(quote, &format!("\\{quote}"));
                            let text = format!("{prefix}{quote}{escaped}{quote}");
                            d.fix = Some(self.make_fix(rule, vec![Edit::replace(range, text)], vec![], false));
                        }
                        None => d.note = Some("the string is built from parts that cannot be edited separately: edit it by hand".into()),
                    },
                }
            }
            Some(Action::Remove(RemoveKind::Statement)) => {
                match self.removal_fix(rule, site.form_range, site.depth, true) {
                    Ok(fix) => d.fix = Some(fix),
                    Err(note) => d.note = Some(note),
                }
            }
            Some(_) => d.note = Some("this action does not apply to strings".into()),
            None => {}
        }
        self.finalize(d)
    }

    // ---- diagnostics and fixes ---------------------------------------------------------------

    fn emit(&mut self, m: Match<'a>) {
        if let Some(d) = self.diagnostic(&m) {
            self.diags.push(d);
        }
    }

    fn message(&self, rule: &Rule, qualified: Option<&str>, range: TextRange) -> String {
        let matched = self.text(range);
        let matched = if matched.len() > 60 || matched.contains('\n') {
            let first = matched.lines().next().unwrap_or("");
            let cut: String = first.chars().take(57).collect();
            format!("{cut}...")
        } else {
            matched.to_string()
        };
        rule.message
            .replace("{qualified}", qualified.unwrap_or(&matched))
            .replace("{matched}", &matched)
    }

    /// None when the rule's rewrite would change nothing (the code is already right).
    fn diagnostic(&self, m: &Match<'a>) -> Option<Diagnostic> {
        let rule = self.rule(m.rule);
        let mut d = Diagnostic {
            rule: m.rule,
            range: m.range,
            message: self.message(rule, m.qualified.as_deref(), m.range),
            fix: None,
            note: None,
        };
        if let Some(action) = &rule.action {
            match self.build_fix(rule, action, m) {
                Ok(fix) if fix.edits.iter().all(|e| self.text(e.range) == e.content) => {
                    return None;
                }
                Ok(fix) => match self.with_note(rule, action, fix) {
                    Ok(fix) => d.fix = Some(fix),
                    Err(note) => d.note = Some(note),
                },
                Err(note) => d.note = Some(note),
            }
        }
        Some(self.finalize(d))
    }

    /// Drop fixes that touch a region with a syntax error.
    fn finalize(&self, mut d: Diagnostic) -> Diagnostic {
        if let Some(fix) = &d.fix
            && fix
                .edits
                .iter()
                .any(|e| self.parsed.in_broken_region(e.range))
        {
            d.fix = None;
            d.note = Some("inside a region with a syntax error: fix the syntax error first".into());
        }
        d
    }

    fn make_fix(
        &self,
        rule: &Rule,
        edits: Vec<Edit>,
        imports: Vec<String>,
        downgrade: bool,
    ) -> Fix {
        let loses_comment = edits.iter().any(|e| self.parsed.has_comment_in(e.range));
        let mut applicability = rule.fix;
        let by_context = structural::unsafe_here(rule, self.facts);
        if (downgrade || loses_comment || by_context) && applicability > FixClass::Unsafe {
            applicability = FixClass::Unsafe;
        }
        Fix {
            edits,
            applicability,
            imports,
            exclusive: None,
        }
    }

    fn ctx(&self, site: TextSize) -> Ctx<'_> {
        Ctx {
            sem: self.sem,
            roots: &self.index.roots,
            site,
            prefer: None,
        }
    }

    /// A context that keeps the module alias used by the expression at `at` (`T` in `T.cuda.x`).
    fn ctx_at(&self, at: TextRange) -> Ctx<'a> {
        let text = self.text(at);
        let root = text
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .filter(|r| !r.is_empty());
        Ctx {
            sem: self.sem,
            roots: &self.index.roots,
            site: at.start(),
            prefer: root,
        }
    }

    fn build_fix(&self, rule: &Rule, action: &Action, m: &Match<'a>) -> Result<Fix, String> {
        match action {
            Action::Rename(map) => {
                let to = map
                    .get("*")
                    .or_else(|| m.qualified.as_ref().and_then(|q| map.get(q)))
                    .ok_or("no rename target for this name")?;
                let target = match (m.reference, m.call) {
                    (Some(r), _) => r,
                    (None, Some(c)) => c.func.range(),
                    _ => return Err("nothing to rename".into()),
                };
                let (text, import) = template::qualify(to, &self.ctx(target.start()));
                Ok(self.make_fix(
                    rule,
                    vec![Edit::replace(target, text)],
                    import.into_iter().collect(),
                    false,
                ))
            }
            Action::Replace(t) => {
                let target = match rule.matcher {
                    Matcher::Reference { .. } | Matcher::Attribute(_) => {
                        m.reference.unwrap_or(m.range)
                    }
                    _ => m.call.map(|c| c.range()).unwrap_or(m.range),
                };
                let values = self.bind(rule, m)?;
                let r = self.render(t, &values, rule, target)?;
                let text = self.parenthesize(target, r.text);
                Ok(self.make_fix(
                    rule,
                    vec![Edit::replace(target, text)],
                    r.imports,
                    r.duplicated || values.downgrade,
                ))
            }
            Action::Call { to, args } => {
                let call = m.call.ok_or("not a call")?;
                let values = self.bind(rule, m)?;
                let mut edits = vec![];
                let mut imports = vec![];
                match to.as_deref() {
                    Some(method) if method.starts_with('.') => {
                        let Expr::Attribute(a) = call.func.as_ref() else {
                            return Err("not a method call".into());
                        };
                        edits.push(Edit::replace(a.attr.range, &method[1..]));
                    }
                    Some(q) => {
                        let (text, import) = template::qualify(q, &self.ctx_at(call.func.range()));
                        edits.push(Edit::replace(call.func.range(), text));
                        imports.extend(import);
                    }
                    None => {}
                }
                let (arg_edits, arg_imports, dup) =
                    self.rewrite_arguments(rule, call, args, &values)?;
                edits.extend(arg_edits);
                imports.extend(arg_imports);
                Ok(self.make_fix(rule, edits, imports, dup || values.downgrade))
            }
            Action::Remove(RemoveKind::Keyword) => {
                let call = m.call.ok_or("not a call")?;
                let kw = m.keyword.ok_or("no keyword")?;
                let items = arg_items(call);
                let idx = items
                    .iter()
                    .position(|r| *r == kw.range())
                    .ok_or("keyword not found")?;
                Ok(self.make_fix(rule, vec![delete_item(&items, idx, call)], vec![], false))
            }
            Action::Remove(RemoveKind::Statement) => {
                if !rule.params.is_empty() {
                    // Arguments can stop the removal (`xm.mark_step(wait=True)`).
                    self.bind(rule, m)?;
                }
                let target = m.reference.or(m.call.map(|c| c.range())).unwrap_or(m.range);
                self.removal_fix(rule, target, 0, false)
            }
            Action::Unwrap => {
                let call = m.call.ok_or("not a call")?;
                // The call's parents: the `with` item, then the `with` statement.
                let with = self
                    .stack
                    .iter()
                    .rev()
                    .take(2)
                    .find_map(|n| match n {
                        AnyNodeRef::StmtWith(w) => Some(*w),
                        _ => None,
                    })
                    .filter(|w| {
                        w.items
                            .iter()
                            .any(|i| i.context_expr.range() == call.range())
                    })
                    .ok_or("not the context manager of a `with` statement")?;
                let edit = structural::unwrap_with(self.src, with, call.range())?;
                Ok(self.make_fix(rule, vec![edit], vec![], false))
            }
            Action::String(_) => Err("string rewrites need a string match".into()),
        }
    }

    /// Leave the rule's note as a comment at the statement: above it, or in its place when the
    /// fix removes it. The note is skipped where the statement shares its line with other code.
    fn with_note(&self, rule: &Rule, action: &Action, mut fix: Fix) -> Result<Fix, String> {
        let Some(note) = &rule.note else {
            return Ok(fix);
        };
        let Some(pos) = self.stack.iter().rposition(|n| n.as_stmt_ref().is_some()) else {
            return Ok(fix);
        };
        if note.only_in_loop && !structural::in_loop(&self.stack[..pos]) {
            return Ok(fix);
        }
        let stmt = self.stack[pos].range();
        let Some(indent) = structural::indent_of(self.src, stmt.start()) else {
            return Ok(fix);
        };
        let comment = format!("# tpuport {}: {}", rule.id, note.text);
        if matches!(action, Action::Remove(RemoveKind::Statement)) {
            let only = fix.edits.iter().any(|e| e.content == "pass");
            let text = if only {
                format!("pass  {comment}")
            } else {
                comment
            };
            fix.edits = vec![Edit::replace(stmt, text)];
        } else {
            let eol = if self.src.contains("\r\n") {
                "\r\n"
            } else {
                "\n"
            };
            let at = stmt.start() - TextSize::of(indent);
            fix.edits
                .push(Edit::insert(at, format!("{indent}{comment}{eol}")));
        }
        Ok(fix)
    }

    fn render(
        &self,
        t: &str,
        values: &Bound<'a>,
        rule: &Rule,
        site: TextRange,
    ) -> Result<template::Rendered, String> {
        template::render(t, &values.values, &rule.convert, &self.ctx_at(site)).map_err(
            |e| match e {
                Skip::Missing => "a required argument is missing".to_string(),
                Skip::Manual(why) => why,
            },
        )
    }

    /// Bind the call's arguments (and receiver) to the rule's parameters.
    fn bind(&self, rule: &Rule, m: &Match<'a>) -> Result<Bound<'a>, String> {
        let mut b = Bound {
            values: HashMap::new(),
            rest: vec![],
            sources: HashMap::new(),
            downgrade: false,
        };
        if let Some(r) = m.receiver {
            b.values.insert("receiver".into(), self.value(r));
        }
        let Some(call) = m.call else { return Ok(b) };
        if m.reference.is_some()
            && m.receiver.is_none()
            && !matches!(rule.matcher, Matcher::Call(_))
        {
            // A reference in callee position: arguments are not part of the match.
            if rule.params.is_empty() {
                return Ok(b);
            }
        }
        for (i, arg) in call.arguments.args.iter().enumerate() {
            match (arg, rule.params.get(i)) {
                (Expr::Starred(_), _) | (_, None) => {
                    if rule.pass_rest {
                        b.rest.push(arg.range());
                    } else {
                        return Err(format!(
                            "unexpected argument `{}`: edit this call by hand",
                            self.text(arg.range())
                        ));
                    }
                }
                (_, Some(p)) => {
                    b.values.insert(p.clone(), self.value(arg));
                    b.sources.insert(p.clone(), (arg.range(), None));
                }
            }
        }
        for kw in &call.arguments.keywords {
            match &kw.arg {
                Some(name) if rule.params.iter().any(|p| p == name.as_str()) => {
                    if b.values.contains_key(name.as_str()) {
                        return Err(format!("`{name}` is given twice"));
                    }
                    b.values.insert(name.to_string(), self.value(&kw.value));
                    b.sources
                        .insert(name.to_string(), (kw.value.range(), Some(kw.range())));
                }
                _ => {
                    if rule.pass_rest {
                        b.rest.push(kw.range());
                    } else {
                        return Err(format!(
                            "unexpected keyword `{}`: edit this call by hand",
                            self.text(kw.range())
                        ));
                    }
                }
            }
        }
        for (p, conv) in &rule.convert {
            let kind = b.values.get(p).map(|v| v.kind).unwrap_or(ArgKind::Missing);
            if kind.listed_in(&conv.unsafe_for) {
                b.downgrade = true;
            }
            // A kind marked manual stops the fix even where no template uses the parameter.
            let explicit = template::has_explicit(conv, kind);
            if kind.listed_in(&conv.manual_for) && !explicit {
                let text = b.values.get(p).map(|v| v.text).unwrap_or(p.as_str());
                if matches!(kind, ArgKind::True | ArgKind::False) {
                    return Err(format!("`{p}={text}`: no mechanical rewrite"));
                }
                return Err(format!(
                    "`{text}` is {}: no mechanical rewrite",
                    template::kind_name(kind)
                ));
            }
        }
        Ok(b)
    }

    fn value(&self, e: &'a Expr) -> Value<'a> {
        let (kind, literal) = match e {
            Expr::NoneLiteral(_) => (ArgKind::None, None),
            Expr::BooleanLiteral(b) if b.value => (ArgKind::True, None),
            Expr::BooleanLiteral(_) => (ArgKind::False, None),
            Expr::NumberLiteral(n) => match &n.value {
                Number::Int(i) => (ArgKind::Int, Some(i.to_string())),
                _ => (ArgKind::Other, None),
            },
            Expr::StringLiteral(s) => (ArgKind::String, Some(s.value.to_str().to_string())),
            _ => (ArgKind::Other, None),
        };
        Value {
            text: self.text(e.range()),
            kind,
            literal,
            atomic: is_atomic(e),
        }
    }

    /// New argument list: minimal edits where possible (dropping `name=` or one argument),
    /// otherwise the text between the parentheses is replaced.
    fn rewrite_arguments(
        &self,
        rule: &Rule,
        call: &'a ast::ExprCall,
        args: &[String],
        b: &Bound<'a>,
    ) -> Result<(Vec<Edit>, Vec<String>, bool), String> {
        let items = arg_items(call);
        // Each new item is either an untouched source argument (maybe losing its `name=`) or text.
        enum New {
            Source {
                item: usize,
                strip: Option<TextRange>,
            },
            Text(String),
        }
        let mut new: Vec<New> = vec![];
        let mut imports = vec![];
        let mut dup = false;
        for a in args {
            let (kw, t) = split_keyword_item(a);
            // `{param}` alone, without conversion, refers to the source argument itself.
            if let Some(p) = t.strip_prefix('{').and_then(|x| x.strip_suffix('}'))
                && !rule.convert.contains_key(p)
                && !p.contains(['{', '}'])
            {
                match b.sources.get(p) {
                    None if p != "receiver" => continue,
                    Some((value, kwrange)) => {
                        let whole = kwrange.unwrap_or(*value);
                        let item = items
                            .iter()
                            .position(|r| *r == whole)
                            .ok_or("argument not found")?;
                        let same_kw = match (kw, kwrange) {
                            (Some(k), Some(_)) => call.arguments.keywords.iter().any(|x| {
                                x.range() == whole
                                    && x.arg.as_ref().is_some_and(|n| n.as_str() == k)
                            }),
                            (None, None) => true,
                            _ => false,
                        };
                        if same_kw {
                            new.push(New::Source { item, strip: None });
                            continue;
                        }
                        if kw.is_none() {
                            new.push(New::Source {
                                item,
                                strip: Some(TextRange::new(whole.start(), value.start())),
                            });
                            continue;
                        }
                    }
                    None => {}
                }
            }
            let r = match template::render(t, &b.values, &rule.convert, &self.ctx(call.start())) {
                Ok(r) => r,
                Err(Skip::Missing) => continue,
                Err(Skip::Manual(why)) => return Err(why),
            };
            imports.extend(r.imports);
            dup |= r.duplicated;
            new.push(New::Text(match kw {
                Some(k) => format!("{k}={}", r.text),
                None => r.text,
            }));
        }
        for r in &b.rest {
            let item = items
                .iter()
                .position(|x| x == r)
                .ok_or("argument not found")?;
            new.push(New::Source { item, strip: None });
        }
        // Minimal edits: all new items are source items, in order, none added.
        let all_source: Option<Vec<(usize, Option<TextRange>)>> = new
            .iter()
            .map(|n| match n {
                New::Source { item, strip } => Some((*item, *strip)),
                New::Text(_) => None,
            })
            .collect();
        if let Some(kept) = all_source {
            let in_order = kept.windows(2).all(|w| w[0].0 < w[1].0);
            let dropped: Vec<usize> = (0..items.len())
                .filter(|i| !kept.iter().any(|k| k.0 == *i))
                .collect();
            if in_order && dropped.len() <= 1 {
                let mut edits: Vec<Edit> = kept
                    .iter()
                    .filter_map(|(_, s)| s.map(Edit::delete))
                    .collect();
                if let Some(&d) = dropped.first() {
                    edits.push(delete_item(&items, d, call));
                }
                return Ok((edits, imports, dup));
            }
        }
        let text: Vec<String> = new
            .iter()
            .map(|n| match n {
                New::Source { item, strip } => {
                    let r = items[*item];
                    let start = strip.map(|s| s.end()).unwrap_or(r.start());
                    self.text(TextRange::new(start, r.end())).to_string()
                }
                New::Text(t) => t.clone(),
            })
            .collect();
        let inner = inner_parens(call);
        let joined = text.join(", ");
        if self.text(inner) == joined {
            return Ok((vec![], imports, dup));
        }
        Ok((vec![Edit::replace(inner, joined)], imports, dup))
    }

    /// Wrap a replacement in parentheses where the parent binds tighter than it.
    fn parenthesize(&self, target: TextRange, text: String) -> String {
        if parse::expr_is_atomic(&text) {
            return text;
        }
        let tight = match self
            .stack
            .iter()
            .rev()
            .find(|n| n.range() != target && n.range().contains_range(target))
        {
            Some(AnyNodeRef::ExprAttribute(_))
            | Some(AnyNodeRef::ExprSubscript(_))
            | Some(AnyNodeRef::ExprBinOp(_))
            | Some(AnyNodeRef::ExprUnaryOp(_))
            | Some(AnyNodeRef::ExprCompare(_))
            | Some(AnyNodeRef::ExprAwait(_))
            | Some(AnyNodeRef::ExprStarred(_)) => true,
            Some(AnyNodeRef::ExprCall(c)) => c.func.range() == target,
            _ => false,
        };
        if tight { format!("({text})") } else { text }
    }

    /// The fix that deletes the statement holding `target` (the statement must consist of it).
    fn removal_fix(
        &self,
        rule: &Rule,
        target: TextRange,
        depth: usize,
        string_match: bool,
    ) -> Result<Fix, String> {
        let (edit, block) = self.remove_statement(target, depth, string_match)?;
        let mut fix = self.make_fix(rule, vec![edit], vec![], false);
        fix.exclusive = Some(block);
        Ok(fix)
    }

    /// The edit that deletes the statement holding `target`, and the range of its block.
    fn remove_statement(
        &self,
        target: TextRange,
        depth: usize,
        string_match: bool,
    ) -> Result<(Edit, TextRange), String> {
        let ancestors = &self.stack[..self.stack.len().saturating_sub(depth)];
        let stmt_pos = ancestors
            .iter()
            .rposition(|n| n.as_stmt_ref().is_some())
            .ok_or("not inside a statement")?;
        let stmt = ancestors[stmt_pos]
            .as_stmt_ref()
            .ok_or("not inside a statement")?;
        let removable = match stmt {
            ast::StmtRef::Expr(e) => match e.value.as_ref() {
                // The statement is the match, or a call of the matched name...
                v if v.range() == target => true,
                Expr::Call(c) if c.func.range() == target => true,
                // ...or a print of the matched value alone: `print(met.metrics_report())`...
                Expr::Call(c)
                    if !string_match
                        && c.arguments.args.len() == 1
                        && c.arguments.args[0].range() == target
                        && self.is_print(c) =>
                {
                    true
                }
                // ...or, for a string (an environment variable's name), a call taking it as a
                // direct argument: `os.environ.setdefault("NCCL_DEBUG", "INFO")`.
                Expr::Call(c) => {
                    string_match && c.arguments.args.iter().any(|a| a.range() == target)
                }
                _ => false,
            },
            // Only single, non-binding targets: `torch.backends.cudnn.benchmark = True`,
            // `os.environ["X"] = "1"` (never a tuple, which may set other things too).
            ast::StmtRef::Assign(a) => {
                a.targets.len() == 1
                    && is_settable(&a.targets[0])
                    && a.targets[0].range().contains_range(target)
            }
            ast::StmtRef::AugAssign(a) => {
                is_settable(&a.target) && a.target.range().contains_range(target)
            }
            ast::StmtRef::AnnAssign(a) => {
                is_settable(&a.target) && a.target.range().contains_range(target)
            }
            ast::StmtRef::Delete(d) => {
                d.targets.len() == 1
                    && is_settable(&d.targets[0])
                    && d.targets[0].range().contains_range(target)
            }
            _ => false,
        };
        if !removable {
            return Err("its value is used here: remove or rewrite this code by hand".into());
        }
        let parent = stmt_pos.checked_sub(1).map(|i| ancestors[i]);
        let block = match parent.map(body_of) {
            Some(Some(bodies)) => bodies
                .into_iter()
                .find(|b| b.iter().any(|s| s.range() == stmt.range())),
            _ => None,
        };
        // A module may be empty; any other block needs `pass`.
        let is_module = matches!(parent, Some(AnyNodeRef::ModModule(_)));
        let only = !is_module && block.is_some_and(|b| b.len() == 1);
        let key = block
            .and_then(|b| Some(TextRange::new(b.first()?.start(), b.last()?.end())))
            .unwrap_or(stmt.range());
        Ok((delete_statement(self.src, stmt.range(), only), key))
    }
}

/// Functions that only print their arguments: the builtin `print` (not shadowed),
/// `xm.master_print` and the helper that replaces it.
const PRINTERS: &[&str] = &["torch_xla.core.xla_model.master_print"];

impl Checker<'_> {
    fn is_print(&self, c: &ast::ExprCall) -> bool {
        if let Expr::Name(n) = c.func.as_ref()
            && (n.id.as_str() == "_tpuport_master_print"
                || (n.id.as_str() == "print" && self.sem.resolve("print", n.start()).is_none()))
        {
            return true;
        }
        self.qualified(&c.func)
            .is_some_and(|q| PRINTERS.contains(&q.as_str()))
    }
}

struct StringSite {
    range: TextRange,
    form: StringForm,
    form_range: TextRange,
    /// How many ancestors on the stack belong to the form expression itself.
    depth: usize,
    static_text: String,
    /// (static start, static end, source start) of pieces copied verbatim from the source.
    segments: Vec<(usize, usize, TextSize)>,
    /// For plain literals with escapes: rewrite the whole literal.
    requote: Option<(TextRange, ast::StringLiteralFlags)>,
}

struct Bound<'a> {
    values: HashMap<String, Value<'a>>,
    rest: Vec<TextRange>,
    /// Parameter → (value range, whole keyword range if given by keyword).
    sources: HashMap<String, (TextRange, Option<TextRange>)>,
    downgrade: bool,
}

fn content_range(range: TextRange, flags: ast::StringLiteralFlags) -> TextRange {
    TextRange::new(
        range.start() + flags.opener_len(),
        range.end() - flags.closer_len(),
    )
}

/// The smallest edit turning `old` into `new`, placed inside a verbatim source segment.
fn string_edit(old: &str, new: &str, segments: &[(usize, usize, TextSize)]) -> Option<Edit> {
    if old == new {
        return None;
    }
    let prefix = old
        .char_indices()
        .zip(new.chars())
        .take_while(|((_, a), b)| a == b)
        .last()
        .map(|((i, c), _)| i + c.len_utf8())
        .unwrap_or(0);
    let mut suffix = 0;
    let (ob, nb) = (old.as_bytes(), new.as_bytes());
    while suffix < ob.len() - prefix
        && suffix < nb.len() - prefix
        && ob[ob.len() - 1 - suffix] == nb[nb.len() - 1 - suffix]
    {
        suffix += 1;
    }
    // Keep the cut on character boundaries.
    while !old.is_char_boundary(old.len() - suffix) || !new.is_char_boundary(new.len() - suffix) {
        suffix -= 1;
    }
    let (start, end) = (prefix, old.len() - suffix);
    let replacement = &new[prefix..new.len() - suffix];
    let (s0, _, src) = segments.iter().find(|(s, e, _)| *s <= start && end <= *e)?;
    let at = *src + TextSize::try_from(start - s0).ok()?;
    Some(Edit::replace(
        TextRange::new(at, at + TextSize::try_from(end - start).ok()?),
        replacement,
    ))
}

fn split_keyword_item(item: &str) -> (Option<&str>, &str) {
    if let Some((k, v)) = item.split_once('=') {
        let k = k.trim();
        if !k.is_empty()
            && k.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !v.starts_with('=')
        {
            return (Some(k), v.trim());
        }
    }
    (None, item)
}

/// Ranges of a call's arguments and keywords in source order.
fn arg_items(call: &ast::ExprCall) -> Vec<TextRange> {
    let mut v: Vec<TextRange> = call
        .arguments
        .args
        .iter()
        .map(|a| a.range())
        .chain(call.arguments.keywords.iter().map(|k| k.range()))
        .collect();
    v.sort_by_key(|r| r.start());
    v
}

fn inner_parens(call: &ast::ExprCall) -> TextRange {
    let r = call.arguments.range;
    TextRange::new(r.start() + TextSize::from(1), r.end() - TextSize::from(1))
}

/// Delete one argument together with its separator.
fn delete_item(items: &[TextRange], idx: usize, call: &ast::ExprCall) -> Edit {
    if items.len() == 1 {
        return Edit::delete(inner_parens(call));
    }
    if idx + 1 < items.len() {
        Edit::delete(TextRange::new(items[idx].start(), items[idx + 1].start()))
    } else {
        Edit::delete(TextRange::new(items[idx - 1].end(), items[idx].end()))
    }
}

/// Delete a whole statement: its lines when it stands alone on them, `pass` if it is the only
/// statement of its block.
pub fn delete_statement(src: &str, range: TextRange, only_in_block: bool) -> Edit {
    if only_in_block {
        return Edit::replace(range, "pass");
    }
    let b = src.as_bytes();
    let (s, e) = (usize::from(range.start()), usize::from(range.end()));
    let mut ls = s;
    while ls > 0 && b[ls - 1] != b'\n' {
        ls -= 1;
    }
    let mut le = e;
    while le < b.len() && b[le] != b'\n' {
        le += 1;
    }
    let before = &src[ls..s];
    let after = &src[e..le];
    let after_trim = after.trim_start();
    if before.trim().is_empty() && (after_trim.is_empty() || after_trim.starts_with('#')) {
        let end = if le < b.len() { le + 1 } else { le };
        return Edit::delete(TextRange::new(
            TextSize::try_from(ls).unwrap(),
            TextSize::try_from(end).unwrap(),
        ));
    }
    if let Some(rest) = after_trim.strip_prefix(';') {
        let skip = after.len() - rest.trim_start().len();
        return Edit::delete(TextRange::new(
            range.start(),
            range.end() + TextSize::try_from(skip).unwrap(),
        ));
    }
    // `a; b` where b is removed: take the `;` before it.
    let semi = before.rfind(';').map(|i| ls + i).unwrap_or(s);
    Edit::delete(TextRange::new(
        TextSize::try_from(semi).unwrap(),
        range.end(),
    ))
}

fn body_of(node: AnyNodeRef<'_>) -> Option<Vec<&[Stmt]>> {
    Some(match node {
        AnyNodeRef::ModModule(m) => vec![&m.body],
        AnyNodeRef::StmtFunctionDef(f) => vec![&f.body],
        AnyNodeRef::StmtClassDef(c) => vec![&c.body],
        AnyNodeRef::StmtFor(f) => vec![&f.body, &f.orelse],
        AnyNodeRef::StmtWhile(w) => vec![&w.body, &w.orelse],
        AnyNodeRef::StmtIf(i) => vec![&i.body],
        AnyNodeRef::ElifElseClause(c) => vec![&c.body],
        AnyNodeRef::StmtWith(w) => vec![&w.body],
        AnyNodeRef::StmtTry(t) => vec![&t.body, &t.orelse, &t.finalbody],
        AnyNodeRef::ExceptHandlerExceptHandler(h) => vec![&h.body],
        AnyNodeRef::MatchCase(c) => vec![&c.body],
        _ => return None,
    })
}

/// An assignment target that sets something without binding a name: `a.b`, `a[k]`.
fn is_settable(t: &Expr) -> bool {
    matches!(t, Expr::Attribute(_) | Expr::Subscript(_))
}

fn ident_of(e: &Expr) -> Option<String> {
    match e {
        Expr::Name(n) => Some(n.id.to_string()),
        // `x.device.type` → `device.type`, so `*device*` sees it.
        Expr::Attribute(a) => Some(match a.value.as_ref() {
            Expr::Attribute(p) => format!("{}.{}", p.attr, a.attr),
            Expr::Name(p) => format!("{}.{}", p.id, a.attr),
            _ => a.attr.to_string(),
        }),
        Expr::Subscript(s) => match s.slice.as_ref() {
            Expr::StringLiteral(k) => Some(k.value.to_str().to_string()),
            _ => None,
        },
        Expr::Call(c) => ident_of(&c.func),
        _ => None,
    }
}

/// `parser.add_argument("--device", "-d", ...)` → `device` (or its `dest=`).
fn argparse_dest(c: &ast::ExprCall) -> Option<String> {
    if let Some(kw) = c.arguments.find_keyword("dest")
        && let Expr::StringLiteral(s) = &kw.value
    {
        return Some(s.value.to_str().to_string());
    }
    let names: Vec<&str> = c
        .arguments
        .args
        .iter()
        .filter_map(|a| match a {
            Expr::StringLiteral(s) => Some(s.value.to_str()),
            _ => None,
        })
        .collect();
    let long = names
        .iter()
        .find(|n| n.starts_with("--"))
        .or(names.first())?;
    Some(long.trim_start_matches('-').replace('-', "_"))
}

fn is_atomic(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Name(_)
            | Expr::Attribute(_)
            | Expr::Call(_)
            | Expr::Subscript(_)
            | Expr::StringLiteral(_)
            | Expr::NumberLiteral(_)
            | Expr::BooleanLiteral(_)
            | Expr::NoneLiteral(_)
            | Expr::List(_)
            | Expr::Dict(_)
            | Expr::Set(_)
            | Expr::ListComp(_)
            | Expr::SetComp(_)
            | Expr::DictComp(_)
            | Expr::FString(_)
    ) || matches!(e, Expr::Tuple(t) if t.parenthesized)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_edit_is_minimal() {
        let seg = [(0usize, 6usize, TextSize::from(10))];
        let e = string_edit("cuda:0", "tpu:0", &seg).unwrap();
        assert_eq!(
            e.range,
            TextRange::new(TextSize::from(10), TextSize::from(14))
        );
        assert_eq!(e.content, "tpu");
        // A change outside every verbatim segment cannot be placed.
        assert!(string_edit("cuda:{}", "tpu:{}", &[(4, 7, TextSize::from(0))]).is_none());
    }

    #[test]
    fn keyword_items() {
        assert_eq!(
            split_keyword_item("non_blocking={nb}"),
            (Some("non_blocking"), "{nb}")
        );
        assert_eq!(split_keyword_item("a == b"), (None, "a == b"));
        assert_eq!(split_keyword_item("{x}"), (None, "{x}"));
    }

    #[test]
    fn statement_deletion() {
        let src = "a\nb  # c\nd\n";
        let e = delete_statement(
            src,
            TextRange::new(TextSize::from(2), TextSize::from(3)),
            false,
        );
        assert_eq!(super::super::edit::apply_edits(src, vec![&e]), "a\nd\n");
        let src = "a; b\n";
        let e = delete_statement(
            src,
            TextRange::new(TextSize::from(3), TextSize::from(4)),
            false,
        );
        assert_eq!(super::super::edit::apply_edits(src, vec![&e]), "a\n");
        let e = delete_statement(
            src,
            TextRange::new(TextSize::from(0), TextSize::from(1)),
            false,
        );
        assert_eq!(super::super::edit::apply_edits(src, vec![&e]), "b\n");
    }
}
