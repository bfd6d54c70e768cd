//! Runs every conformance case on every backend under test (see `gpu_mem_conformance`).
//! Cases that cannot run somewhere are reported as ignored, and the reasons are printed.

use gpu_mem_conformance::{
    Requires, backends_under_test, cases, collectives_unavailable, fresh_runtime,
};
use libtest_mimic::{Arguments, Failed, Trial};
use std::collections::BTreeMap;

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    let mut skipped: BTreeMap<(String, &'static str), usize> = BTreeMap::new();
    for (kind, availability) in backends_under_test() {
        if let Err(reason) = &availability {
            println!("skipping the {kind} backend: {reason}");
        }
        // Asked once, and only where the collective cases would otherwise run.
        let mut collectives_skip = None;
        for case in cases::all() {
            let run = case.run;
            let mut skip = case.requires.skip_reason(kind);
            if skip.is_none()
                && availability.is_ok()
                && matches!(
                    case.requires,
                    Requires::Collectives | Requires::SimulatedCollectives
                )
            {
                skip = *collectives_skip.get_or_insert_with(|| collectives_unavailable(kind));
            }
            if let (Ok(()), Some(reason)) = (&availability, skip) {
                *skipped.entry((kind.to_string(), reason)).or_default() += 1;
            }
            let ignored = availability.is_err() || skip.is_some();
            // Under Miri the harness spends over a second on each ignored trial (two thirds of
            // the suite's time there): they are left out, and counted in the lines above.
            if ignored && cfg!(miri) {
                continue;
            }
            let trial = Trial::test(format!("{kind}::{}", case.name), move || {
                let runtime = fresh_runtime(kind).map_err(Failed::from)?;
                run(&runtime).map_err(Failed::from)
            })
            .with_kind(kind.name())
            .with_ignored_flag(ignored);
            trials.push(trial);
        }
    }
    for ((kind, reason), count) in skipped {
        println!("skipping {count} case(s) on {kind}: {reason}");
    }
    libtest_mimic::run(&args, trials).exit();
}
