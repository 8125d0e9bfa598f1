//! Tests of [`super`]: the facts the rules read from a module's text and tree.

use super::*;
use crate::port::parse::parse;

/// Is the `step()` call of `src` always accompanied by a `wrap(...)` call?
fn covered(src: &str) -> bool {
    let parsed = parse(src);
    let site = TextSize::try_from(src.find("step()").unwrap()).unwrap();
    let is_wrap =
        |c: &ExprCall| matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "wrap");
    let body = match &parsed.module.body[..] {
        [Stmt::FunctionDef(f)] => &f.body[..],
        b => b,
    };
    called_with(body, site, &is_wrap)
}

#[test]
fn a_call_counts_before_only() {
    let before = |src: &str| {
        let parsed = parse(src);
        let site = TextSize::try_from(src.find("step()").unwrap()).unwrap();
        let is_wrap =
            |c: &ExprCall| matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "wrap");
        called_before(&parsed.module.body, site, &is_wrap)
    };
    assert!(before("wrap()\nfor b in d:\n    step()\n"));
    assert!(before("for b in d:\n    wrap()\n    step()\n"));
    assert!(!before("step()\nwrap()\n"));
    assert!(!before("for b in d:\n    step()\n    wrap()\n"));
    assert!(!before("if a:\n    wrap()\nstep()\n"));
}

#[test]
fn a_wrap_counts_only_on_every_path() {
    assert!(covered("def f():\n    m = wrap(m)\n    step()\n"));
    assert!(covered("wrap(m)\nfor b in d:\n    step()\n"));
    assert!(covered(
        "if a:\n    m = wrap(m)\nelif b:\n    wrap(m)\nelse:\n    return wrap(m)\nstep()\n"
    ));
    assert!(covered("with x:\n    m = wrap(m)\nstep()\n"));
    assert!(covered("if a:\n    m = wrap(m)\n    step()\n"));
    assert!(!covered("if a:\n    m = wrap(m)\nstep()\n"));
    assert!(!covered(
        "if a:\n    m = wrap(m)\nelif b:\n    wrap(m)\nstep()\n"
    ));
    assert!(!covered("m = wrap(m) if a else m\nstep()\n"));
    assert!(!covered("m = a and wrap(m)\nstep()\n"));
    assert!(!covered("for x in y:\n    wrap(m)\nstep()\n"));
    assert!(!covered("try:\n    wrap(m)\nexcept E:\n    pass\nstep()\n"));
    assert!(!covered("if a:\n    step()\nelse:\n    wrap(m)\n"));
}

/// Found by the fuzz harness (fuzz/artifacts/migrate/invariant-81aa4efbb91ec5fb.py,
/// minimised): PRC005 turns a module-level TF32 assignment into a module-level call, which
/// made the file a program on a second run only, and the tie fix (DEV018, programs only)
/// then changed it again. The settings calls fixes write do not make a program.
#[test]
fn the_calls_fixes_write_do_not_make_a_program() {
    use crate::port::{RuleIndex, RuleSet, Settings, migrate_source};
    let src = "    self.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT does\n\
               torch.backends.cudnn.conv.fp32_precision = \"tf32\"\n\
               \x20   for images, labels in loader:\n\
               \x20       images, labels = images.cuda(), labels.cuda()\n";
    let rules = RuleSet::builtin();
    let index = RuleIndex::new(&rules);
    let settings = Settings {
        unsafe_fixes: true,
        ..Settings::default()
    };
    let once = migrate_source(src, &rules, &index, settings)
        .output
        .expect("fixed");
    let twice = migrate_source(&once, &rules, &index, settings).output;
    assert_eq!(twice, None, "a second run changed:\n{once}");
    for (stmt, program) in [
        ("torch.set_float32_matmul_precision(\"high\")", false),
        (
            "torch.__future__.set_swap_module_params_on_conversion(True)",
            false,
        ),
        ("torch.accelerator.set_device_index(0)", false),
        ("torch.manual_seed(0)", true),
        ("main()", true),
    ] {
        let parsed = parse(stmt);
        assert_eq!(runs_as_program(&parsed.module.body[0]), program, "{stmt}");
    }
}

/// The prefilter's text test never says no where the syntax tree finds a program.
#[test]
fn a_text_that_runs_as_a_program_is_never_filtered_out() {
    for src in [
        "main()\n",
        "fire.Fire(train)\n",
        "print (\"x\")\n",
        "\"a\".join(b)\n",
        "\"a b\".join(b)\n",
        "'{}'.format(1)\n",
        "(lambda: 0)()\n",
        "handlers[0](x)\n",
        "x = 1; main()\n",
        "x = 1;main()\n",
        "if __name__ == \"__main__\":\n    main()\n",
        "if (\n    __name__\n    == \"__main__\"\n):\n    main()\n",
        "if \"__main__\" == __name__:\n    main()\n",
        "import torch\ntorch.manual_seed(0)\n",
        "def f():\n    pass\nf( )\n",
    ] {
        let parsed = parse(src);
        assert!(
            parsed.module.body.iter().any(runs_as_program),
            "not a program: {src}"
        );
        assert!(could_run_as_program(src), "filtered out: {src}");
    }
    for src in [
        "import torch\nx = torch.zeros(1)\n",
        "class A:\n    def f(self):\n        return g(1)\n",
        "logger = logging.getLogger(__file__)\n",
        "logger = logging.getLogger(__name__)\n",
        "def f():\n    if __name__ == \"__main__\":\n        pass\n",
    ] {
        assert!(!could_run_as_program(src), "{src}");
    }
}

/// The hand scan of a line opening with `if` finds what the regex it replaces found.
#[test]
fn name_test_matches_its_regex() {
    let re = regex::Regex::new(r"(?m)^if(?-u:\b)[^:]*(?-u:\b)__name__(?-u:\b)").unwrap();
    for src in [
        "if __name__ == '__main__':\n",
        "if(__name__=='__main__'):\n",
        "if\n__name__\n",
        "if x: __name__\n",
        "ifx __name__\n",
        "if __name__x\n",
        "if a__name__\n",
        "if __name__",
        "if é__name__é:",
        "x\nif not __name__:\n",
        "if",
        "if __name_ __name__:\n",
        " if __name__:\n",
    ] {
        let starts = std::iter::once(0).chain(src.match_indices('\n').map(|(i, _)| i + 1));
        let found = starts
            .filter(|s| *s < src.len())
            .any(|s| name_test_at(src, s));
        assert_eq!(found, re.is_match(src), "{src:?}");
    }
}
