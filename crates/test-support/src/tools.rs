//! The external programs the tests run, where each is found, and the check that a test needing
//! one fails when it is missing (docs/TESTING.md, "External tools").
//!
//! Two builds of Prometheus, promtool and vmagent are tested: the machine's own, on `PATH`
//! ([`Release::System`]; Debian 12 packages Prometheus 2.42 and vmagent 1.79), and Debian sid's,
//! which `scripts/fetch_sid_tools.py` (run by `scripts/test.sh`) unpacks into a cache
//! ([`Release::Sid`]; Prometheus 3.5.3, vmagent 1.145.0 when written). For each tool, in order:
//! 1. the environment variable [`Tool::env_var`] (e.g. `VLLM_CORRECTOR_PROMETHEUS_3`), when set,
//!    names the binary;
//! 2. else the system build is the first match on `PATH` (Chromium: also `/usr/bin/chromium`),
//!    and the sid build is `<cache>/bin/<name>`, the cache being `$VLLM_CORRECTOR_SID_TOOLS` or
//!    `target/debian-sid` of the repository.
//!
//! Prometheus and promtool must also report the major version their release stands for
//! (`--version`: 2 for the system build, 3 for sid's), so a machine whose `PATH` has Prometheus 3
//! does not pass the Prometheus 2 tests with it. vmagent's Debian builds print no version; the
//! tests that need a sid-only flag check `-help` themselves.
//!
//! [`require`] is the only way a test gets a tool: a missing tool **fails** the test, unless the
//! test is named in `VLLM_CORRECTOR_TESTS_WITHOUT_TOOLS` (names separated by commas or spaces; a
//! name matches the running test's full name, `accuracy_e2e::accuracy_through_...`, or its last
//! segments after a `::`), in which case the test returns early and says so on stderr.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The environment variable listing the tests that may skip when a tool they need is missing.
pub const OPT_OUT_VAR: &str = "VLLM_CORRECTOR_TESTS_WITHOUT_TOOLS";

/// Which build of a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Release {
    /// The machine's own, on `PATH` (Debian 12: Prometheus 2.42, promtool 2.42, vmagent 1.79).
    System,
    /// Debian sid's, from the cache `scripts/fetch_sid_tools.py` fills (Prometheus 3.5.3,
    /// promtool 3.5.3, vmagent 1.145.0 when written).
    Sid,
}

/// The programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Program {
    /// The Prometheus server.
    Prometheus,
    /// Prometheus' command-line tool (`check metrics`, `check rules`, `test rules`).
    Promtool,
    /// VictoriaMetrics' scraping and remote-writing agent.
    Vmagent,
    /// Headless Chromium (Debian package `chromium`), for the `/status` page test.
    Chromium,
}

/// One program in one release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tool {
    /// The program.
    pub program: Program,
    /// Its build.
    pub release: Release,
}

impl Tool {
    /// Prometheus 2 (the machine's: 2.42 on Debian 12).
    pub const PROMETHEUS_2: Tool = Tool::new(Program::Prometheus, Release::System);
    /// Prometheus 3 (Debian sid's: 3.5.3).
    pub const PROMETHEUS_3: Tool = Tool::new(Program::Prometheus, Release::Sid);
    /// promtool 2 (the machine's: 2.42 on Debian 12).
    pub const PROMTOOL_2: Tool = Tool::new(Program::Promtool, Release::System);
    /// promtool 3 (Debian sid's: 3.5.3).
    pub const PROMTOOL_3: Tool = Tool::new(Program::Promtool, Release::Sid);
    /// The machine's vmagent (1.79 on Debian 12).
    pub const VMAGENT_SYSTEM: Tool = Tool::new(Program::Vmagent, Release::System);
    /// Debian sid's vmagent (1.145.0).
    pub const VMAGENT_SID: Tool = Tool::new(Program::Vmagent, Release::Sid);
    /// The machine's Chromium.
    pub const CHROMIUM: Tool = Tool::new(Program::Chromium, Release::System);

    const ALL: [Tool; 7] = [
        Tool::PROMETHEUS_2,
        Tool::PROMETHEUS_3,
        Tool::PROMTOOL_2,
        Tool::PROMTOOL_3,
        Tool::VMAGENT_SYSTEM,
        Tool::VMAGENT_SID,
        Tool::CHROMIUM,
    ];

    const fn new(program: Program, release: Release) -> Tool {
        Tool { program, release }
    }

    /// The binary's file name.
    pub fn binary_name(self) -> &'static str {
        match self.program {
            Program::Prometheus => "prometheus",
            Program::Promtool => "promtool",
            Program::Vmagent => "vmagent",
            Program::Chromium => "chromium",
        }
    }

    /// The environment variable that, when set, names this tool's binary.
    pub fn env_var(self) -> &'static str {
        match (self.program, self.release) {
            (Program::Prometheus, Release::System) => "VLLM_CORRECTOR_PROMETHEUS_2",
            (Program::Prometheus, Release::Sid) => "VLLM_CORRECTOR_PROMETHEUS_3",
            (Program::Promtool, Release::System) => "VLLM_CORRECTOR_PROMTOOL_2",
            (Program::Promtool, Release::Sid) => "VLLM_CORRECTOR_PROMTOOL_3",
            (Program::Vmagent, Release::System) => "VLLM_CORRECTOR_VMAGENT_SYSTEM",
            (Program::Vmagent, Release::Sid) => "VLLM_CORRECTOR_VMAGENT_SID",
            (Program::Chromium, _) => "VLLM_CORRECTOR_CHROMIUM",
        }
    }

    /// The major version `--version` must report (Prometheus and promtool only).
    fn major_version(self) -> Option<&'static str> {
        match (self.program, self.release) {
            (Program::Prometheus | Program::Promtool, Release::System) => Some("2"),
            (Program::Prometheus | Program::Promtool, Release::Sid) => Some("3"),
            _ => None,
        }
    }

    /// Where the binary is, checked once per process. Errors: why it is not usable (not found,
    /// not a file, or the wrong major version), with how to get it.
    pub fn locate(self) -> Result<PathBuf, String> {
        static FOUND: [OnceLock<Result<PathBuf, String>>; 7] = [const { OnceLock::new() }; 7];
        let i = Tool::ALL
            .iter()
            .position(|t| *t == self)
            .expect("every tool is listed");
        FOUND[i].get_or_init(|| self.find()).clone()
    }

    fn find(self) -> Result<PathBuf, String> {
        self.find_at(std::env::var_os(self.env_var()).map(PathBuf::from))
    }

    /// [`Tool::locate`] with `named` standing for the value of [`Tool::env_var`].
    fn find_at(self, named: Option<PathBuf>) -> Result<PathBuf, String> {
        let path = match named {
            Some(path) => {
                if !path.is_file() {
                    return Err(format!(
                        "{}={} is not a file",
                        self.env_var(),
                        path.display()
                    ));
                }
                path
            }
            None => match self.release {
                Release::System => on_path(self.binary_name())
                    .or_else(|| {
                        let usr = PathBuf::from("/usr/bin").join(self.binary_name());
                        usr.is_file().then_some(usr)
                    })
                    .ok_or_else(|| {
                        format!(
                            "`{}` is not on PATH (Debian package {}; scripts/test.sh installs it), \
                             and {} is unset",
                            self.binary_name(),
                            self.debian_package(),
                            self.env_var()
                        )
                    })?,
                Release::Sid => {
                    let path = sid_cache().join("bin").join(self.binary_name());
                    if !path.is_file() {
                        return Err(format!(
                            "{} is missing (scripts/fetch_sid_tools.py, run by scripts/test.sh, \
                             fetches Debian sid's {}), and {} is unset",
                            path.display(),
                            self.debian_package(),
                            self.env_var()
                        ));
                    }
                    path
                }
            },
        };
        if let Some(major) = self.major_version() {
            let out = Command::new(&path)
                .arg("--version")
                .output()
                .map_err(|e| format!("{} --version: {e}", path.display()))?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            let want = format!("{}, version {major}.", self.binary_name());
            if !text.contains(&want) {
                return Err(format!(
                    "{} reports {:?}, not major version {major}: set {} to a {} {major}.x binary",
                    path.display(),
                    text.lines().next().unwrap_or_default(),
                    self.env_var(),
                    self.binary_name()
                ));
            }
        }
        Ok(path)
    }

    fn debian_package(self) -> &'static str {
        match self.program {
            Program::Prometheus => "prometheus",
            Program::Promtool => "promtool",
            Program::Vmagent => "victoria-metrics",
            Program::Chromium => "chromium",
        }
    }
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let release = match self.release {
            Release::System => "the machine's",
            Release::Sid => "Debian sid's",
        };
        write!(f, "{release} {}", self.binary_name())
    }
}

/// The directory `scripts/fetch_sid_tools.py` unpacks into: `$VLLM_CORRECTOR_SID_TOOLS`, else
/// `target/debian-sid` of the repository.
pub fn sid_cache() -> PathBuf {
    std::env::var_os("VLLM_CORRECTOR_SID_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repository().join("target").join("debian-sid"))
}

/// The repository's root directory.
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/test-support is two levels below the root")
        .to_path_buf()
}

fn on_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The running test's name: libtest names each test's thread after it.
pub fn current_test() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed thread>")
        .to_string()
}

/// True when `test` is named in `list` (see the module doc for how names match).
pub(crate) fn opted_out(list: &str, test: &str) -> bool {
    list.split([',', ' ', '\n', '\t'])
        .filter(|name| !name.is_empty())
        .any(|name| test == name || test.ends_with(&format!("::{name}")))
}

/// The path of `tool`. When it is missing: a panic naming the test, the tool and how to get it,
/// unless the running test is named in [`OPT_OUT_VAR`]; then `None` (the test returns early), and
/// a line on stderr says it was skipped and why.
pub fn require(tool: Tool) -> Option<PathBuf> {
    match tool.locate() {
        Ok(path) => Some(path),
        Err(why) => fail_or_skip(tool, why, &std::env::var(OPT_OUT_VAR).unwrap_or_default()),
    }
}

/// The missing-tool half of [`require`], with `list` standing for the opt-out variable's value.
fn fail_or_skip(tool: Tool, why: String, list: &str) -> Option<PathBuf> {
    let test = current_test();
    assert!(
        opted_out(list, &test),
        "{test} needs {tool}: {why}. To skip this test on a machine without it, name it in \
         {OPT_OUT_VAR}."
    );
    eprintln!("\n!!!!!!!! SKIPPED {test}: {why} (named in {OPT_OUT_VAR}) !!!!!!!!\n");
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opt_out_matches_the_full_name_or_its_last_segments() {
        let list = "accuracy_e2e::chain_a, readme_test\nother";
        assert!(opted_out(list, "accuracy_e2e::chain_a"));
        assert!(opted_out(list, "it::accuracy_e2e::chain_a"));
        assert!(opted_out(list, "readme_promql::readme_test"));
        assert!(opted_out(list, "other"));
        assert!(!opted_out(list, "accuracy_e2e::chain_ab"));
        assert!(!opted_out(list, "my_readme_test"));
        assert!(!opted_out("", "anything"));
    }

    #[test]
    fn a_missing_tool_fails_a_test_not_named_in_the_opt_out() {
        // A binary that cannot exist, through the variable that names it.
        let tool = Tool::VMAGENT_SYSTEM;
        let err = tool
            .find_at(Some(PathBuf::from("/nonexistent/vmagent")))
            .unwrap_err();
        assert!(err.contains("is not a file"), "{err}");
        let panicked = std::thread::Builder::new()
            .name("some_module::some_test".into())
            .spawn(move || fail_or_skip(tool, err, ""))
            .unwrap()
            .join();
        assert!(panicked.is_err(), "a test not opted out must fail");
        let skipped = std::thread::Builder::new()
            .name("some_module::some_test".into())
            .spawn(move || fail_or_skip(tool, "missing".into(), "other_test, some_test").is_none())
            .unwrap()
            .join();
        assert_eq!(skipped.ok(), Some(true), "a test named in the list skips");
    }
}
