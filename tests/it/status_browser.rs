//! `/status` in a real headless browser (Chromium from Debian's packages): the corrector binary
//! receives simulated vLLM 0.33 (speculative decoding, two engines) and vLLM 0.10 scrapes, one
//! with label values that try to inject a script and an element, and Chromium renders the page.
//! The rendered DOM must hold one row per group with the families and reasons, and no injected
//! element or script effect. A screenshot is kept under `target/test-artefacts/`.

use std::path::PathBuf;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use sim::{Profile, SimConfig, Simulator, SpecConfig, remote_write};

use crate::harness::{Corrector, TempDir};
use test_support::tools::{Tool, require};

/// Closes the label cell and runs a script that would change the page title.
const SCRIPT: &str = "</td><script>document.title='pwned'</script>";
/// Breaks out of an attribute into an element with an event handler.
const ELEMENT: &str = "\"><img src=x onerror=\"document.title='pwned'\">";

fn simulator(profile: Profile, spec: bool, engines: u32, seed: u64) -> Simulator {
    Simulator::new(SimConfig {
        profile,
        models: vec!["llama".to_string()],
        engines_per_model: engines,
        arrival_rate: 3.0,
        output_len: (2, 64),
        max_tokens: 64,
        spec: spec.then_some(SpecConfig {
            num_speculative_tokens: 3,
            acceptance_prob: 0.7,
            no_draft_fraction: 0.2,
        }),
        seed,
        // The three scrapes end about 5 s ago, so the page shows a lag of seconds.
        epoch_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
            - 50_000,
        ..SimConfig::default()
    })
    .expect("simulator config")
}

/// Writes three 15 s scrapes of `sim` with `labels` to the corrector.
fn feed(corrector: &Corrector, sim: &mut Simulator, labels: &[(&str, &str)]) {
    let labels: Vec<(String, String)> = labels
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    let client = reqwest::blocking::Client::new();
    for i in 1..=3 {
        sim.advance_to(15.0 * f64::from(i));
        for request in remote_write::write_requests(&sim.snapshot(), &labels, 2_000) {
            let response = client
                .post(format!("{}/api/v1/write", corrector.base))
                .header("Content-Type", "application/x-protobuf")
                .header("Content-Encoding", "snappy")
                .body(remote_write::encode(&request))
                .send()
                .expect("remote write");
            assert!(response.status().is_success(), "{}", response.status());
        }
    }
}

/// Chromium with the flags of a quiet, isolated headless run and its own profile directory.
fn chromium(binary: &std::path::Path, profile: &TempDir, args: &[String]) -> std::process::Output {
    let output = Command::new(binary)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=2000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .output()
        .expect("run chromium");
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn artefact_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("test-artefacts");
    std::fs::create_dir_all(&dir).expect("create target/test-artefacts");
    dir
}

#[test]
fn status_page_renders_every_group_in_chromium_and_label_values_stay_text() {
    let Some(binary) = require(Tool::CHROMIUM) else {
        return;
    };
    let corrector = Corrector::start();
    let mut spec = simulator(Profile::V0_33, true, 2, 5);
    feed(
        &corrector,
        &mut spec,
        &[
            ("job", "vllm"),
            ("instance", "vllm-spec:8000"),
            ("pod", SCRIPT),
        ],
    );
    let mut old = simulator(Profile::V0_10, false, 1, 6);
    feed(
        &corrector,
        &mut old,
        &[("job", "vllm"), ("instance", ELEMENT)],
    );

    let profile = TempDir::new("chromium");
    let url = format!("{}/status", corrector.base);
    let dom = String::from_utf8(
        chromium(&binary, &profile, &["--dump-dom".to_string(), url.clone()]).stdout,
    )
    .unwrap();

    // The scripts of the label values never ran, and never became elements.
    assert!(
        dom.contains("<title>vllm-corrector status</title>"),
        "title changed or missing:\n{dom}"
    );
    assert!(!dom.contains("pwned</title>"), "{dom}");
    assert!(
        !dom.contains("<img") && !dom.contains("<script"),
        "an injected element is in the DOM:\n{dom}"
    );
    assert!(
        dom.contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;"),
        "the script label shown as text:\n{dom}"
    );
    assert!(
        dom.contains("\\\"&gt;&lt;img src=x onerror=\\\"document.title='pwned'\\\"&gt;"),
        "the element label shown as text, its quotes escaped as PromQL writes them:\n{dom}"
    );

    // One row per group: engines 0 and 1 of the 0.33 server, engine 0 of the 0.10 server.
    assert_eq!(dom.matches("<tr class=\"group\">").count(), 3, "{dom}");
    // The 0.33 engines serve all six families (the SLO counters of the shipped SLO too); the
    // 0.10 engine has no request TPOT histogram and no by-source prompt counter, so it serves the
    // two ITL families and tokens per output, and lacks the inputs of canonical TPOT, local
    // iteration tokens and the SLO counters.
    assert_eq!(
        dom.matches("class=\"family served\"").count(),
        6 + 6 + 3,
        "{dom}"
    );
    assert_eq!(
        dom.matches("<span class=\"reason\">missing_input</span>")
            .count(),
        3,
        "{dom}"
    );
    assert_eq!(dom.matches("<td class=\"lag\"").count(), 3, "{dom}");
    assert!(
        dom.contains("Groups 1–3 of 3.") && dom.contains("last page"),
        "{dom}"
    );

    // Two groups a page: the browser follows the "next page" link to the third group.
    let first = String::from_utf8(
        chromium(
            &binary,
            &profile,
            &["--dump-dom".to_string(), format!("{url}?limit=2")],
        )
        .stdout,
    )
    .unwrap();
    assert_eq!(first.matches("<tr class=\"group\">").count(), 2, "{first}");
    assert!(first.contains("id=\"summary\">3 group(s)"), "{first}");
    let at = first
        .find("<a id=\"next-page\" href=\"")
        .unwrap_or_else(|| panic!("a next page link:\n{first}"));
    let href = &first[at + 24..];
    let next = format!(
        "{}/{}",
        corrector.base,
        href[..href.find('"').unwrap()].replace("&amp;", "&")
    );
    let second =
        String::from_utf8(chromium(&binary, &profile, &["--dump-dom".to_string(), next]).stdout)
            .unwrap();
    assert_eq!(
        second.matches("<tr class=\"group\">").count(),
        1,
        "{second}"
    );
    assert!(
        second.contains("Groups 3–3 of 3.") && second.contains("last page"),
        "{second}"
    );
    assert!(!second.contains("id=\"summary\""), "{second}");

    let shot = artefact_dir().join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    chromium(
        &binary,
        &profile,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1600,1200".to_string(),
            url,
        ],
    );
    let png = std::fs::read(&shot).expect("the screenshot was written");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    eprintln!("status page screenshot: {}", shot.display());
}
