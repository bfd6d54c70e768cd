//! One trial of a test binary run again in a child process of its own.
//!
//! Tests use it where a trial needs what one process cannot give: a different dynamic loader or
//! library path, or a compiler that serialises its compiles inside a process (NVRTC takes a
//! global lock; ROCm 5.2's hiprtc is not thread-safe, so the ROC backend holds one), whose
//! trials run side by side only as separate processes.
//!
//! The protocol, in both directions:
//! - the parent runs the test binary again with [`ROLE`] naming the trial ([`run`]); the binary's
//!   `main` reads it first ([`role`]) and, when set, runs that trial alone and exits through
//!   [`exit`] instead of starting the test harness;
//! - the exit status carries the verdict: 0 passed, [`EXIT_SKIPPED`] skipped (the reason on the
//!   last line of standard error), anything else failed (standard error is the message);
//! - the child's standard output is printed by the parent, so the trial's notes appear as if it
//!   had run in place;
//! - a child that runs past its deadline is killed and its trial fails.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The environment variable naming the trial a child process runs.
pub const ROLE: &str = "GPU_MEM_TEST_CHILD";

/// The exit status of a child whose trial was skipped.
pub const EXIT_SKIPPED: i32 = 2;

/// A trial's verdict, as a child reports it and its parent reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The trial passed.
    Passed,
    /// The trial could not run here, for this reason.
    Skipped(String),
    /// The trial failed, with this message.
    Failed(String),
}

/// The trial this process was started to run, when it is such a child.
pub fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

/// Ends a child process with `verdict` (see the module docs for the encoding).
pub fn exit(verdict: Verdict) -> ! {
    let code = match verdict {
        Verdict::Passed => 0,
        Verdict::Skipped(reason) => {
            eprintln!("{reason}");
            EXIT_SKIPPED
        }
        Verdict::Failed(message) => {
            eprintln!("{message}");
            1
        }
    };
    std::process::exit(code)
}

/// Runs `command` (this test binary, or a loader that runs it) as the child for `role`, and
/// returns its verdict; the child is killed after `deadline`.
pub fn run(mut command: Command, role: &str, deadline: Duration) -> Verdict {
    let spawned = command
        .env(ROLE, role)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let child = match spawned {
        Ok(child) => child,
        Err(e) => return Verdict::Failed(format!("cannot start the child for {role}: {e}")),
    };
    let (status, stdout, stderr) = match wait_with_deadline(child, deadline) {
        Ok(out) => out,
        Err(message) => return Verdict::Failed(format!("{role}: {message}")),
    };
    print!("{stdout}");
    match status.code() {
        Some(0) => Verdict::Passed,
        Some(EXIT_SKIPPED) => Verdict::Skipped(
            stderr
                .lines()
                .last()
                .unwrap_or("skipped in the child")
                .to_string(),
        ),
        _ => Verdict::Failed(format!("{role} ({status}): {stderr}")),
    }
}

/// This test binary, for [`run`].
pub fn this_binary() -> Result<Command, String> {
    std::env::current_exe()
        .map(Command::new)
        .map_err(|e| format!("cannot find the test binary: {e}"))
}

/// The child's status and output once it exits; killed after `deadline`.
fn wait_with_deadline(
    mut child: Child,
    deadline: Duration,
) -> Result<(ExitStatus, String, String), String> {
    // Both pipes are read on threads of their own, so a chatty child never blocks on a full one.
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("still running after {deadline:?}; killed"));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ok((
        status,
        stdout.join().unwrap_or_default(),
        stderr.join().unwrap_or_default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell child stands in for a test binary: each exit status reads as its verdict.
    fn shell(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.arg("-c").arg(script);
        command
    }

    #[test]
    #[cfg_attr(miri, ignore = "spawns processes")]
    fn exit_statuses_read_as_verdicts() {
        let long = Duration::from_secs(30);
        assert_eq!(run(shell("exit 0"), "pass", long), Verdict::Passed);
        assert_eq!(
            run(
                shell("echo first >&2; echo no nvrtc >&2; exit 2"),
                "skip",
                long
            ),
            Verdict::Skipped("no nvrtc".into())
        );
        match run(shell("echo broken >&2; exit 1"), "fail", long) {
            Verdict::Failed(message) => assert!(message.contains("broken"), "{message}"),
            other => panic!("{other:?}"),
        }
        // The role reaches the child.
        assert_eq!(
            run(shell(&format!("test \"${ROLE}\" = mine")), "mine", long),
            Verdict::Passed
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "spawns processes")]
    fn a_child_past_its_deadline_is_killed() {
        let started = Instant::now();
        match run(shell("exec sleep 30"), "slow", Duration::from_millis(200)) {
            Verdict::Failed(message) => assert!(message.contains("killed"), "{message}"),
            other => panic!("{other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(20));
    }
}
