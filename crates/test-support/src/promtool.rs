//! promtool, any version ([`crate::tools::Tool::PROMTOOL_2`] or `_3`): `check metrics` on
//! exposition text, `check rules` and `test rules` on files, `check config`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::process::TempDir;

/// What one promtool run said.
#[derive(Debug, Clone)]
pub struct Report {
    /// The command line, for messages.
    pub command: String,
    /// Whether it exited with status 0.
    pub success: bool,
    /// Its stdout, then its stderr.
    pub output: String,
}

impl Report {
    /// Panics with the command, its output and `input` unless it succeeded.
    pub fn assert_success(&self, input: &str) {
        assert!(
            self.success,
            "{} failed:\n{}\n--- input ---\n{input}",
            self.command, self.output
        );
    }

    /// The non-empty lines of the output.
    pub fn lines(&self) -> Vec<&str> {
        self.output
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect()
    }
}

/// A promtool binary.
#[derive(Debug, Clone)]
pub struct Promtool(PathBuf);

impl Promtool {
    /// The promtool at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Promtool {
        Promtool(path.into())
    }

    /// The binary's path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Runs promtool with `args`, feeding `stdin` when given. Panics when it cannot be started.
    pub fn run(&self, args: &[&str], stdin: Option<&str>) -> Report {
        let mut child = Command::new(&self.0)
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run {}: {e}", self.0.display()));
        if let Some(text) = stdin {
            child
                .stdin
                .take()
                .expect("stdin is piped")
                .write_all(text.as_bytes())
                .expect("write to promtool");
        }
        let out = child.wait_with_output().expect("wait for promtool");
        Report {
            command: format!("{} {}", self.0.display(), args.join(" ")),
            success: out.status.success(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }

    /// `promtool check metrics` with `text` on stdin (2.x reads text format 0.0.4 only).
    pub fn check_metrics(&self, text: &str) -> Report {
        self.run(&["check", "metrics"], Some(text))
    }

    /// `promtool check rules` on `text`, written to a temporary `rules.yml`.
    pub fn check_rules(&self, text: &str) -> Report {
        let dir = TempDir::new("promtool");
        let path = dir.write("rules.yml", text);
        self.run(&["check", "rules", &path.to_string_lossy()], None)
    }

    /// `promtool check config` on `text`, written to a temporary `prometheus.yml`.
    pub fn check_config(&self, text: &str) -> Report {
        let dir = TempDir::new("promtool");
        let path = dir.write("prometheus.yml", text);
        self.run(&["check", "config", &path.to_string_lossy()], None)
    }
}
