//! Reading events files: all at once ([`load`] into an aggregator, for reports; [`read_events`]
//! as a list, for `check`, the rank table and `tune`) or following one as it grows
//! ([`Follower`], for `tpuport top`). All of them count and skip what is not an event they can
//! use ([`Skipped`]: unreadable lines, events of an unknown type); the follower also copes with
//! a partial last line (kept until its newline arrives, unless it grows past
//! [`MAX_LINE`]), truncation (the file was rewritten: start again from the top with fresh
//! numbers) and rotation (the path now names another file: finish the old one, then follow the
//! new one).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rayon::prelude::*;

use super::aggregate::Aggregator;
use super::event::{Event, Step};
use super::skipped::{MAX_LINE, Skip, Skipped};

/// Lines parsed in parallel per batch when loading a whole file.
const BATCH: usize = 16_384;

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| {
        format!(
            "cannot read the events file {}: check the path (tpuport run writes runs/*.jsonl)",
            path.display()
        )
    })
}

/// Every line of `data`, parsed in parallel batches, in order: (line number, what it is).
fn parse_all(data: &[u8], mut each: impl FnMut(u64, Result<Event, Skip>)) {
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    for (b, chunk) in lines.chunks(BATCH).enumerate() {
        let parsed: Vec<Option<Result<Event, Skip>>> =
            chunk.par_iter().map(|l| parse_line(l)).collect();
        for (i, p) in parsed.into_iter().enumerate() {
            if let Some(p) = p {
                each((b * BATCH + i + 1) as u64, p);
            }
        }
    }
}

/// Read a whole events file into an aggregator. Lines that are not events it can use are
/// counted (`Aggregator::skipped`, with the first one's line number) and skipped.
pub fn load(path: &Path) -> Result<Aggregator> {
    let data = read_file(path)?;
    let mut agg = Aggregator::new();
    parse_all(&data, |n, p| match p {
        Ok(e) => agg.add(&e),
        Err(why) => agg.skip_line(n, why),
    });
    Ok(agg)
}

/// A whole events file as a list of events, and what was skipped to get it.
pub fn read_events(path: &Path) -> Result<(Vec<Event>, Skipped)> {
    let data = read_file(path)?;
    let (mut events, mut skipped) = (vec![], Skipped::default());
    parse_all(&data, |n, p| match p {
        Ok(e) => events.push(e),
        Err(why) => skipped.add(n, why),
    });
    Ok((events, skipped))
}

/// One line: `None` if blank, else the event or why it is skipped.
fn parse_line(line: &[u8]) -> Option<Result<Event, Skip>> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(|b| b.is_ascii_whitespace()) {
        return None;
    }
    // Step lines are nearly all of a long run: read them straight into their struct (serde's
    // tagged-enum path buffers every object first, which doubles the cost). A line that says
    // `"type"` again goes the schema's way, so both ways agree on every line (the struct would
    // take a duplicate `type` key that the schema refuses).
    const HEAD: &[u8] = br#"{"type":"step","#;
    if line.starts_with(HEAD)
        && !line[HEAD.len()..].windows(6).any(|w| w == br#""type""#)
        && let Ok(mut s) = serde_json::from_slice::<Step>(line)
    {
        s.extra.remove("type");
        return Some(Ok(Event::Step(s)));
    }
    Some(serde_json::from_slice::<Event>(line).map_err(|e| Skip::of(line, e.to_string())))
}

/// Follows one events file as it is written.
pub struct Follower {
    pub path: PathBuf,
    file: Option<File>,
    ino: u64,
    offset: u64,
    partial: Vec<u8>,
    /// The partial line grew past `max_line` ([`MAX_LINE`]): drop bytes until its newline.
    discarding: bool,
    max_line: usize,
    line_no: u64,
}

/// What a [`Follower::poll`] found.
#[derive(Debug, Default, PartialEq)]
pub struct Polled {
    /// New complete lines were read.
    pub changed: bool,
    /// The file was truncated or rewritten: the aggregator was started afresh.
    pub restarted: bool,
    /// The path now names another file (rotation).
    pub rotated: bool,
}

impl Follower {
    pub fn new(path: &Path) -> Follower {
        Follower {
            path: path.to_path_buf(),
            file: None,
            ino: 0,
            offset: 0,
            partial: vec![],
            discarding: false,
            max_line: MAX_LINE,
            line_no: 0,
        }
    }

    /// Read what was appended since the last call into `agg`. A missing file is not an error
    /// (the job may not have started yet); an unreadable one is.
    pub fn poll(&mut self, agg: &mut Aggregator) -> Result<Polled> {
        let mut out = Polled::default();
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read {}", self.path.display()));
            }
        };
        if let (Some(m), Some(_)) = (&meta, &self.file)
            && m.ino() != self.ino
        {
            // Rotated: drain the old file, then switch.
            out.changed |= self.read_new(agg)?;
            if !self.partial.is_empty() {
                let rest = std::mem::take(&mut self.partial);
                self.line(agg, &rest);
            }
            self.file = None;
            out.rotated = true;
            agg.note(&format!(
                "{} was replaced (rotated): following the new file",
                self.path.display()
            ));
        }
        let Some(meta) = meta else { return Ok(out) };
        if self.file.is_none() {
            let f = File::open(&self.path)
                .with_context(|| format!("cannot open {}", self.path.display()))?;
            self.file = Some(f);
            self.ino = meta.ino();
            self.offset = 0;
            self.partial.clear();
            self.discarding = false;
            self.line_no = 0;
        }
        if meta.len() < self.offset {
            *agg = Aggregator::new();
            self.offset = 0;
            self.partial.clear();
            self.discarding = false;
            self.line_no = 0;
            out.restarted = true;
            agg.note(&format!(
                "{} was truncated: reading it again from the start",
                self.path.display()
            ));
        }
        out.changed |= self.read_new(agg)?;
        Ok(out)
    }

    fn read_new(&mut self, agg: &mut Aggregator) -> Result<bool> {
        let Some(f) = self.file.as_mut() else {
            return Ok(false);
        };
        f.seek(SeekFrom::Start(self.offset))?;
        let mut buf = vec![];
        f.take(64 << 20)
            .read_to_end(&mut buf)
            .with_context(|| format!("cannot read {}", self.path.display()))?;
        if buf.is_empty() {
            return Ok(false);
        }
        self.offset += buf.len() as u64;
        let mut changed = false;
        let mut rest: &[u8] = &buf;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            if self.discarding {
                // The end of a line too long to keep: it was counted when it passed the limit.
                self.discarding = false;
                self.line_no += 1;
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(&rest[..i]);
                self.line(agg, &line);
            }
            changed = true;
            rest = &rest[i + 1..];
        }
        if !self.discarding {
            self.partial.extend_from_slice(rest);
            if self.partial.len() > self.max_line {
                self.partial = vec![];
                self.discarding = true;
                agg.skip_line(
                    self.line_no + 1,
                    Skip::Unreadable(format!(
                        "a line longer than {} MiB without its end",
                        self.max_line >> 20
                    )),
                );
                changed = true;
            }
        }
        Ok(changed)
    }

    fn line(&mut self, agg: &mut Aggregator, line: &[u8]) {
        self.line_no += 1;
        match parse_line(line) {
            None => {}
            Some(Ok(e)) => agg.add(&e),
            Some(Err(why)) => agg.skip_line(self.line_no, why),
        }
    }
}

/// The events files to show for `tpuport top PATH`: the file itself, or a folder's `*.jsonl`
/// files (one per rank), sorted by name.
pub fn events_files(path: &Path) -> Result<Vec<PathBuf>> {
    if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("cannot list {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
            .collect();
        v.sort();
        Ok(v)
    } else {
        Ok(vec![path.to_path_buf()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const STEP: &str = r#"{"type":"step","t":1.0,"step":1,"dt":0.5,"source":"marker","samples":null,"tokens":null}"#;

    fn step(n: u64) -> String {
        STEP.replace("\"step\":1", &format!("\"step\":{n}"))
    }

    #[test]
    fn partial_lines_truncation_rotation_malformed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        let mut f = File::create(&p).unwrap();
        let mut agg = Aggregator::new();
        let mut fo = Follower::new(&p);
        // A line and half of the next.
        let two = step(2);
        write!(f, "{}\n{}", step(1), &two[..20]).unwrap();
        f.flush().unwrap();
        assert!(fo.poll(&mut agg).unwrap().changed);
        assert_eq!(agg.summary.steps, 1);
        write!(f, "{}\nnot json\n", &two[20..]).unwrap();
        f.flush().unwrap();
        fo.poll(&mut agg).unwrap();
        assert_eq!(agg.summary.steps, 2);
        assert_eq!(agg.skipped.unreadable, 1);
        assert_eq!(agg.skipped.first_unreadable.as_ref().unwrap().0, 3);
        // Truncated and rewritten: fresh numbers.
        let mut f = File::create(&p).unwrap();
        writeln!(f, "{}", step(1)).unwrap();
        let r = fo.poll(&mut agg).unwrap();
        assert!(r.restarted);
        assert_eq!((agg.summary.steps, agg.skipped.total()), (1, 0));
        // Rotated: the old file's tail is read, then the new file.
        writeln!(f, "{}", step(2)).unwrap();
        std::fs::rename(&p, dir.path().join("r.jsonl.1")).unwrap();
        let mut g = File::create(&p).unwrap();
        writeln!(g, "{}", step(3)).unwrap();
        let r = fo.poll(&mut agg).unwrap();
        assert!(r.rotated);
        assert_eq!(agg.summary.steps, 3);
        assert_eq!(agg.summary.step_times.len(), 3);
    }

    /// What the fuzz harness's events target feeds the readers: a huge line, an event of a
    /// type from a newer tpuport, garbage that is not UTF-8; every reader skips and counts them.
    #[test]
    fn huge_lines_unknown_types_and_garbage_are_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        let huge = "{".repeat(3 << 20);
        let mut bytes = format!(
            "{}\n{huge}\n{{\"type\":\"future_event\",\"t\":1}}\n",
            step(1)
        )
        .into_bytes();
        bytes.extend_from_slice(b"\xff\xfe\n");
        bytes.extend_from_slice(format!("{}\n", step(2)).as_bytes());
        std::fs::write(&p, &bytes).unwrap();
        let whole = load(&p).unwrap();
        assert_eq!(whole.summary.steps, 2);
        assert_eq!((whole.skipped.unreadable, whole.skipped.unknown), (2, 1));
        assert_eq!(whole.skipped.first_unreadable.as_ref().unwrap().0, 2);
        assert_eq!(
            whole.skipped.first_unknown.as_ref().unwrap().1,
            "future_event"
        );
        let (events, skipped) = read_events(&p).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(skipped, whole.skipped);
        // Followed in pieces, with a line limit below the huge line: the same counts, and the
        // huge line is never held whole.
        let grown = dir.path().join("g.jsonl");
        let mut f = File::create(&grown).unwrap();
        let mut fo = Follower::new(&grown);
        fo.max_line = 1 << 20;
        let mut agg = Aggregator::new();
        for piece in bytes.chunks(700_000) {
            f.write_all(piece).unwrap();
            fo.poll(&mut agg).unwrap();
            assert!(fo.partial.len() <= (1 << 20) + 700_000);
        }
        assert_eq!(agg.summary.steps, 2);
        let counts = |s: &Skipped| {
            let first = s.first_unreadable.as_ref().map(|f| f.0);
            (s.unreadable, s.unknown, first, s.first_unknown.clone())
        };
        assert_eq!(counts(&agg.skipped), counts(&whole.skipped));
        assert!(
            agg.skipped
                .describe()
                .unwrap()
                .contains("a line longer than 1 MiB")
        );
    }

    #[test]
    fn step_fast_path_equals_the_schema_parse() {
        let line = r#"{"type":"step","t":1.5,"step":3,"dt":0.25,"source":"optimizer","samples":64,"tokens":null,"loss":2.5}"#;
        let fast = parse_line(line.as_bytes()).unwrap().unwrap();
        assert_eq!(fast, Event::parse(line).unwrap());
        // A step line that is not a valid step is still reported.
        let bad = r#"{"type":"step","t":"x"}"#;
        assert!(parse_line(bad.as_bytes()).unwrap().is_err());
        // Found by the fuzz harness: a duplicate `type` key passed the fast path but not the
        // schema; both refuse it now (and a `"type"` inside a value still parses).
        let twice = line.replace(r#""t":"#, r#""type":"step","t":"#);
        assert!(Event::parse(&twice).is_err());
        assert!(parse_line(twice.as_bytes()).unwrap().is_err());
        let quoted = line.replace(r#""loss":2.5"#, r#""note":{"type":"x"}"#);
        assert_eq!(
            parse_line(quoted.as_bytes()).unwrap(),
            Ok(Event::parse(&quoted).unwrap())
        );
    }

    #[test]
    fn load_counts_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        std::fs::write(
            &p,
            format!("{}\n{{\"type\":\"step\"}}\n\n{}", step(1), step(2)),
        )
        .unwrap();
        let agg = load(&p).unwrap();
        assert_eq!(agg.summary.steps, 2);
        assert_eq!(agg.skipped.unreadable, 1);
        assert_eq!(agg.skipped.first_unreadable.unwrap().0, 2);
        let err = load(&dir.path().join("missing.jsonl")).unwrap_err();
        assert!(format!("{err:#}").contains("missing.jsonl"));
    }
}
