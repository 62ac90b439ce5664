//! How every command fails: one exit status per kind of failure, the
//! message on stderr and, with `--json`, an error object on stdout.
//!
//! Exit status: 1 a failed run, damage (refused), no database, an
//! inconsistent database; 2 a bad argument (clap's errors and ours alike: a
//! path that does not exist or is not a directory); 3 an I/O error
//! (permission, read-only file system, disk full: the operating system's
//! message and its kind are kept); 4 the data directory is in use by
//! another open database.

use std::process::ExitCode;

use serde_json::{json, Value};
use tessera::Error;

/// Why a command failed: the exit status, a machine-readable kind and the
/// message.
#[derive(Debug)]
pub struct Failure {
    code: u8,
    kind: &'static str,
    message: String,
    io_kind: Option<String>,
    /// Argument errors point at `--help`, as clap's own do.
    hint: bool,
}

impl Failure {
    pub fn new(code: u8, kind: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            code,
            kind,
            message: message.into(),
            io_kind: None,
            hint: false,
        }
    }

    /// A bad argument found after parsing (exit status 2, as clap's).
    pub fn usage(message: impl std::fmt::Display) -> Failure {
        Failure {
            hint: true,
            ..Failure::new(2, "invalid_argument", message.to_string())
        }
    }

    /// A run that failed (exit status 1).
    pub fn run(message: impl std::fmt::Display) -> Failure {
        Failure::new(1, "run_failed", message.to_string())
    }

    /// An I/O failure on `path` (exit status 3, the `io::Error`'s kind
    /// kept), worded "cannot {what} {path}: {cause}".
    pub fn io(what: &str, path: &std::path::Path, e: std::io::Error) -> Failure {
        Failure::from_error(
            &format!("cannot {what} {}: ", path.display()),
            &Error::io(what.to_string(), e),
        )
    }

    /// An engine error, classified by what it says happened.
    pub fn from_error(context: &str, e: &Error) -> Failure {
        let (code, kind) = match e {
            Error::Corrupt(_) => (1, "damaged"),
            Error::NewerFormat(_) => (1, "newer_format"),
            Error::Io(_) => (3, "io"),
            Error::InUse(_) => (4, "in_use"),
            Error::InvalidArgument(_) => (2, "invalid_argument"),
            Error::ReadOnly => (1, "read_only"),
            Error::SystemFailure { .. } => (1, "system_failure"),
            _ => (1, "error"),
        };
        let mut f = Failure::new(code, kind, format!("{context}{e}"));
        f.io_kind = e.io_kind().map(|k| format!("{k:?}"));
        f
    }

    /// A command line clap refused (`e` is not `--help` or `--version`).
    pub fn from_clap(e: &clap::Error) -> Failure {
        let text = e.render().to_string();
        // clap's first line ("error: ...") is the message; the usage and
        // the help pointer follow.
        let first = text.lines().next().unwrap_or("");
        let message = first.strip_prefix("error: ").unwrap_or(first).to_string();
        Failure::new(2, "invalid_argument", message)
    }

    pub fn json(&self) -> Value {
        json!({
            "kind": self.kind,
            "message": self.message,
            "exit_status": self.code,
            "io_kind": self.io_kind,
        })
    }

    /// Print (stderr, and with `--json` `out` with the error object added
    /// on stdout, or the error object alone when `out` is not an object)
    /// and return the exit status.
    pub fn report(self, json_out: bool, mut out: Value) -> ExitCode {
        eprintln!("error: {}", self.message);
        if self.hint {
            eprintln!("\nFor more information, try '--help'.");
        }
        if json_out {
            if !out.is_object() {
                out = json!({});
            }
            out["error"] = self.json();
            print_json(&out);
        }
        ExitCode::from(self.code)
    }
}

pub fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).expect("a JSON value serializes")
    );
}

/// The end of a check: the report on stdout (JSON) and success if it
/// passed; otherwise an `inconsistent` failure (exit 1) saying `why`, with
/// the report in its JSON.
pub fn verdict(passed: bool, json: bool, report: Value, why: impl FnOnce() -> String) -> ExitCode {
    if passed {
        if json {
            print_json(&report);
        }
        ExitCode::SUCCESS
    } else {
        Failure::new(1, "inconsistent", why()).report(json, report)
    }
}
