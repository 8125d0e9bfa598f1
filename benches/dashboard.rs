//! Benchmarks of the dashboard's data path (`cargo bench --bench dashboard`): the aggregator with
//! 1 M step events (heap held, measured by a counting allocator, and time to add them), the same
//! with a memory sample after every step (each one different: the worst case), one frame drawn
//! from each, and `tpuport report` on a 1 M-event file.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use tpuport::profile::aggregate::Aggregator;
use tpuport::profile::event::{Event, Memory, Step};
use tpuport::ui::app::App;
use tpuport::ui::draw::{Context, draw};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const N: u64 = 1_000_000;

fn step(i: u64) -> Event {
    Event::Step(Step {
        t: i as f64 * 0.005,
        step: i + 1,
        dt: 0.005 + (i % 17) as f64 * 1e-4,
        source: "optimizer".into(),
        samples: Some(64.0),
        ..Default::default()
    })
}

fn memory(i: u64) -> Event {
    Event::Memory(Memory {
        t: i as f64 * 0.005 + 0.001,
        step: i + 1,
        allocated: Some(1 << 30 | (i * 4096)),
        peak: Some(2 << 30),
        rss: Some(700 << 20 | (i * 64)),
        ..Default::default()
    })
}

/// An aggregator fed N step events (and N memory samples too, with `with_memory`).
fn fill(with_memory: bool) -> Aggregator {
    let mut a = Aggregator::new();
    for i in 0..N {
        a.add(&step(i));
        if with_memory {
            a.add(&memory(i));
        }
    }
    a
}

fn filled_with_memory() -> &'static Aggregator {
    static AGG: OnceLock<Aggregator> = OnceLock::new();
    AGG.get_or_init(|| fill(true))
}

fn filled() -> &'static Aggregator {
    static AGG: OnceLock<Aggregator> = OnceLock::new();
    AGG.get_or_init(|| fill(false))
}

fn main() {
    let before = LIVE.load(Ordering::SeqCst);
    let a = filled();
    let held = LIVE.load(Ordering::SeqCst) - before;
    println!(
        "aggregator with {N} step events: {:.1} MB held ({:.1} MB by its own count)",
        held as f64 / 1e6,
        a.heap_bytes() as f64 / 1e6
    );
    let before = LIVE.load(Ordering::SeqCst);
    let a = filled_with_memory();
    let held = LIVE.load(Ordering::SeqCst) - before;
    println!(
        "aggregator with {N} step events and {N} distinct memory samples: {:.1} MB held ({} samples kept)",
        held as f64 / 1e6,
        a.memory.len()
    );
    divan::main();
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn aggregate_1m_steps() -> Aggregator {
    fill(false)
}

#[divan::bench(args = [(120, 40), (200, 60)])]
fn frame(b: divan::Bencher, size: (u16, u16)) {
    draw_frames(b, filled(), size);
}

#[divan::bench(args = [(120, 40)])]
fn frame_with_memory(b: divan::Bencher, size: (u16, u16)) {
    draw_frames(b, filled_with_memory(), size);
}

fn draw_frames(b: divan::Bencher, a: &Aggregator, size: (u16, u16)) {
    let mut t = Terminal::new(TestBackend::new(size.0, size.1)).unwrap();
    let app = App::new(false);
    let ctx = Context {
        elapsed: a.last_t,
        source: None,
        ..Context::default()
    };
    b.bench_local(|| {
        t.draw(|f| draw(f, &app, a, &ctx)).unwrap();
    });
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn report_1m_events(b: divan::Bencher) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("run.jsonl");
    let mut text = String::new();
    text.push_str(r#"{"type":"run_start","t":0.0,"schema":1,"unix_time":0.0,"script":"bench.py","argv":[],"target":"sim","target_reason":"bench","chip":"v5e","mode":"strict","precision":"default","hbm_bytes":17179869184,"pid":1,"runtime":"embedded","python":"3.11","torch":"2.15"}"#);
    text.push('\n');
    for i in 0..N - 2 {
        text.push_str(&step(i).to_line());
        text.push('\n');
    }
    text.push_str(r#"{"type":"run_end","t":5000.0,"exit_code":0,"status":"ok","signal":null,"exception":null,"steps":999998,"duration":5000.0}"#);
    text.push('\n');
    std::fs::write(&input, text).unwrap();
    let out = dir.path().join("report");
    b.bench_local(|| {
        tpuport::profile::report::write_report(std::slice::from_ref(&input), &out).unwrap()
    });
}
