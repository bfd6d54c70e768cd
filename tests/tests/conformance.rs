//! Runs every conformance case on every backend under test (see `gpu_mem_conformance`).

use gpu_mem_conformance::{backends_under_test, cases, fresh_runtime};
use libtest_mimic::{Arguments, Failed, Trial};

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for (kind, availability) in backends_under_test() {
        if let Err(reason) = &availability {
            println!("skipping the {kind} backend: {reason}");
        }
        for case in cases::all() {
            let run = case.run;
            let trial = Trial::test(format!("{kind}::{}", case.name), move || {
                let runtime = fresh_runtime(kind).map_err(Failed::from)?;
                run(&runtime).map_err(Failed::from)
            })
            .with_kind(kind.name())
            .with_ignored_flag(availability.is_err());
            trials.push(trial);
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
