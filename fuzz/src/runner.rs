//! The fuzz loop: start from the seeds (each run once as it is), then mutate inputs picked from
//! the corpus until the time or iteration budget is spent. Every input runs under
//! `catch_unwind`; a panic or a broken invariant is a failure, saved once per distinct message
//! under the artifacts folder (`<kind>-<hash>.<ext>` with a `.txt` beside it saying what broke),
//! and the run goes on. An input whose behaviour (the target's signature) was not seen before
//! joins the corpus, so later mutations start from it. A watchdog thread saves the input and
//! stops the process when one input runs longer than the hang limit.

use std::collections::{BTreeMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::rng::Rng;

/// One input: where it came from and its bytes.
#[derive(Clone)]
pub struct Input {
    pub name: String,
    pub data: Vec<u8>,
}

/// What one target fuzzes.
pub trait Target {
    fn name(&self) -> &'static str;
    /// File extension of its inputs (for artifacts).
    fn ext(&self) -> &'static str;
    fn seeds(&self) -> Vec<Input>;
    fn mutate(&mut self, rng: &mut Rng, input: &[u8], others: &[&[u8]]) -> Vec<u8>;
    /// Run one input: a signature of what it did (new ones grow the corpus), or the invariant
    /// it broke. `seed` varies the options of the run (unsafe fixes, chunk sizes, ...).
    fn check(&mut self, input: &[u8], seed: u64) -> Result<u64, String>;
}

pub struct Budget {
    pub duration: Option<Duration>,
    pub iterations: Option<u64>,
    pub seed: u64,
    pub hang: Duration,
    pub artifacts: PathBuf,
    pub quiet: bool,
}

/// What a run did, for the summary and bench/README.md.
#[derive(Debug, Default)]
pub struct Stats {
    pub target: &'static str,
    pub seeds: usize,
    pub iterations: u64,
    pub discovered: usize,
    pub behaviours: usize,
    pub seconds: f64,
    /// Distinct failures: first line of the message → (count, artifact).
    pub failures: BTreeMap<String, (u64, PathBuf)>,
}

static PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Panics are recorded for the loop instead of printed (the loop prints each distinct one once).
pub fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        let at = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        if let Ok(mut p) = PANIC.lock() {
            p.get_or_insert(format!("panicked at {at}: {msg}"));
        }
    }));
}

pub fn hash_of(x: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    x.hash(&mut h);
    h.finish()
}

/// Run one input once: `Ok` or the failure's message (`panicked at ...` or the invariant).
pub fn run_one(target: &mut dyn Target, data: &[u8], seed: u64) -> Result<u64, String> {
    if let Ok(mut p) = PANIC.lock() {
        *p = None;
    }
    match catch_unwind(AssertUnwindSafe(|| target.check(data, seed))) {
        Ok(Ok(sig)) => Ok(sig),
        Ok(Err(v)) => Err(format!("invariant: {v}")),
        Err(_) => Err(PANIC
            .lock()
            .ok()
            .and_then(|mut p| p.take())
            .unwrap_or_else(|| "panicked".into())),
    }
}

struct Watch {
    /// Milliseconds since `t0` when the current input started; 0 between inputs.
    started: AtomicU64,
    input: Mutex<Vec<u8>>,
    t0: Instant,
}

fn watchdog(watch: Arc<Watch>, hang: Duration, artifacts: PathBuf, ext: &'static str) {
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let s = watch.started.load(Ordering::SeqCst);
            if s == 0 {
                continue;
            }
            let ran = (watch.t0.elapsed().as_millis() as u64).saturating_sub(s);
            if ran > hang.as_millis() as u64 {
                let data = watch.input.lock().map(|d| d.clone()).unwrap_or_default();
                let path = save(&artifacts, "hang", ext, &data, "ran past the hang limit");
                eprintln!(
                    "tpuport-fuzz: an input ran for more than {}s (a hang): saved as {}; replay it with --replay",
                    hang.as_secs(),
                    path.display()
                );
                std::process::exit(3);
            }
        }
    });
}

/// Save a failing input and what broke; returns the input's path.
fn save(dir: &Path, kind: &str, ext: &str, data: &[u8], message: &str) -> PathBuf {
    let _ = std::fs::create_dir_all(dir);
    let path = dir.join(format!("{kind}-{:016x}.{ext}", hash_of(data)));
    let _ = std::fs::write(&path, data);
    let _ = std::fs::write(path.with_extension(format!("{ext}.txt")), message);
    path
}

/// Fuzz `target` within the budget.
pub fn fuzz(target: &mut dyn Target, budget: &Budget) -> Stats {
    let start = Instant::now();
    let artifacts = budget.artifacts.join(target.name());
    let watch = Arc::new(Watch {
        started: AtomicU64::new(0),
        input: Mutex::new(vec![]),
        t0: Instant::now(),
    });
    watchdog(
        Arc::clone(&watch),
        budget.hang,
        artifacts.clone(),
        target.ext(),
    );
    let seeds = target.seeds();
    let mut stats = Stats {
        target: target.name(),
        seeds: seeds.len(),
        ..Stats::default()
    };
    let mut corpus: Vec<Vec<u8>> = seeds.iter().map(|s| s.data.clone()).collect();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut rng = Rng::new(budget.seed ^ hash_of(target.name()));
    let mut last_report = Instant::now();
    let cap = corpus.len() + 4096;
    let done = |stats: &Stats| {
        budget.duration.is_some_and(|d| start.elapsed() >= d)
            || budget.iterations.is_some_and(|n| stats.iterations >= n)
    };
    let mut i = 0usize;
    while !done(&stats) {
        // The seeds first, as they are; then mutations.
        let (data, origin) = if i < seeds.len() {
            (seeds[i].data.clone(), seeds[i].name.clone())
        } else {
            let base = rng.below(corpus.len());
            let others: Vec<&[u8]> = (0..3)
                .map(|_| corpus[rng.below(corpus.len())].as_slice())
                .collect();
            let m = target.mutate(&mut rng, &corpus[base], &others);
            (m, String::new())
        };
        i += 1;
        let seed = rng.next_u64();
        if let Ok(mut w) = watch.input.lock() {
            w.clone_from(&data);
        }
        watch.started.store(
            watch.t0.elapsed().as_millis().max(1) as u64,
            Ordering::SeqCst,
        );
        let result = run_one(target, &data, seed);
        watch.started.store(0, Ordering::SeqCst);
        stats.iterations += 1;
        match result {
            Ok(sig) => {
                // A mutated input that did something new joins the corpus; once the corpus is
                // full it takes the place of a discovered input (the seeds stay).
                if seen.insert(sig) && origin.is_empty() {
                    if corpus.len() < cap {
                        corpus.push(data);
                    } else {
                        let at = seeds.len() + rng.below(cap - seeds.len());
                        corpus[at] = data;
                    }
                    stats.discovered += 1;
                }
                stats.behaviours = seen.len();
            }
            Err(msg) => {
                let key = failure_key(&msg);
                let kind = if msg.starts_with("panicked") {
                    "crash"
                } else {
                    "invariant"
                };
                let entry = stats.failures.entry(key.clone()).or_insert_with(|| {
                    let text = format!(
                        "{msg}\n\nseed {} of the run, {}\n",
                        seed,
                        if origin.is_empty() {
                            "a mutated input".to_string()
                        } else {
                            format!("the seed input {origin}")
                        }
                    );
                    let p = save(&artifacts, kind, target.ext(), &data, &text);
                    eprintln!(
                        "tpuport-fuzz: {}: {kind}: {key}\n  saved as {} (replay: tpuport-fuzz --target {} --replay {})",
                        target.name(),
                        p.display(),
                        target.name(),
                        p.display()
                    );
                    (0, p)
                });
                entry.0 += 1;
            }
        }
        if !budget.quiet && last_report.elapsed() > Duration::from_secs(30) {
            last_report = Instant::now();
            eprintln!(
                "tpuport-fuzz: {}: {:.0}s, {} inputs, {} behaviours, corpus {}, {} distinct failures",
                target.name(),
                start.elapsed().as_secs_f64(),
                stats.iterations,
                stats.behaviours,
                corpus.len(),
                stats.failures.len()
            );
        }
    }
    stats.seconds = start.elapsed().as_secs_f64();
    stats
}

/// What groups failures: a panic's place; an invariant's first line with the parts that vary
/// from input to input (quoted text, numbers, temporary paths) blanked out.
fn failure_key(msg: &str) -> String {
    let first = msg.lines().next().unwrap_or("");
    if let Some(rest) = first.strip_prefix("panicked at ") {
        let at = rest.split(": ").next().unwrap_or(rest);
        return format!("panicked at {at}");
    }
    static BLANKS: std::sync::OnceLock<[(regex::Regex, &'static str); 4]> =
        std::sync::OnceLock::new();
    let blanks = BLANKS.get_or_init(|| {
        [
            (
                regex::Regex::new(r"/tmp/\S*?/(case\d+/)?").expect("regex"),
                "DIR/",
            ),
            (regex::Regex::new(r"`[^`]*`?").expect("regex"), "`…`"),
            (
                regex::Regex::new(r#""(?:[^"\\]|\\.)*""#).expect("regex"),
                "\"…\"",
            ),
            (regex::Regex::new(r"\d+").expect("regex"), "N"),
        ]
    });
    let mut key = first.to_string();
    for (re, with) in blanks {
        key = re.replace_all(&key, *with).into_owned();
    }
    key.chars().take(160).collect()
}

/// Run one input with the default panic hook (a replay), under each of the option sets the loop
/// can pick (safe and unsafe fixes, every fourth input through the driver).
pub fn run_one_loud(target: &mut dyn Target, data: &[u8]) -> Result<u64, String> {
    let mut sig = 0;
    for seed in 0..4 {
        sig = match catch_unwind(AssertUnwindSafe(|| target.check(data, seed))) {
            Ok(Ok(s)) => s,
            Ok(Err(v)) => return Err(format!("invariant (seed {seed}): {v}")),
            Err(_) => return Err(format!("panicked (seed {seed}, message above)")),
        };
    }
    Ok(sig)
}
