//! Test parameters whose values are computed elsewhere: `@parameterized.expand([(d,) for d in
//! get_available_devices()])`, `@pytest.mark.parametrize("device", devices())`. The function
//! that produces them still yields `"cuda"` (it is not in this file, or not ported with it), so
//! a comparison of such a parameter with a device name (`if device == "cuda" and not
//! torch.cuda.is_available(): self.skipTest(...)`) would no longer match what it receives: its
//! device fixes become unsafe, with a note naming the source of the values.

use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{self as ast, AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextRange};

use crate::port::diagnostic::Diagnostic;
use crate::port::rules::RuleSet;

/// A parametrized function: its parameters fed by computed values, where it is, and the
/// expression that computes them.
struct Fed {
    names: Vec<String>,
    body: TextRange,
    source: TextRange,
}

/// Do these values hold anything but literals (a call, a name, a comprehension)?
fn computed(e: &Expr) -> bool {
    match e {
        Expr::List(l) => l.elts.iter().any(computed),
        Expr::Tuple(t) => t.elts.iter().any(computed),
        Expr::StringLiteral(_) | Expr::NumberLiteral(_) | Expr::BooleanLiteral(_) => false,
        Expr::NoneLiteral(_) => false,
        _ => true,
    }
}

fn fed(f: &ast::StmtFunctionDef) -> Option<Fed> {
    let params: Vec<String> = f
        .parameters
        .iter_non_variadic_params()
        .map(|p| p.parameter.name.to_string())
        .filter(|n| n != "self")
        .collect();
    for (name, c) in crate::port::parse::decorator_calls(&f.decorator_list) {
        let (names, values) = match (name, c.arguments.args.as_ref()) {
            ("expand", [values, ..]) => (params.clone(), values),
            ("parametrize", [Expr::StringLiteral(s), values, ..]) => (
                s.value
                    .to_str()
                    .split(',')
                    .map(|n| n.trim().to_string())
                    .collect(),
                values,
            ),
            _ => continue,
        };
        if computed(values) {
            let body = TextRange::new(f.body.first()?.start(), f.body.last()?.end());
            return Some(Fed {
                names,
                body,
                source: values.range(),
            });
        }
    }
    None
}

#[derive(Default)]
struct Collect {
    fed: Vec<Fed>,
    /// Comparisons: their range and the names read as operands (`device`, `device.type`'s
    /// `device`).
    compares: Vec<(TextRange, Vec<(String, TextRange)>)>,
}

fn operand_name(e: &Expr) -> Option<&str> {
    match e {
        Expr::Name(n) => Some(n.id.as_str()),
        Expr::Attribute(a) => operand_name(&a.value),
        _ => None,
    }
}

impl<'a> SourceOrderVisitor<'a> for Collect {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        match node {
            AnyNodeRef::StmtFunctionDef(f) => self.fed.extend(fed(f)),
            AnyNodeRef::ExprCompare(c) => {
                let names = std::iter::once(c.left.as_ref())
                    .chain(c.comparators.iter())
                    .filter_map(|o| operand_name(o).map(|n| (n.to_string(), o.range())))
                    .collect();
                self.compares.push((c.range, names));
            }
            _ => {}
        }
        TraversalSignal::Traverse
    }
}

/// Make unsafe the device fixes in comparisons of parameters fed by computed values.
pub(in crate::port::rewrite) fn keep_fed_comparisons(
    src: &str,
    rules: &RuleSet,
    body: &[ast::Stmt],
    diags: &mut [Diagnostic],
) {
    let dev = |d: &Diagnostic| rules.rules[d.rule].family == "DEV" && d.fix.is_some();
    if !diags.iter().any(dev) || !(src.contains("expand(") || src.contains("parametrize(")) {
        return;
    }
    let mut c = Collect::default();
    for s in body {
        source_order::walk_stmt(&mut c, s);
    }
    for f in &c.fed {
        for (range, names) in c.compares.iter().filter(|(r, _)| f.body.contains_range(*r)) {
            let Some((param, at)) = names.iter().find(|(n, _)| f.names.contains(n)) else {
                continue;
            };
            let note = format!(
                "unsafe: `{param}` takes its values from `{}`, computed elsewhere, which still \
                 yields \"cuda\"; comparing it with \"tpu\" would no longer match: port that \
                 source too, then this comparison",
                super::together::snippet(src, f.source)
            );
            for d in diags.iter_mut().filter(|d| {
                rules.rules[d.rule].family == "DEV"
                    && range.contains_range(d.range)
                    && !at.contains_range(d.range)
            }) {
                d.make_unsafe(&note);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::port::rewrite::migrated as migrate;

    #[test]
    fn parameters_fed_by_computed_values_keep_their_comparisons() {
        let src = "import unittest\n\nimport torch\nfrom parameterized import parameterized\n\nfrom pkg.utils import get_available_devices\n\n\nclass T(unittest.TestCase):\n    @parameterized.expand([(device,) for device in get_available_devices()])\n    def test_model(self, device):\n        if device == \"cuda\":\n            self.skipTest(\"later\")\n";
        assert_eq!(migrate(src, false), src);
        assert!(migrate(src, true).contains("device == \"tpu\""));
        let literal = src.replace(
            "[(device,) for device in get_available_devices()]",
            "[(\"cpu\",), (\"cuda\",)]",
        );
        assert!(migrate(&literal, false).contains("device == \"tpu\""));
    }
}
