//! `vllm-corrector`: receives Prometheus remote write carrying vLLM's raw series and serves the
//! corrected families on `/metrics`. With no subcommand it is the service (flags: `--help`); with
//! no flags it listens on 0.0.0.0:9490 with embedded defaults. The subcommands `simulate`, `demo`
//! `inspect`, `rules`, `relabel` and `check-config` are described in the `cli` module (`src/cli.rs`).

#![forbid(unsafe_code)]

use std::future::Future;
use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, Command};
use service::config::{Args, Config, LogFormat, LogLevel};
use service::telemetry;
use service::web::WebSettings;
use tools::{demo, inspect};

mod cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        None => run_service(cli.service),
        Some(Command::Simulate(args)) => {
            if let Err(code) = init_logging(LogLevel::Info, LogFormat::Logfmt) {
                return code;
            }
            block_on(async move { sim::run(*args).await.map_err(|e| e.to_string()) })
        }
        Some(Command::Demo(args)) => {
            // The table owns stdout; only warnings and errors go to stderr.
            if let Err(code) = init_logging(LogLevel::Warn, LogFormat::Logfmt) {
                return code;
            }
            block_on(async move { demo::run(args).await.map_err(|e| e.to_string()) })
        }
        Some(Command::Inspect(args)) => {
            block_on(async move { inspect::run(args).await.map_err(|e| e.to_string()) })
        }
        Some(Command::Relabel(options)) => match tools::relabel::run(&options) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("vllm-corrector: {error}");
                ExitCode::from(2)
            }
        },
        // An invalid file: exit status 2 and the message the service prints at start.
        Some(Command::CheckConfig(args)) => match tools::check_config::run(&args) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("vllm-corrector: {error}");
                ExitCode::from(2)
            }
        },
        Some(Command::Rules(args)) => match tools::slo_rules::run(&args) {
            Ok(printed) => {
                for warning in &printed.warnings {
                    eprintln!("vllm-corrector rules: warning: {warning}");
                }
                print!("{}", printed.text);
                ExitCode::SUCCESS
            }
            // An invalid --config.file: exit status 2, as the service's.
            Err(error) => {
                eprintln!("vllm-corrector: {error}");
                ExitCode::from(2)
            }
        },
    }
}

/// The service: exit code 2 for an invalid `--config.file` or `--web.config.file`, or a
/// `--storage.path` that cannot hold the state file; 1 when serving fails.
fn run_service(args: Args) -> ExitCode {
    let config = match Config::from_args(args.clone()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("vllm-corrector: {error}");
            return ExitCode::from(2);
        }
    };
    let web = match WebSettings::load(config.web_config_file.as_deref()) {
        Ok(web) => web,
        Err(error) => {
            eprintln!("vllm-corrector: {error}");
            return ExitCode::from(2);
        }
    };
    if let Err(error) = service::storage::check_usable(&config) {
        eprintln!("vllm-corrector: {error}");
        return ExitCode::from(2);
    }
    if let Err(code) = init_logging(config.log_level, config.log_format) {
        return code;
    }
    let Some(runtime) = runtime() else {
        return ExitCode::FAILURE;
    };
    match runtime.block_on(service::run::run(args, config, web)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "server stopped");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(level: LogLevel, format: LogFormat) -> Result<(), ExitCode> {
    telemetry::init_logging(level, format).map_err(|error| {
        eprintln!("vllm-corrector: {error}");
        ExitCode::FAILURE
    })
}

fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(error) => {
            eprintln!("vllm-corrector: cannot start the async runtime: {error}");
            None
        }
    }
}

/// Runs a subcommand to completion: exit code 0, or 1 with the error on stderr.
fn block_on(task: impl Future<Output = Result<(), String>>) -> ExitCode {
    let Some(runtime) = runtime() else {
        return ExitCode::FAILURE;
    };
    match runtime.block_on(task) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("vllm-corrector: {error}");
            ExitCode::FAILURE
        }
    }
}
