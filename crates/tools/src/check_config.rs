//! `vllm-corrector check-config`: validates `--config.file` and `--web.config.file` as the service
//! does at start (and on reload), without starting it, for CI. The same code reads them
//! ([`service::config::Config::from_file`], [`service::web::WebSettings::load`]), so a file this
//! accepts is one the service starts with, and a refusal is the same message the service prints
//! before it exits with status 2 (docs/CONFIGURATION.md, "Checking the files in CI").
//!
//! Not checked: `storage.path`'s directory (whether the host can write it is a property of the
//! machine the service runs on, not of the file; the service checks it at start) and the flags.

use std::path::PathBuf;

use clap::Args;

use crate::slo_rules::spec_warnings;
use service::config::Config;
use service::web::WebSettings;

/// Options of `vllm-corrector check-config`: at least one file.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = true)]
pub struct CheckConfigArgs {
    /// The service's YAML configuration file (`--config.file` of the service).
    #[arg(long = "config.file", value_name = "PATH")]
    pub config_file: Option<PathBuf>,
    /// The web configuration file (`--web.config.file` of the service): TLS, client
    /// certificates, basic auth, bearer tokens; the files it names are read too.
    #[arg(long = "web.config.file", value_name = "PATH")]
    pub web_config_file: Option<PathBuf>,
}

/// What `check-config` prints for valid files: one line per file, `PATH: valid …`, with what
/// the configuration file sets that a reader most often gets wrong (the input prefix, the
/// dropped labels, the SLOs, the memory budget), then `PATH: warning: …` for each generated
/// burn-rate alert of its SLOs that cannot fire (`slo_rules::alert_warnings`).
///
/// # Errors
/// The first refusal, as the service words it (naming the file and the field): the
/// configuration file is checked first, then the web configuration file.
pub fn run(args: &CheckConfigArgs) -> Result<String, String> {
    let mut out = String::new();
    if let Some(path) = &args.config_file {
        let config = Config::from_file(path).map_err(|e| e.to_string())?;
        out.push_str(&format!(
            "{}: valid configuration file ({})\n",
            path.display(),
            config.summary()
        ));
        for warning in config.slos.slos.iter().flat_map(spec_warnings) {
            out.push_str(&format!("{}: warning: {warning}\n", path.display()));
        }
    }
    if let Some(path) = &args.web_config_file {
        let web = WebSettings::load(Some(path)).map_err(|e| e.to_string())?;
        out.push_str(&format!(
            "{}: valid web configuration file ({})\n",
            path.display(),
            web.summary()
        ));
    }
    Ok(out)
}
