//! `tpuport report` end to end on recorded runs: the SVGs parse, the PNGs decode, and the
//! numbers in summary.md equal those computed here straight from the events (JSON values, not
//! tpuport's own types).

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

fn events(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn median_p90(mut v: Vec<f64>) -> (f64, f64) {
    if v.len() > 2 {
        v.remove(0);
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let q = |q: f64| {
        let pos = q * (v.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
    };
    (q(0.5), q(0.9))
}

/// The key-table cells for one run, computed from the raw events.
fn expected(path: &str) -> Vec<String> {
    let ev = events(path);
    let of = |t: &'static str| ev.iter().filter(move |e| e["type"] == t);
    let dts: Vec<f64> = of("step").map(|e| e["dt"].as_f64().unwrap()).collect();
    let steps = of("step")
        .map(|e| e["step"].as_u64().unwrap())
        .max()
        .unwrap();
    let (med, p90) = median_p90(dts);
    let fwd_ok = |e: &&Value| e["status"] == "ok" && e["kind"] == "forward";
    let compiles = of("compile").filter(fwd_ok).count();
    let recompiles = of("compile")
        .filter(fwd_ok)
        .filter(|e| !e["reason"].is_null())
        .count();
    let compile_s: f64 = of("compile").map(|e| e["seconds"].as_f64().unwrap()).sum();
    let syncs: u64 = of("sync")
        .flat_map(|e| e["counts"].as_object().unwrap().values())
        .map(|v| v.as_u64().unwrap())
        .sum();
    vec![
        steps.to_string(),
        format!("{:.3} ms", med * 1e3),
        format!("{:.3} ms", p90 * 1e3),
        format!("{compiles} ({recompiles})"),
        format!("{compile_s:.3} s"),
        format!("{:.2}", syncs as f64 / steps as f64),
    ]
}

/// The cells of the key-table row named `name`.
fn row(md: &str, name: &str) -> Vec<String> {
    let line = md
        .lines()
        .find(|l| l.starts_with(&format!("| {name} |")))
        .unwrap_or_else(|| panic!("no row {name} in\n{md}"));
    line.trim_matches('|')
        .split(" | ")
        .skip(1)
        .map(|c| c.trim().trim_end_matches(" |").to_string())
        .collect()
}

fn check_charts(dir: &Path) {
    for name in ["step_time", "hbm", "compiles"] {
        let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("the SVG parses");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        assert!(
            doc.descendants()
                .any(|n| n.has_tag_name("polyline") || n.has_tag_name("path")),
            "{name}.svg has lines"
        );
        assert!(
            doc.descendants().any(|n| n.has_tag_name("text")),
            "{name}.svg has text"
        );
        let f = std::fs::File::open(dir.join(format!("{name}.png"))).unwrap();
        let mut reader = png::Decoder::new(std::io::BufReader::new(f))
            .read_info()
            .expect("the PNG decodes");
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).expect("the PNG decodes");
        assert_eq!((info.width, info.height), (1000, 480));
        // Not blank: some pixels are not white.
        assert!(buf.iter().any(|&b| b < 128), "{name}.png has drawing on it");
    }
}

#[test]
fn ab_report_numbers_match_the_events() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = ("tests/data/train_mlp.jsonl", "tests/data/train_defer.jsonl");
    Command::cargo_bin("tpuport")
        .unwrap()
        .args(["report", a, b, "-o"])
        .arg(dir.path())
        .assert()
        .success();
    let md = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    let (ea, eb) = (expected(a), expected(b));
    let names = [
        "steps",
        "median step time",
        "p90 step time",
        "compiles (recompiles)",
        "total compile time",
        "host syncs per step",
    ];
    for (i, name) in names.iter().enumerate() {
        let cells = row(&md, name);
        assert_eq!(cells[0], ea[i], "{name} A");
        assert_eq!(cells[1], eb[i], "{name} B");
    }
    // B/A of the medians, from the events.
    let med = |p: &str| {
        let ev = events(p);
        median_p90(
            ev.iter()
                .filter(|e| e["type"] == "step")
                .map(|e| e["dt"].as_f64().unwrap())
                .collect(),
        )
        .0
    };
    assert_eq!(
        row(&md, "median step time")[2],
        format!("{:.3}", med(b) / med(a))
    );
    assert!(md.contains("| | A: strict | B: defer-fuse | B/A |"), "{md}");
    assert!(md.contains("1 × `tensor 'args[0]' size mismatch at index 0`"));
    check_charts(dir.path());
    // Nothing half-written is left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(names.len(), 7, "{names:?}");
}

#[test]
fn single_run_with_device_memory_and_a_recompile_limit() {
    let dir = tempfile::tempdir().unwrap();
    Command::cargo_bin("tpuport")
        .unwrap()
        .args(["report", "tests/data/hbm_pressure.jsonl", "-o"])
        .arg(dir.path())
        .assert()
        .success();
    let md = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    assert!(!md.contains("B/A"));
    // Peak allocated 4 + 0.35 × 40 = 18 GiB of the v5e's 16 GiB.
    assert_eq!(
        row(&md, "peak HBM vs capacity")[0],
        "18.0 GiB of 16.0 GiB (112.5%)"
    );
    let e = expected("tests/data/hbm_pressure.jsonl");
    assert_eq!(row(&md, "median step time")[0], e[1]);
    check_charts(dir.path());

    let dir = tempfile::tempdir().unwrap();
    Command::cargo_bin("tpuport")
        .unwrap()
        .args(["report", "tests/data/mlp_limit.jsonl", "-o"])
        .arg(dir.path())
        .assert()
        .success();
    let md = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    let e = expected("tests/data/mlp_limit.jsonl");
    assert_eq!(row(&md, "compiles (recompiles)")[0], e[3]);
    assert_eq!(row(&md, "total compile time")[0], e[4]);
}

#[test]
fn malformed_lines_are_counted_and_bad_paths_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.jsonl");
    let mut text = std::fs::read_to_string("tests/data/train_mlp.jsonl").unwrap();
    text.insert_str(
        text.find('\n').unwrap() + 1,
        "garbage\n{\"type\":\"future_event\",\"t\":1.5}\n",
    );
    text.push_str("{\"type\":\"step\",\"t\":");
    std::fs::write(&p, text).unwrap();
    let out = dir.path().join("r");
    let a = Command::cargo_bin("tpuport")
        .unwrap()
        .arg("report")
        .arg(&p)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert!(
        stderr.contains("skipped 2 unreadable lines (the first at line 2: expected value"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "and 1 line with an event type this tpuport does not know (the first at line 3: `future_event`"
        ),
        "{stderr}"
    );
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert_eq!(row(&md, "steps")[0], "30");

    let a = Command::cargo_bin("tpuport")
        .unwrap()
        .args(["report", "no/such/run.jsonl", "-o"])
        .arg(&out)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert!(stderr.contains("no/such/run.jsonl"), "{stderr}");
}

/// A run folder whose rank file holds bytes that are not UTF-8 (a garbage line): the report is
/// written and says what it skipped (reading the folder failed on such a file before).
#[test]
fn a_rank_file_with_garbage_bytes_is_reported_not_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("job");
    std::fs::create_dir(&run).unwrap();
    let good = std::fs::read("tests/data/train_mlp.jsonl").unwrap();
    let mut bad = good.clone();
    let at = good.iter().position(|b| *b == b'\n').unwrap() + 1;
    bad.splice(at..at, b"\xff\xfe garbage\n".iter().copied());
    std::fs::write(run.join("rank0.jsonl"), &bad).unwrap();
    std::fs::write(run.join("rank1.jsonl"), &good).unwrap();
    let out = dir.path().join("r");
    let a = Command::cargo_bin("tpuport")
        .unwrap()
        .arg("report")
        .arg(&run)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert!(
        stderr.contains("rank0.jsonl: skipped 1 unreadable line (the first at line 2"),
        "{stderr}"
    );
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains("Ranks"), "{md}");
}
