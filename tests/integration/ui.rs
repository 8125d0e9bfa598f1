//! Snapshot tests of every dashboard screen, drawn into ratatui's TestBackend from event streams
//! recorded with `tpuport run` (tests/data/*.jsonl, paths shortened; `hbm_pressure.jsonl` is
//! synthetic: a steady climb past the v5e's 16 GiB).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use tpuport::profile::aggregate::Aggregator;
use tpuport::profile::event::Event;
use tpuport::profile::follow::load;
use tpuport::ui::app::App;
use tpuport::ui::draw::{Context, draw};

fn events(name: &str) -> Vec<Event> {
    let text = std::fs::read_to_string(format!("tests/data/{name}.jsonl")).unwrap();
    text.lines().map(|l| Event::parse(l).unwrap()).collect()
}

/// The aggregator after the first `n` events (all of them when `n` is None).
fn agg(name: &str, n: Option<usize>) -> Aggregator {
    let evs = events(name);
    let mut a = Aggregator::new();
    for e in evs.iter().take(n.unwrap_or(evs.len())) {
        a.add(e);
    }
    a
}

fn running(name: &str) -> Aggregator {
    let evs = events(name);
    let end = evs
        .iter()
        .position(|e| matches!(e, Event::RunEnd(_)))
        .unwrap_or(evs.len());
    agg(name, Some(end))
}

fn screen(app: &App, agg: &Aggregator, source: Option<&str>) -> String {
    let mut t = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let ctx = Context {
        elapsed: agg.last_t,
        source: source.map(str::to_string),
        ..Context::default()
    };
    t.draw(|f| draw(f, app, agg, &ctx)).unwrap();
    format!("{}", t.backend())
}

fn ended(agg: &Aggregator) -> App {
    let mut app = App::new(false);
    if agg.run_end().is_some() {
        app.script_ended();
    }
    app
}

fn key(app: &mut App, agg: &Aggregator, c: KeyCode) {
    app.key(KeyEvent::new(c, KeyModifiers::NONE), agg.last_t);
}

#[test]
fn running_training_loop() {
    let a = running("train_mlp");
    insta::assert_snapshot!(screen(&App::new(false), &a, None));
}

#[test]
fn summary_after_the_end() {
    let a = agg("train_mlp", None);
    insta::assert_snapshot!(screen(&ended(&a), &a, None));
}

#[test]
fn dashboard_after_the_end() {
    let a = agg("train_mlp", None);
    let mut app = ended(&a);
    key(&mut app, &a, KeyCode::Char('s'));
    insta::assert_snapshot!(screen(&app, &a, None));
}

#[test]
fn recompile_limit_hit() {
    let a = running("mlp_limit");
    let mut app = App::new(false);
    key(&mut app, &a, KeyCode::Tab);
    key(&mut app, &a, KeyCode::Tab);
    insta::assert_snapshot!(screen(&app, &a, None));
}

#[test]
fn recompile_limit_summary() {
    let a = agg("mlp_limit", None);
    insta::assert_snapshot!(screen(&ended(&a), &a, None));
}

#[test]
fn exception_summary() {
    let a = agg("fail_exception", None);
    insta::assert_snapshot!(screen(&ended(&a), &a, None));
}

#[test]
fn hbm_growing_forecast() {
    let a = agg("hbm_pressure", Some(60));
    insta::assert_snapshot!(screen(&App::new(false), &a, None));
}

#[test]
fn hbm_does_not_fit() {
    let a = agg("hbm_pressure", None);
    let mut app = App::new(false);
    key(&mut app, &a, KeyCode::Tab);
    insta::assert_snapshot!(screen(&app, &a, None));
}

#[test]
fn device_memory_recorded() {
    // Recorded with the sim target's HBM tracker.
    let a = agg("train_hbm", None);
    let mut app = ended(&a);
    key(&mut app, &a, KeyCode::Char('s'));
    insta::assert_snapshot!(screen(&app, &a, None));
}

#[test]
fn device_memory_over_a_small_hbm() {
    // Recorded with `--hbm 1MiB`: the memory events carry that capacity.
    let a = running("train_hbm_small");
    insta::assert_snapshot!(screen(&App::new(false), &a, None));
}

#[test]
fn frozen_and_narrow_window() {
    let a = running("train_defer");
    let mut app = App::new(false);
    key(&mut app, &a, KeyCode::Right);
    key(&mut app, &a, KeyCode::Right);
    key(&mut app, &a, KeyCode::Char('f'));
    insta::assert_snapshot!(screen(&app, &a, None));
}

#[test]
fn help_overlay() {
    let a = running("train_mlp");
    let mut app = App::new(false);
    key(&mut app, &a, KeyCode::Char('?'));
    insta::assert_snapshot!(screen(&app, &a, None));
}

#[test]
fn quit_asks_first() {
    let a = running("train_mlp");
    let mut app = App::new(false);
    key(&mut app, &a, KeyCode::Char('q'));
    insta::assert_snapshot!(screen(&app, &a, None));
}

#[test]
fn output_scrolled_up() {
    let a = running("mlp_limit");
    let mut app = App::new(false);
    for _ in 0..4 {
        key(&mut app, &a, KeyCode::BackTab);
    }
    key(&mut app, &a, KeyCode::Up);
    key(&mut app, &a, KeyCode::Up);
    insta::assert_snapshot!(screen(&app, &a, None));
}

#[test]
fn attached_with_malformed_lines() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("rank0.jsonl");
    let mut text = std::fs::read_to_string("tests/data/train_mlp.jsonl").unwrap();
    let cut = text.find("\n{\"type\":\"run_end\"").unwrap();
    text.truncate(cut + 1);
    text.insert_str(
        text.find('\n').unwrap() + 1,
        "{not json\n{\"type\":\"step\"}\n",
    );
    std::fs::write(&p, text).unwrap();
    let a = load(&p).unwrap();
    assert_eq!(a.skipped.unreadable, 2);
    insta::assert_snapshot!(screen(&App::new(true), &a, Some("rank0.jsonl (1/2)")));
}

#[test]
fn empty_before_run_start() {
    insta::assert_snapshot!(screen(
        &App::new(true),
        &Aggregator::new(),
        Some("waiting for *.jsonl in runs")
    ));
}

#[test]
fn tiny_terminal_does_not_break() {
    // Every screen draws into a very small terminal without panicking.
    let a = agg("mlp_limit", None);
    for (w, h) in [(20, 5), (40, 12), (1, 1)] {
        for keys in [&[][..], &[KeyCode::Char('s')], &[KeyCode::Char('?')]] {
            let mut app = ended(&a);
            for k in keys {
                key(&mut app, &a, *k);
            }
            let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
            let ctx = Context::default();
            t.draw(|f| draw(f, &app, &a, &ctx)).unwrap();
        }
    }
    let mut app = App::new(false);
    key(&mut app, &a, KeyCode::Char('q'));
    let mut t = Terminal::new(TestBackend::new(30, 8)).unwrap();
    t.draw(|f| draw(f, &app, &running("mlp_limit"), &Context::default()))
        .unwrap();
    insta::assert_snapshot!(format!("{}", t.backend()));
}
