//! The "original machine" of `tpuport check`: the port also runs where the original ran (the
//! host: its CUDA, or on a machine without one the CPU in CUDA's place, `--cuda-on-cpu`), same
//! seeds and arguments, and must compute and print what the original does there. A safe fix
//! adds the TPU; it must not change the program on the machine it was written for.
//!
//! Computed: the loss of every step, bit for bit (exact equality of the two runs' recorded
//! losses; a step one run recorded and the other did not counts as a difference). Printed: the
//! script's stdout, line by line, once what differs between any two runs of one program is
//! masked: durations and rates (`12.3 ms`, `450 it/s`, `time 0.81`, `mfu 3.2%`), clock times and
//! dates, memory addresses (`0x7f…`) and the path of the run's copy of the folder. stderr is not
//! compared: warnings and library logs change with a rewrite that computes the same (the
//! deprecation warning a rewritten `torch.cuda.amp` call no longer gives). The stdout stream
//! holds the script's output only: tpuport's own lines go to the events file's `tpuport` stream
//! and to stderr (lines that start with `tpuport:` are left out all the same).

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;
use similar::{Algorithm, DiffOp, capture_diff_slices};

use super::compare::{LossRow, first_unequal, loss_table};
use super::facts::RunFacts;

/// Differing stdout lines kept for the report (all are counted).
pub const LINES_SHOWN: usize = 20;

/// What the port did on the original's machine, against the original.
#[derive(Debug, Clone, Serialize)]
pub struct OriginalMachine {
    /// Where both ran, in words.
    pub machine: String,
    /// Why the port failed there (exit other than 0, or no training step), if it did.
    pub failure: Option<PortFailure>,
    /// Steps for which both runs recorded a loss.
    pub losses_compared: usize,
    /// The first step whose losses are not the same number, with both values.
    pub first_loss_difference: Option<LossRow>,
    /// Both runs' losses by step (`original`: the original's, `port`: the port's on the host).
    pub losses: Vec<LossRow>,
    pub stdout: StdoutComparison,
}

#[derive(Debug, Clone, Serialize)]
pub struct PortFailure {
    /// The script's line that raised (`train.py:52`), when the traceback has one.
    pub at: Option<String>,
    /// That line's code.
    pub code: Option<String>,
    /// `RuntimeError: …` (its first line), or how it ended.
    pub error: String,
    /// The run's last lines of output, when no line of the script raised.
    pub output: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StdoutComparison {
    pub original_lines: usize,
    pub port_lines: usize,
    /// Lines that differ once masked (a changed line counts once).
    pub differing: usize,
    /// The first [`LINES_SHOWN`] of them.
    pub differences: Vec<LineDifference>,
    /// A run printed more than was kept (`facts::STDOUT_LINES`): the rest was not compared.
    pub cut: bool,
}

/// A stdout line of one run that the other did not print, or printed otherwise. Line numbers
/// count from 1; the texts are as printed (unmasked).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LineDifference {
    pub original_line: Option<usize>,
    pub port_line: Option<usize>,
    pub original: Option<String>,
    pub port: Option<String>,
}

impl LineDifference {
    /// `line 7: original "…" | port "…"`, or the one side there is.
    pub fn describe(&self) -> String {
        match (&self.original, &self.port) {
            (Some(o), Some(p)) => format!(
                "stdout line {}: original {o:?} | port {p:?}",
                self.original_line.unwrap_or(0)
            ),
            (Some(o), None) => format!(
                "stdout line {}, only the original prints {o:?}",
                self.original_line.unwrap_or(0)
            ),
            (None, Some(p)) => format!(
                "stdout line {}, only the port prints {p:?}",
                self.port_line.unwrap_or(0)
            ),
            (None, None) => String::new(),
        }
    }
}

/// The port's run on the host against the original's (`original_dir`, `port_dir`: the folders
/// each ran in, whose paths are masked in the output).
pub fn compare(
    original: &RunFacts,
    port: &RunFacts,
    original_dir: &Path,
    port_dir: &Path,
) -> OriginalMachine {
    let machine = if original.cuda_on_cpu || port.cuda_on_cpu {
        "the host (its CUDA on the CPU: no GPU here, --cuda-on-cpu)"
    } else {
        "the host"
    };
    let failure = (!port.ok()).then(|| {
        let at = port.failing_line(port_dir);
        PortFailure {
            code: at.as_deref().and_then(|a| source_line(port_dir, a)),
            output: match at {
                Some(_) => vec![],
                None => port
                    .output_tail
                    .iter()
                    .rev()
                    .take(5)
                    .rev()
                    .cloned()
                    .collect(),
            },
            at,
            error: port.why_failed(),
        }
    });
    let rows = loss_table(&original.losses, &port.losses);
    let compared = rows
        .iter()
        .filter(|r| r.original.is_some() && r.port.is_some())
        .count();
    let mut stdout = compare_stdout(
        &masked(&original.stdout, original_dir),
        &masked(&port.stdout, port_dir),
        &original.stdout,
        &port.stdout,
    );
    stdout.cut = original.stdout_cut || port.stdout_cut;
    OriginalMachine {
        machine: machine.to_string(),
        failure,
        losses_compared: compared,
        first_loss_difference: first_unequal(&rows).cloned(),
        losses: rows,
        stdout,
    }
}

/// The code at `file:line` in `folder`, trimmed.
fn source_line(folder: &Path, at: &str) -> Option<String> {
    let (file, line) = at.rsplit_once(':')?;
    let n: usize = line.parse().ok()?;
    let text = std::fs::read_to_string(folder.join(file)).ok()?;
    let code = text.lines().nth(n.checked_sub(1)?)?.trim();
    (!code.is_empty()).then(|| code.to_string())
}

fn masked(lines: &[String], folder: &Path) -> Vec<String> {
    let mut folders = vec![folder.display().to_string()];
    if let Ok(c) = std::fs::canonicalize(folder) {
        folders.push(c.display().to_string());
    }
    lines.iter().map(|l| mask(l, &folders)).collect()
}

/// One stdout line with what differs between two runs of the same program masked: the run's
/// folder (`folders`, longest first), dates and clock times, addresses, durations and rates, and
/// the numbers after words that name a time or a speed.
pub fn mask(line: &str, folders: &[String]) -> String {
    static RULES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
        let num = r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?";
        [
            (
                r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)?".to_string(),
                "<date>",
            ),
            // 07:25:30, 00:00:02.123, and tqdm's 00:01<00:00
            (r"\b\d{1,2}(?::\d{2}){1,2}(?:[.,]\d+)?\b".into(), "<clock>"),
            (r"\b0x[0-9a-fA-F]{6,}\b".into(), "0x<address>"),
            // 450 it/s, 1234.5 tokens/s, 3.2 samples/sec, 1.5 s/it
            (
                format!(r"{num}\s*(?:[A-Za-z]+\s*/\s*(?:s|sec|second)|s\s*/\s*[A-Za-z]+)\b"),
                "<rate>",
            ),
            (
                format!(
                    r"{num}\s*(?:ns|us|µs|ms|s|sec|secs|seconds?|mins?|minutes?|hrs?|hours?)\b"
                ),
                "<duration>",
            ),
            (
                format!(
                    r"(?i)\b(time|times|elapsed|took|eta|dt|duration|latency|throughput|speed|fps|mfu|wall)(\s*(?:taken|per \w+)?\s*[:=]?\s*){num}"
                ),
                "${1}${2}<n>",
            ),
        ]
        .into_iter()
        .map(|(r, to)| (Regex::new(&r).expect("a valid masking rule"), to))
        .collect()
    });
    let mut s = line.to_string();
    let mut by_length: Vec<&String> = folders.iter().filter(|f| !f.is_empty()).collect();
    by_length.sort_by_key(|f| std::cmp::Reverse(f.len()));
    for f in by_length {
        s = s.replace(f.as_str(), "<folder>");
    }
    for (re, to) in RULES.iter() {
        s = re.replace_all(&s, *to).into_owned();
    }
    s
}

/// The two runs' stdout, compared as masked (`a`, `b`), reported as printed (`raw_a`, `raw_b`).
pub fn compare_stdout(
    a: &[String],
    b: &[String],
    raw_a: &[String],
    raw_b: &[String],
) -> StdoutComparison {
    let keep = |l: &&String| !l.starts_with("tpuport:");
    let ia: Vec<usize> = (0..a.len()).filter(|&i| keep(&&a[i])).collect();
    let ib: Vec<usize> = (0..b.len()).filter(|&i| keep(&&b[i])).collect();
    let sa: Vec<&str> = ia.iter().map(|&i| a[i].as_str()).collect();
    let sb: Vec<&str> = ib.iter().map(|&i| b[i].as_str()).collect();
    let mut differences = vec![];
    let mut differing = 0;
    let mut add = |o: Option<usize>, p: Option<usize>| {
        differing += 1;
        if differences.len() < LINES_SHOWN {
            differences.push(LineDifference {
                original_line: o.map(|i| ia[i] + 1),
                port_line: p.map(|i| ib[i] + 1),
                original: o.map(|i| raw_a[ia[i]].clone()),
                port: p.map(|i| raw_b[ib[i]].clone()),
            });
        }
    };
    for op in capture_diff_slices(Algorithm::Myers, &sa, &sb) {
        let (old, old_len, new, new_len) = match op {
            DiffOp::Equal { .. } => continue,
            DiffOp::Delete {
                old_index,
                old_len,
                new_index,
            } => (old_index, old_len, new_index, 0),
            DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => (old_index, 0, new_index, new_len),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => (old_index, old_len, new_index, new_len),
        };
        for k in 0..old_len.max(new_len) {
            add(
                (k < old_len).then_some(old + k),
                (k < new_len).then_some(new + k),
            );
        }
    }
    StdoutComparison {
        original_lines: sa.len(),
        port_lines: sb.len(),
        differing,
        differences,
        cut: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::verdict::{Verdict, original_machine_section};
    use crate::profile::event::Event;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn masking_keeps_results_and_hides_timings_clocks_addresses_and_the_folder() {
        let f = s(&["/tmp/r/work/port-host"]);
        let m = |l: &str| mask(l, &f);
        // nanoGPT's line: the loss stays, the time and the MFU that follows from it go.
        assert_eq!(
            m("iter 10: loss 4.1234, time 123.45ms, mfu 3.21%"),
            "iter 10: loss 4.1234, time <duration>, mfu <n>%"
        );
        assert_eq!(
            m("Epoch[1] Complete. Time taken: 00:00:02.123"),
            "Epoch[1] Complete. Time taken: <clock>"
        );
        assert_eq!(
            m("100%|###| 60/60 [00:01<00:00, 45.2it/s]"),
            "100%|###| 60/60 [<clock><<clock>, <rate>]"
        );
        assert_eq!(m("2.5 s/it, 1200 tokens/sec"), "<rate>, <rate>");
        assert_eq!(
            m("epoch 3 took 1.5s (dt=0.25)"),
            "epoch 3 took <duration> (dt=<n>)"
        );
        assert_eq!(
            m("saved /tmp/r/work/port-host/ckpt.pt at 2026-12-05 07:25:30"),
            "saved <folder>/ckpt.pt at <date>"
        );
        assert_eq!(
            m("<Model object at 0x7f3a2b1c9d00>"),
            "<Model object at 0x<address>>"
        );
        // What a script computes is not masked: accuracies, step counts, a changed device.
        for kept in [
            "accuracy 97.25%",
            "step 3: loss 2.500000",
            "using device tpu",
            "3 steps, 12 samples",
        ] {
            assert_eq!(m(kept), kept);
        }
    }

    #[test]
    fn stdout_differences_are_paired_and_counted_with_their_line_numbers() {
        let a = s(&["start", "step 0: loss 1.0", "step 1: loss 0.5", "done"]);
        let b = s(&[
            "start",
            "step 0: loss 1.0",
            "step 1: loss 0.6",
            "extra",
            "done",
        ]);
        let c = compare_stdout(&a, &b, &a, &b);
        assert_eq!(c.differing, 2);
        assert_eq!(
            c.differences[0],
            LineDifference {
                original_line: Some(3),
                port_line: Some(3),
                original: Some("step 1: loss 0.5".into()),
                port: Some("step 1: loss 0.6".into()),
            }
        );
        assert_eq!(c.differences[1].original, None);
        assert_eq!(c.differences[1].port_line, Some(4));
        assert_eq!(
            c.differences[1].describe(),
            "stdout line 4, only the port prints \"extra\""
        );
        let same = compare_stdout(&a, &a, &a, &a);
        assert_eq!((same.differing, same.original_lines), (0, 4));
        // tpuport's own lines are not the script's output.
        let noted = s(&[
            "start",
            "tpuport: note",
            "step 0: loss 1.0",
            "step 1: loss 0.5",
            "done",
        ]);
        assert_eq!(compare_stdout(&a, &noted, &a, &noted).differing, 0);
    }

    fn events(losses: &[f64], stdout: &[&str], end: &str) -> RunFacts {
        let steps: Vec<Option<f64>> = losses.iter().map(|l| Some(*l)).collect();
        run(&steps, stdout, end)
    }

    /// A host run's facts: one step event per entry (with its loss, if any), stdout, the end.
    fn run(steps: &[Option<f64>], stdout: &[&str], end: &str) -> RunFacts {
        let mut lines = vec![
            r#"{"type":"log","t":0.5,"stream":"tpuport","line":"host: no CUDA here; the script's CUDA devices run on the CPU"}"#.to_string(),
        ];
        for (i, l) in steps.iter().enumerate() {
            let loss = l.map(|l| format!(r#","loss":{l:?}"#)).unwrap_or_default();
            lines.push(format!(
                r#"{{"type":"step","t":1,"step":{},"dt":0.1,"source":"optimizer","samples":null,"tokens":null{loss}}}"#,
                i + 1
            ));
        }
        for o in stdout {
            lines.push(format!(
                r#"{{"type":"log","t":1.5,"stream":"stdout","line":{}}}"#,
                serde_json::to_string(o).unwrap()
            ));
        }
        lines.push(end.to_string());
        let evs: Vec<Event> = lines.iter().map(|l| Event::parse(l).unwrap()).collect();
        RunFacts::from_events(&evs)
    }

    const OK: &str = r#"{"type":"run_end","t":3,"exit_code":0,"status":"ok","signal":null,"exception":null,"steps":2,"duration":3}"#;

    #[test]
    fn identical_runs_a_changed_loss_and_a_port_that_fails_there() {
        let dir = Path::new("/w/original");
        let port_dir = Path::new("/w/port-host");
        let losses = [4.538668155670166, 5.015171527862549];
        let original = events(
            &losses,
            &[
                "step 0: loss 4.5387, 1.20 ms",
                "step 1: loss 5.0152, 0.90 ms",
            ],
            OK,
        );
        let same = events(
            &losses,
            &[
                "step 0: loss 4.5387, 1.31 ms",
                "step 1: loss 5.0152, 0.88 ms",
            ],
            OK,
        );
        let m = compare(&original, &same, dir, port_dir);
        assert!(m.failure.is_none() && m.first_loss_difference.is_none());
        assert_eq!((m.losses_compared, m.stdout.differing), (2, 0));
        assert!(m.machine.contains("--cuda-on-cpu"), "{}", m.machine);
        let sec = original_machine_section(&m);
        assert_eq!(sec.verdict, Verdict::Ready);
        assert!(
            sec.summary.ends_with(
                "as the original does: the same losses bit for bit on all 2 steps, and it prints the same (2 stdout lines)"
            ),
            "{}",
            sec.summary
        );

        // Same losses, but a line the port prints otherwise: needs work, with the line.
        let printed = events(
            &losses,
            &[
                "step 0: loss 4.5387, 1.31 ms",
                "step 1 on tpu: loss 5.0152, 0.88 ms",
            ],
            OK,
        );
        let sec = original_machine_section(&compare(&original, &printed, dir, port_dir));
        assert_eq!(sec.verdict, Verdict::NeedsWork);
        assert!(
            sec.summary.contains("but 1 of its 2 stdout lines differ"),
            "{}",
            sec.summary
        );
        assert_eq!(
            sec.items,
            [
                "stdout line 2: original \"step 1: loss 5.0152, 0.90 ms\" | port \"step 1 on tpu: loss 5.0152, 0.88 ms\""
            ]
        );

        // The second loss one bit off: blocked, step 2 named with both values.
        let off = f64::from_bits(losses[1].to_bits() + 1);
        let changed = events(
            &[losses[0], off],
            &[
                "step 0: loss 4.5387, 1.31 ms",
                "step 1: loss 5.0152, 0.88 ms",
            ],
            OK,
        );
        let m = compare(&original, &changed, dir, port_dir);
        let d = m.first_loss_difference.as_ref().unwrap();
        assert_eq!(
            (d.step, d.original, d.port),
            (2, Some(losses[1]), Some(off))
        );
        assert_eq!(
            m.stdout.differing, 0,
            "the printed loss is rounded: only the losses tell"
        );
        let sec = original_machine_section(&m);
        assert_eq!(sec.verdict, Verdict::Blocked);
        assert!(
            sec.summary.contains(&format!(
                "the loss of step 2 is 5.015171527862549 in the original and {off} in the port"
            )),
            "{}",
            sec.summary
        );
        assert_eq!(
            sec.items[0],
            format!("step 2: original 5.015171527862549 | port {off}")
        );

        // The port fails there: blocked, with the line and the exception.
        let failed = events(
            &[],
            &[],
            r#"{"type":"run_end","t":3,"exit_code":1,"status":"exception","signal":null,"exception":{"type":"RuntimeError","message":"Expected one of cpu, cuda device type at start of device string: tpu","traceback":"Traceback (most recent call last):\n  File \"/w/port-host/train.py\", line 52, in <module>\n"},"steps":0,"duration":3}"#,
        );
        let m = compare(&original, &failed, dir, port_dir);
        let f = m.failure.as_ref().unwrap();
        assert_eq!(f.at.as_deref(), Some("train.py:52"));
        assert!(
            f.error
                .starts_with("RuntimeError: Expected one of cpu, cuda"),
            "{}",
            f.error
        );
        assert_eq!(m.stdout.differing, 2);
        let sec = original_machine_section(&m);
        assert_eq!(sec.verdict, Verdict::Blocked);
        assert!(
            sec.summary.starts_with("the port fails on the host"),
            "{}",
            sec.summary
        );
        assert_eq!(sec.items, ["at train.py:52"], "no file there to quote");

        // The original recorded a loss the port did not: that step differs.
        let no_loss = run(&[None, None], &["step 0", "step 1"], OK);
        let m = compare(&original, &no_loss, dir, port_dir);
        let d = m.first_loss_difference.as_ref().unwrap();
        assert_eq!((d.step, d.port), (1, None));
        assert!(
            original_machine_section(&m)
                .summary
                .contains("is 4.538668155670166 in the original and no loss in the port")
        );
        // Neither recorded one (a loop with no backward on a scalar): nothing to compare.
        let sec = original_machine_section(&compare(&no_loss, &no_loss, dir, port_dir));
        assert_eq!(sec.verdict, Verdict::NeedsWork);
        assert!(
            sec.summary.contains("neither run recorded a loss"),
            "{}",
            sec.summary
        );
    }
}
