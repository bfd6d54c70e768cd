//! The hardware matrix's result: one row per backend, its verdict, and how it is printed (a
//! table for people, JSON for tools).

use serde::Serialize;

/// One device of an available backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceRow {
    /// Ordinal within the backend.
    pub ordinal: usize,
    /// The backend's name for it (or why it could not be queried).
    pub name: String,
    /// Architecture (`sm_90`, `gfx90a`, `sim`); empty when it could not be queried.
    pub arch: String,
}

/// What the conformance suite reported for one backend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SuiteRun {
    /// Cases that passed.
    pub passed: u64,
    /// Cases that failed.
    pub failed: u64,
    /// Cases the suite reported as ignored.
    pub skipped: u64,
    /// Names of the failed cases.
    pub failed_cases: Vec<String>,
    /// Why the run gave no trustworthy result (no summary, the suite could not open the
    /// backend, a non-zero exit with no failed case), if it did not.
    pub error: Option<String>,
    /// Wall-clock time of the run, build included.
    pub seconds: f64,
}

impl SuiteRun {
    /// Why this run fails the matrix, if it does. A run in which nothing passed fails too: an
    /// available backend on which no case ran has not been tested.
    pub fn failure(&self) -> Option<String> {
        if let Some(error) = &self.error {
            return Some(error.clone());
        }
        if self.failed > 0 {
            return Some(format!("{} case(s) failed", self.failed));
        }
        if self.passed == 0 {
            return Some("no case ran".to_string());
        }
        None
    }
}

/// The verdict on one backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Available, and the suite passed on it.
    Passed,
    /// Available, and the suite failed (or could not run) on it.
    Failed,
    /// Not available here; not an error unless it was required.
    Unavailable,
}

/// One backend's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackendRow {
    /// `cuda`, `roc`, `sim`.
    pub backend: String,
    /// Whether the backend is compiled into this xtask build.
    pub compiled: bool,
    /// Whether it opened with at least one device.
    pub available: bool,
    /// Why it is unavailable.
    pub reason: Option<String>,
    /// Its devices (empty when unavailable).
    pub devices: Vec<DeviceRow>,
    /// The suite's result (absent when unavailable).
    pub suite: Option<SuiteRun>,
    /// Whether `--require` named it: an unavailable required backend fails the matrix.
    pub required: bool,
}

impl BackendRow {
    /// The row's verdict.
    pub fn status(&self) -> Status {
        match &self.suite {
            Some(run) if run.failure().is_none() => Status::Passed,
            Some(_) => Status::Failed,
            None if self.available => Status::Failed,
            None => Status::Unavailable,
        }
    }

    /// Why the row fails the matrix, if it does.
    pub fn failure(&self) -> Option<String> {
        match (&self.suite, self.available) {
            (Some(run), _) => run.failure(),
            (None, true) => Some("the conformance suite was not run".to_string()),
            (None, false) if self.required => Some(format!(
                "required but unavailable: {}",
                self.reason.as_deref().unwrap_or("unknown reason")
            )),
            (None, false) => None,
        }
    }
}

/// The whole matrix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Matrix {
    /// `true` when no row fails and at least one backend was tested.
    pub ok: bool,
    /// One row per backend gpu-mem knows, in `auto` order.
    pub backends: Vec<BackendRow>,
}

impl Matrix {
    /// Builds the matrix and its overall verdict.
    pub fn new(backends: Vec<BackendRow>) -> Matrix {
        let tested = backends.iter().any(|b| b.suite.is_some());
        let ok = tested && backends.iter().all(|b| b.failure().is_none());
        Matrix { ok, backends }
    }

    /// Why the matrix fails, one line per reason.
    pub fn failures(&self) -> Vec<String> {
        let mut failures: Vec<String> = self
            .backends
            .iter()
            .filter_map(|b| b.failure().map(|why| format!("{}: {why}", b.backend)))
            .collect();
        if !self.backends.iter().any(|b| b.suite.is_some()) {
            failures.push("no backend is available, so nothing was tested".to_string());
        }
        failures
    }

    /// The matrix as pretty-printed JSON, with each row's status spelled out.
    pub fn to_json(&self) -> Result<String, String> {
        #[derive(Serialize)]
        struct Row<'a> {
            #[serde(flatten)]
            row: &'a BackendRow,
            status: Status,
            failure: Option<String>,
        }
        #[derive(Serialize)]
        struct Out<'a> {
            ok: bool,
            backends: Vec<Row<'a>>,
            failures: Vec<String>,
        }
        let out = Out {
            ok: self.ok,
            backends: self
                .backends
                .iter()
                .map(|row| Row {
                    row,
                    status: row.status(),
                    failure: row.failure(),
                })
                .collect(),
            failures: self.failures(),
        };
        serde_json::to_string_pretty(&out).map_err(|e| format!("cannot write JSON: {e}"))
    }

    /// The matrix as a text table: backend, devices, passed, failed, skipped, status.
    pub fn to_table(&self) -> String {
        let header = [
            "backend", "devices", "passed", "failed", "skipped", "status",
        ];
        let rows: Vec<[String; 6]> = self.backends.iter().map(table_row).collect();
        let mut widths = header.map(str::len);
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut text = String::new();
        let mut line = |cells: [&str; 6]| {
            let mut out = String::new();
            for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
                let last = i == cells.len() - 1;
                // Counts are right-aligned, text left-aligned; the last column is not padded.
                if (2..=4).contains(&i) {
                    out.push_str(&format!("{cell:>width$}  "));
                } else if last {
                    out.push_str(cell);
                } else {
                    out.push_str(&format!("{cell:<width$}  "));
                }
            }
            text.push_str(out.trim_end());
            text.push('\n');
        };
        line(header);
        // The status column holds whole error messages; its rule need not span the longest.
        let mut rule = widths.map(|w| "-".repeat(w));
        rule[5] = "-".repeat(widths[5].min(40));
        line([&rule[0], &rule[1], &rule[2], &rule[3], &rule[4], &rule[5]]);
        for row in &rows {
            line([&row[0], &row[1], &row[2], &row[3], &row[4], &row[5]]);
        }
        text
    }
}

fn table_row(row: &BackendRow) -> [String; 6] {
    let devices = if row.devices.is_empty() {
        "-".to_string()
    } else {
        row.devices
            .iter()
            .map(|d| d.name.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let counts = |f: fn(&SuiteRun) -> u64| {
        row.suite
            .as_ref()
            .map_or("-".to_string(), |run| f(run).to_string())
    };
    let status = match (row.status(), row.failure()) {
        (Status::Passed, _) => "passed".to_string(),
        (Status::Failed, Some(why)) => format!("FAILED: {why}"),
        (Status::Failed, None) => "FAILED".to_string(),
        (Status::Unavailable, Some(why)) => format!("FAILED: {why}"),
        (Status::Unavailable, None) => format!(
            "unavailable: {}",
            row.reason.as_deref().unwrap_or("unknown reason")
        ),
    };
    [
        row.backend.clone(),
        devices,
        counts(|r| r.passed),
        counts(|r| r.failed),
        counts(|r| r.skipped),
        status,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(passed: u64, failed: u64, skipped: u64) -> SuiteRun {
        SuiteRun {
            passed,
            failed,
            skipped,
            failed_cases: Vec::new(),
            error: None,
            seconds: 1.0,
        }
    }

    fn available(name: &str, suite: SuiteRun) -> BackendRow {
        BackendRow {
            backend: name.to_string(),
            compiled: true,
            available: true,
            reason: None,
            devices: vec![DeviceRow {
                ordinal: 0,
                name: format!("{name} device 0"),
                arch: "x".to_string(),
            }],
            suite: Some(suite),
            required: false,
        }
    }

    fn unavailable(name: &str, reason: &str, required: bool) -> BackendRow {
        BackendRow {
            backend: name.to_string(),
            compiled: true,
            available: false,
            reason: Some(reason.to_string()),
            devices: Vec::new(),
            suite: None,
            required,
        }
    }

    #[test]
    fn passing_backend_and_unavailable_ones_make_a_passing_matrix() {
        let matrix = Matrix::new(vec![
            unavailable("cuda", "no libcuda.so.1", false),
            unavailable("roc", "no /dev/kfd", false),
            available("sim", run(34, 0, 0)),
        ]);
        assert!(matrix.ok, "{:?}", matrix.failures());
        let table = matrix.to_table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(lines[0].starts_with("backend"), "{table}");
        assert!(
            lines[2].starts_with("cuda") && lines[2].ends_with("unavailable: no libcuda.so.1"),
            "{table}"
        );
        assert!(lines[3].ends_with("unavailable: no /dev/kfd"), "{table}");
        let sim: Vec<&str> = lines[4].split_whitespace().collect();
        assert_eq!(
            sim,
            ["sim", "sim", "device", "0", "34", "0", "0", "passed"],
            "{table}"
        );
    }

    #[test]
    fn a_failed_case_fails_the_matrix() {
        let mut bad = run(33, 1, 0);
        bad.failed_cases = vec!["sim::streams::x".to_string()];
        let matrix = Matrix::new(vec![available("sim", bad)]);
        assert!(!matrix.ok);
        assert_eq!(matrix.backends[0].status(), Status::Failed);
        assert_eq!(matrix.failures(), ["sim: 1 case(s) failed"]);
        assert!(matrix.to_table().contains("FAILED: 1 case(s) failed"));
    }

    #[test]
    fn a_run_where_nothing_passed_fails() {
        let matrix = Matrix::new(vec![available("cuda", run(0, 0, 34))]);
        assert!(!matrix.ok);
        assert_eq!(matrix.failures(), ["cuda: no case ran"]);
    }

    #[test]
    fn a_run_with_an_error_fails_even_with_passes() {
        let mut broken = run(34, 0, 0);
        broken.error = Some("the suite exited with status 101".to_string());
        let matrix = Matrix::new(vec![available("sim", broken)]);
        assert!(!matrix.ok);
        assert_eq!(matrix.failures(), ["sim: the suite exited with status 101"]);
    }

    #[test]
    fn a_required_backend_that_is_unavailable_fails() {
        let matrix = Matrix::new(vec![
            unavailable("cuda", "no libcuda.so.1", true),
            available("sim", run(34, 0, 0)),
        ]);
        assert!(!matrix.ok);
        assert_eq!(
            matrix.failures(),
            ["cuda: required but unavailable: no libcuda.so.1"]
        );
    }

    #[test]
    fn nothing_available_fails() {
        let matrix = Matrix::new(vec![unavailable("sim", "not compiled in", false)]);
        assert!(!matrix.ok);
        assert_eq!(
            matrix.failures(),
            ["no backend is available, so nothing was tested"]
        );
    }

    #[test]
    fn json_has_counts_status_and_reasons() {
        let matrix = Matrix::new(vec![
            unavailable("cuda", "no libcuda.so.1", false),
            available("sim", run(34, 0, 2)),
        ]);
        let json: serde_json::Value = serde_json::from_str(&matrix.to_json().unwrap()).unwrap();
        assert_eq!(json["ok"], true);
        assert_eq!(json["backends"][0]["status"], "unavailable");
        assert_eq!(json["backends"][0]["reason"], "no libcuda.so.1");
        assert_eq!(json["backends"][1]["status"], "passed");
        assert_eq!(json["backends"][1]["suite"]["passed"], 34);
        assert_eq!(json["backends"][1]["suite"]["skipped"], 2);
        assert_eq!(json["backends"][1]["devices"][0]["name"], "sim device 0");
    }
}
