//! Realistic programs per area of the catalogue (tests/data/areas/: an fp16 loop with a
//! GradScaler, seeding, event timing, a CNN, a FlexAttention block, a loop logging `.item()`,
//! compiled code with data-dependent shapes, ops a TPU lacks), migrated with every built-in rule:
//! each gives at least the findings its `# expect:` line names, the result parses, and a second
//! migration changes nothing (with and without unsafe fixes). The snapshot holds what a user
//! sees.

use std::path::Path;

use tpuport::port::render;
use tpuport::port::{RuleIndex, RuleSet, Settings, migrate_source, parse};

fn snapshot_for(path: &Path) -> String {
    let name = format!("areas/{}", path.file_name().unwrap().to_str().unwrap());
    let source = std::fs::read_to_string(path).unwrap();
    let expect: Vec<&str> = source
        .lines()
        .find_map(|l| l.strip_prefix("# expect:"))
        .unwrap_or_else(|| panic!("{name}: first line must be `# expect: ID ...`"))
        .split_whitespace()
        .collect();
    let rules = RuleSet::builtin();
    let index = RuleIndex::new(&rules);
    let safe = migrate_source(&source, &rules, &index, Settings::default());
    let found: Vec<&str> = safe
        .diagnostics
        .iter()
        .map(|d| rules.rules[d.rule].id.as_str())
        .collect();
    for id in &expect {
        assert!(
            found.contains(id),
            "{name}: no {id} finding; found {found:?}"
        );
    }
    let modes = [false, true].into_iter().flat_map(|unsafe_fixes| {
        [tpuport::port::Target::Portable, tpuport::port::Target::Tpu].map(|to| Settings {
            unsafe_fixes,
            to,
            min_torch: None,
        })
    });
    for settings in modes {
        let unsafe_fixes = settings.unsafe_fixes;
        let out = migrate_source(&source, &rules, &index, settings);
        assert!(
            out.internal_error.is_none(),
            "{name}: {:?}",
            out.internal_error
        );
        let Some(text) = out.output else { continue };
        assert!(
            parse::is_valid(&text),
            "{name}: the result does not parse:\n{text}"
        );
        let again = migrate_source(&text, &rules, &index, settings);
        assert!(
            again.output.is_none(),
            "{name}: a second migration (unsafe fixes: {unsafe_fixes}) changed the file:\n{}",
            render::unified_diff(&name, &text, again.output.as_deref().unwrap_or(""))
        );
    }
    let required = Settings::default().required();
    let mut snap =
        render::diagnostics_text(&name, &source, &safe.diagnostics, &rules, required, true);
    match &safe.output {
        Some(out) => snap.push_str(&render::unified_diff(&name, &source, out)),
        None => snap.push_str("(no safe fixes)\n"),
    }
    snap
}

#[test]
fn area_programs() {
    let snapshots = crate::each_file::Snapshots {
        module: "areas",
        test: "area_programs",
        dir: "data/areas",
        depth: 0,
    };
    snapshots.each(|path| {
        let snap = snapshot_for(path);
        snapshots.note(path, &snap);
        insta::assert_snapshot!(snap);
    });
}
