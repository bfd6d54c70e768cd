//! Reading what a libtest (or libtest-mimic) test binary printed.
//!
//! The conformance suite is a `libtest-mimic` binary, so its output has libtest's shape:
//! one `test <name> ... ok|FAILED|ignored` line per case and a closing
//! `test result: ok. 34 passed; 0 failed; 68 ignored; 0 measured; 0 filtered out; finished in 0.37s`.
//! The suite also prints `skipping the <kind> backend: <reason>` for each backend it could not
//! open. Only these lines are relied on; anything else in the output is ignored.

/// The counts of libtest's closing `test result:` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// `true` for `test result: ok.`, `false` for `test result: FAILED.`.
    pub ok: bool,
    /// Cases that ran and passed.
    pub passed: u64,
    /// Cases that ran and failed.
    pub failed: u64,
    /// Cases reported as ignored (on the conformance suite: their backend is unavailable).
    pub ignored: u64,
}

/// What one run of a test binary reported.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunOutput {
    /// The last `test result:` line, if there was one (a build failure or a crash leaves none).
    pub summary: Option<Summary>,
    /// Names of the cases reported as `FAILED`.
    pub failed_cases: Vec<String>,
    /// `(backend, reason)` for every `skipping the <backend> backend: <reason>` line.
    pub skipped_backends: Vec<(String, String)>,
}

/// Parses a whole run's standard output.
pub fn parse_output(stdout: &str) -> RunOutput {
    let mut output = RunOutput::default();
    for line in stdout.lines() {
        let line = line.trim_end();
        if let Some(summary) = parse_summary_line(line) {
            // Several test binaries print several summaries; the suite is one binary, but keep
            // the last so stray earlier output cannot mask the real result.
            output.summary = Some(summary);
        } else if let Some(name) = parse_failed_case(line) {
            output.failed_cases.push(name);
        } else if let Some(skip) = parse_skip_line(line) {
            output.skipped_backends.push(skip);
        }
    }
    output
}

/// Parses `test result: ok. 34 passed; 0 failed; 68 ignored; 0 measured; ...`.
pub fn parse_summary_line(line: &str) -> Option<Summary> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let (verdict, counts) = rest.split_once(". ")?;
    let ok = match verdict {
        "ok" => true,
        "FAILED" => false,
        _ => return None,
    };
    let mut summary = Summary {
        ok,
        ..Summary::default()
    };
    let mut seen = [false; 3];
    for part in counts.split(';') {
        let mut words = part.split_whitespace();
        let (Some(number), Some(label)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(number) = number.parse::<u64>() else {
            continue;
        };
        let slot = match label {
            "passed" => (&mut summary.passed, 0),
            "failed" => (&mut summary.failed, 1),
            "ignored" => (&mut summary.ignored, 2),
            _ => continue,
        };
        *slot.0 = number;
        seen[slot.1] = true;
    }
    // A line missing any of the three counts is not libtest's summary.
    seen.iter().all(|s| *s).then_some(summary)
}

/// Parses `test <name> ... FAILED` (libtest-mimic puts a `[kind]` tag before the name).
fn parse_failed_case(line: &str) -> Option<String> {
    let rest = line.strip_prefix("test ")?;
    let (name, verdict) = rest.rsplit_once(" ... ")?;
    if verdict.trim() != "FAILED" {
        return None;
    }
    let name = name.trim();
    let name = match name.strip_prefix('[') {
        Some(tagged) => tagged.split_once(']').map_or(name, |(_, n)| n.trim()),
        None => name,
    };
    Some(name.to_string())
}

/// Parses the conformance suite's `skipping the <kind> backend: <reason>`.
fn parse_skip_line(line: &str) -> Option<(String, String)> {
    let rest = line.strip_prefix("skipping the ")?;
    let (kind, reason) = rest.split_once(" backend: ")?;
    Some((kind.to_string(), reason.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_passing_summary() {
        let line = "test result: ok. 34 passed; 0 failed; 68 ignored; 0 measured; 0 filtered out; finished in 0.37s";
        assert_eq!(
            parse_summary_line(line),
            Some(Summary {
                ok: true,
                passed: 34,
                failed: 0,
                ignored: 68
            })
        );
    }

    #[test]
    fn parses_a_failing_summary() {
        let line = "test result: FAILED. 30 passed; 4 failed; 2 ignored; 0 measured; 1 filtered out; finished in 12.01s";
        assert_eq!(
            parse_summary_line(line),
            Some(Summary {
                ok: false,
                passed: 30,
                failed: 4,
                ignored: 2
            })
        );
    }

    #[test]
    fn rejects_lines_that_are_not_summaries() {
        for line in [
            "",
            "running 34 tests",
            "test result: maybe. 1 passed; 0 failed; 0 ignored",
            "test result: ok. 1 passed; 0 failed",
            "test result: ok. many passed; 0 failed; 0 ignored",
            "test [sim]  sim::streams::x ... ok",
        ] {
            assert_eq!(parse_summary_line(line), None, "{line:?}");
        }
    }

    #[test]
    fn collects_failures_skips_and_the_last_summary() {
        let stdout = "\
skipping the cuda backend: cannot load the CUDA driver: tried libcuda.so.1: not found
skipping the roc backend: backend `roc` is unavailable: no AMD GPU driver (/dev/kfd missing)

running 5 tests
test [sim]  sim::arrays::a                ... ok
test [sim]  sim::streams::b               ... FAILED
test [cuda] cuda::arrays::a               ... ignored
test plain::name ... FAILED
test [sim]  sim::streams::c               ... ok

failures:

---- sim::streams::b ----
values after sync (tests/src/cases/streams.rs:40)

test result: FAILED. 2 passed; 2 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.10s
";
        let output = parse_output(stdout);
        assert_eq!(
            output.summary,
            Some(Summary {
                ok: false,
                passed: 2,
                failed: 2,
                ignored: 1
            })
        );
        assert_eq!(output.failed_cases, ["sim::streams::b", "plain::name"]);
        assert_eq!(
            output.skipped_backends,
            [
                (
                    "cuda".to_string(),
                    "cannot load the CUDA driver: tried libcuda.so.1: not found".to_string()
                ),
                (
                    "roc".to_string(),
                    "backend `roc` is unavailable: no AMD GPU driver (/dev/kfd missing)"
                        .to_string()
                ),
            ]
        );
    }

    #[test]
    fn output_without_a_summary_has_none() {
        let output =
            parse_output("error[E0425]: cannot find value `x`\nerror: could not compile\n");
        assert_eq!(output.summary, None);
        assert!(output.failed_cases.is_empty());
    }
}
