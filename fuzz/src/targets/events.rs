//! Events files (`tpuport run --events`), from the recorded runs in `tests/data`: lines cut short,
//! garbage and huge lines, steps out of order or twice, unknown event types, fields of the wrong
//! type or at their extremes, and text damage. Every reader runs on each input: the whole-file
//! loader (`report`, `top` of a finished file), the live follower fed the file as it grows in
//! random pieces (sometimes truncated and rewritten), the dashboard drawn at several sizes after
//! keys, the summary, the key table, `check`'s reader, and (every 16th input) `tpuport report`
//! into a folder and a `--nproc` run folder. Invariants: no panic; every line the loader skips is
//! one that does not parse, and it counts them all; the follower ends with the loader's numbers.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::Value;
use tpuport::profile::aggregate::Aggregator;
use tpuport::profile::event::Event;
use tpuport::profile::follow::{self, Follower};
use tpuport::profile::{ranks, report};
use tpuport::ui::app::App;
use tpuport::ui::draw::{Context, draw};

use crate::mutate;
use crate::rng::Rng;
use crate::runner::{Input, Target, hash_of};
use crate::seeds;
use crate::structured;

const EVENTS_DICT: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\n",
    "\r\n",
    "null",
    "\"type\"",
    "\"step\"",
    "\"t\"",
    "\"dt\"",
    "\"run_start\"",
    "\"run_end\"",
    "\"compile\"",
    "\"memory\"",
    "\"sync\"",
    "\"log\"",
    "\"warning\"",
    "\"future_event\"",
    "\"CollectiveWait\"",
    "\"limit_hit\"",
    "\"failed\"",
    "\"phases\"",
    "\"hbm_sampled\"",
    "\"collective_s\"",
    "-1",
    "1e308",
    "18446744073709551615",
    "NaN",
    "\u{0}",
    "\\u0000",
];

pub struct Events {
    dir: tempfile::TempDir,
    n: u64,
}

impl Events {
    pub fn new() -> Events {
        Events {
            dir: tempfile::tempdir().expect("a temporary folder"),
            n: 0,
        }
    }
}

/// Lines, each without its `\n`.
fn lines(data: &[u8]) -> Vec<Vec<u8>> {
    data.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect()
}

fn garbage(rng: &mut Rng) -> Vec<u8> {
    match rng.below(8) {
        0 => b"not json".to_vec(),
        1 => b"{".to_vec(),
        2 => b"[]".to_vec(),
        3 => b"{\"type\":\"step\"}".to_vec(),
        4 => (0..rng.small(300)).map(|_| rng.below(256) as u8).collect(),
        5 => b"{\"type\":\"future_event\",\"t\":1.0,\"payload\":{\"x\":[1,2]}}".to_vec(),
        6 => b"\xff\xfe garbage \xc3".to_vec(),
        _ => b"{\"type\":\"log\",\"t\":0.5,\"stream\":\"stdout\",\"line\":\"ok\"}".to_vec(),
    }
}

fn huge(rng: &mut Rng) -> Vec<u8> {
    let n = rng.range(64 * 1024, 200 * 1024);
    if rng.one_in(2) {
        format!(
            "{{\"type\":\"log\",\"t\":1.0,\"stream\":\"stdout\",\"line\":\"{}\"}}",
            "x".repeat(n)
        )
        .into_bytes()
    } else {
        vec![b'{'; n]
    }
}

impl Target for Events {
    fn name(&self) -> &'static str {
        "events"
    }

    fn ext(&self) -> &'static str {
        "jsonl"
    }

    fn seeds(&self) -> Vec<Input> {
        seeds::from_repo(&["tests/data"], &["jsonl"])
    }

    fn mutate(&mut self, rng: &mut Rng, input: &[u8], others: &[&[u8]]) -> Vec<u8> {
        if rng.one_in(3) {
            return mutate::mutate(rng, input, EVENTS_DICT, others);
        }
        let mut ls = lines(input);
        for _ in 0..1 + rng.small(4) {
            let n = ls.len();
            let at = rng.below(n.max(1));
            match rng.below(10) {
                0 => {
                    // The last line cut short (a job still writing, or killed).
                    if let Some(last) = ls.iter_mut().rev().find(|l| !l.is_empty()) {
                        let keep = rng.below(last.len() + 1);
                        last.truncate(keep);
                    }
                    if rng.one_in(2) && ls.last().is_some_and(Vec::is_empty) {
                        ls.pop();
                    }
                }
                1 => ls.insert(at, garbage(rng)),
                2 => ls.insert(at, huge(rng)),
                3 if n > 1 => {
                    // Out of order.
                    let b = rng.below(n);
                    ls.swap(at, b);
                }
                4 if n > 0 => {
                    // A line twice (a duplicate step).
                    let l = ls[at].clone();
                    ls.insert(at, l);
                }
                5 if n > 0 => {
                    // An event type this reader does not know.
                    let t = rng
                        .pick(&["future_event", "step2", "", "STEP", "run_end "])
                        .to_string();
                    if let Ok(mut v) = serde_json::from_slice::<Value>(&ls[at])
                        && let Some(o) = v.as_object_mut()
                    {
                        o.insert("type".into(), Value::String(t));
                        ls[at] = serde_json::to_vec(&v).unwrap_or_default();
                    }
                }
                6 | 7 if n > 0 => {
                    if let Ok(mut v) = serde_json::from_slice::<Value>(&ls[at]) {
                        structured::mutate_json(rng, &mut v, EVENTS_DICT);
                        ls[at] = serde_json::to_vec(&v).unwrap_or_default();
                    }
                }
                8 if n > 0 => {
                    ls.remove(at);
                }
                _ => {
                    if let Some(other) = (!others.is_empty()).then(|| *rng.pick(others)) {
                        let theirs = lines(other);
                        let from = rng.below(theirs.len());
                        let k = rng.range(1, 30).min(theirs.len() - from);
                        ls.splice(at..at, theirs[from..from + k].iter().cloned());
                    }
                }
            }
        }
        let mut out = ls.join(&b'\n');
        out.truncate(mutate::MAX_LEN * 2);
        out
    }

    fn check(&mut self, input: &[u8], seed: u64) -> Result<u64, String> {
        self.n += 1;
        let path = self.dir.path().join("run.jsonl");
        std::fs::write(&path, input).map_err(|e| e.to_string())?;
        let agg = follow::load(&path).map_err(|e| format!("the loader failed: {e:#}"))?;
        skipped_lines_hold(input, &agg)?;
        let mut rng = Rng::new(seed);
        follower_agrees(&self.dir.path().join("grown.jsonl"), input, &mut rng)?;
        draw_screens(&agg, &mut rng);
        let _ = agg.summary.render();
        let _ = report::KeyNumbers::of(&agg);
        let facts = tpuport::check::facts::RunFacts::read(&path)
            .map_err(|e| format!("check's reader failed: {e:#}"))?;
        if facts.skipped.total() != agg.skipped.total() {
            return Err("check's reader skips other lines than the loader".into());
        }
        if seed.is_multiple_of(16) {
            let out = self.dir.path().join("report");
            if let Err(e) = report::write_report(std::slice::from_ref(&path), &out) {
                let msg = format!("{e:#}");
                if !msg.contains("run.jsonl") {
                    return Err(format!("report's error does not name the file: {msg}"));
                }
            }
            let folder = self.dir.path().join("ranks");
            let _ = std::fs::create_dir_all(&folder);
            std::fs::write(folder.join("rank0.jsonl"), input).map_err(|e| e.to_string())?;
            std::fs::write(folder.join("rank1.jsonl"), b"").map_err(|e| e.to_string())?;
            let rows = ranks::read_folder(&folder)
                .map_err(|e| format!("the rank table's reader failed: {e:#}"))?;
            let stats = ranks::whole_run(&rows);
            let table = ranks::render(&rows);
            let _ = ranks::straggler_line(&stats);
            let _ = ranks::awaited_line(&rows, &stats);
            if !agg.skipped.is_empty() && !table.contains("skipped") {
                return Err("the rank table does not say what it skipped".into());
            }
        }
        Ok(hash_of((
            agg.summary.steps.min(3),
            agg.skipped.unreadable > 0,
            agg.skipped.unknown > 0,
            agg.run_start().is_some(),
            agg.run_end().map(|e| e.status.clone()),
            agg.compiles.len().min(3),
            agg.memory.len().min(3),
        )))
    }
}

/// The loader skips exactly the lines that are not events, counts them all, tells an event of
/// an unknown type from an unreadable line, and says where the first of each is; its
/// description of them is one line.
fn skipped_lines_hold(input: &[u8], agg: &Aggregator) -> Result<(), String> {
    let (mut bad, mut unknown) = (vec![], vec![]);
    for (i, l) in input.split(|b| *b == b'\n').enumerate() {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        if l.iter().all(u8::is_ascii_whitespace) || serde_json::from_slice::<Event>(l).is_ok() {
            continue;
        }
        let n = i as u64 + 1;
        match serde_json::from_slice::<Value>(l) {
            Ok(Value::Object(o))
                if o.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !tpuport::profile::skipped::KNOWN_TYPES.contains(&t)) =>
            {
                unknown.push(n)
            }
            _ => bad.push(n),
        }
    }
    let s = &agg.skipped;
    if (s.unreadable, s.unknown) != (bad.len() as u64, unknown.len() as u64) {
        return Err(format!(
            "the loader skipped {} unreadable and {} unknown lines, the file has {} and {} (lines {:?} and {:?})",
            s.unreadable,
            s.unknown,
            bad.len(),
            unknown.len(),
            &bad[..bad.len().min(8)],
            &unknown[..unknown.len().min(8)]
        ));
    }
    let first = |f: &Option<(u64, String)>| f.as_ref().map(|x| x.0);
    if first(&s.first_unreadable) != bad.first().copied()
        || first(&s.first_unknown) != unknown.first().copied()
    {
        return Err(format!(
            "the first skipped lines are reported as {:?}/{:?}, they are {:?}/{:?}",
            first(&s.first_unreadable),
            first(&s.first_unknown),
            bad.first(),
            unknown.first()
        ));
    }
    if let Some(d) = s.describe()
        && d.contains('\n')
    {
        return Err(format!("what was skipped is not said in one line: {d:?}"));
    }
    Ok(())
}

/// Feed the file to a follower in random pieces (sometimes truncating it midway and writing it
/// again): at the end it holds what the loader reads from the whole file.
fn follower_agrees(path: &Path, input: &[u8], rng: &mut Rng) -> Result<(), String> {
    let mut content = input.to_vec();
    if !content.ends_with(b"\n") {
        content.push(b'\n');
    }
    let _ = std::fs::remove_file(path);
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| e.to_string())?;
    let mut fo = Follower::new(path);
    let mut agg = Aggregator::new();
    let truncate_at = rng.one_in(6).then(|| rng.below(content.len() + 1));
    let mut at = 0;
    let mut truncated = false;
    while at < content.len() {
        let n = rng.range(1, 4096).min(content.len() - at);
        f.write_all(&content[at..at + n])
            .map_err(|e| e.to_string())?;
        at += n;
        fo.poll(&mut agg)
            .map_err(|e| format!("the follower failed: {e:#}"))?;
        if let Some(t) = truncate_at
            && !truncated
            && at >= t
            && at > 0
        {
            // The file is rewritten by a new run: emptied, then written again from the start.
            truncated = true;
            f.set_len(0).map_err(|e| e.to_string())?;
            let r = fo
                .poll(&mut agg)
                .map_err(|e| format!("the follower failed: {e:#}"))?;
            if !r.restarted {
                return Err("the follower missed a truncation".into());
            }
            at = 0;
        }
    }
    fo.poll(&mut agg)
        .map_err(|e| format!("the follower failed: {e:#}"))?;
    let whole = std::fs::read(path).map_err(|e| e.to_string())?;
    if whole != content {
        return Err("the test's file is not the input".into());
    }
    let loaded = follow::load(path).map_err(|e| e.to_string())?;
    let key = |a: &Aggregator| {
        (
            a.summary.steps,
            a.summary.step_times.len(),
            a.skipped.unreadable,
            a.skipped.unknown,
            a.skipped.first_unreadable.as_ref().map(|m| m.0),
            a.run_end().is_some(),
            a.compiles.len(),
        )
    };
    if key(&agg) != key(&loaded) {
        return Err(format!(
            "the follower ends with {:?}, the loader reads {:?}",
            key(&agg),
            key(&loaded)
        ));
    }
    Ok(())
}

/// The dashboard at several sizes, live and ended, after a few keys.
fn draw_screens(agg: &Aggregator, rng: &mut Rng) {
    let keys = [
        KeyCode::Char('f'),
        KeyCode::Char('s'),
        KeyCode::Char('?'),
        KeyCode::Char('+'),
        KeyCode::Char('-'),
        KeyCode::Char('r'),
        KeyCode::Char('n'),
        KeyCode::Char('p'),
        KeyCode::Char('q'),
        KeyCode::Esc,
        KeyCode::Up,
        KeyCode::Down,
        KeyCode::PageUp,
        KeyCode::PageDown,
        KeyCode::Tab,
        KeyCode::Left,
        KeyCode::Right,
        KeyCode::Home,
        KeyCode::End,
    ];
    let mut app = App::new(true);
    let ctx = Context {
        elapsed: agg.last_t,
        source: Some("run.jsonl".into()),
        ..Context::default()
    };
    for (w, h) in [(120, 40), (80, 24), (30, 10), (200, 60)] {
        for _ in 0..rng.small(4) {
            app.key(
                KeyEvent::new(*rng.pick(&keys), KeyModifiers::NONE),
                agg.last_t,
            );
        }
        if rng.one_in(2) && agg.run_end().is_some() {
            app.script_ended();
        }
        let Ok(mut t) = Terminal::new(TestBackend::new(w, h));
        let _ = t.draw(|f| draw(f, &app, agg, &ctx));
    }
}
