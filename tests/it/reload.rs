//! Reload on the binary: SIGHUP and `POST /-/reload` with a good and a bad `--config.file`. The
//! swap is proven by the answer to one body size (413 over the cap, 400 as corrupt snappy under
//! it) and by the reload self-metrics.

use std::time::Duration;

use crate::harness::TempDir;
use crate::secure::{Service, client, write};

/// The status of a 3000-byte body that is not snappy: 413 when the cap is below 3000, else 400.
fn junk_status(service: &Service, c: &reqwest::blocking::Client) -> u16 {
    c.post(service.url("/api/v1/write"))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .body(vec![0u8; 3000])
        .send()
        .unwrap()
        .status()
        .as_u16()
}

fn reload_metrics(service: &Service, c: &reqwest::blocking::Client) -> (f64, f64) {
    let s = service.snapshot(c, |r| r);
    (
        s.value("vllm_corrector_config_last_reload_successful", &[])
            .unwrap(),
        s.value(
            "vllm_corrector_config_last_reload_success_timestamp_seconds",
            &[],
        )
        .unwrap(),
    )
}

#[test]
fn sighup_and_post_reload_apply_a_good_config_and_keep_the_old_one_on_a_bad_config() {
    let dir = TempDir::new("reload");
    let config = write(&dir, "config.yml", "limits:\n  max_body_bytes: 1000\n");
    let c = client(None, None, false);
    let service = Service::start(
        dir,
        &[format!("--config.file={}", config.display())],
        "http",
        &c,
    );
    assert_eq!(junk_status(&service, &c), 413);
    let (ok, started) = reload_metrics(&service, &c);
    assert_eq!(ok, 1.0);
    assert!(started > 1.0e9, "start-up load stamped at {started}");

    // A good file by SIGHUP: the cap rises to 4000.
    write(
        service.dir(),
        "config.yml",
        "limits:\n  max_body_bytes: 4000\n",
    );
    std::thread::sleep(Duration::from_millis(20));
    service.hangup();
    service.wait_for("the SIGHUP reload", Duration::from_secs(20), || {
        reload_metrics(&service, &c).1 > started
    });
    assert_eq!(junk_status(&service, &c), 400);

    // A bad file by SIGHUP: the failure metric drops to 0 and the 4000 cap stays.
    write(
        service.dir(),
        "config.yml",
        "limits:\n  max_body_bytes: 2000\n  max_body_byte: 1\n",
    );
    service.hangup();
    service.wait_for("the failed SIGHUP reload", Duration::from_secs(20), || {
        reload_metrics(&service, &c).0 == 0.0
    });
    assert_eq!(junk_status(&service, &c), 400);
    assert!(
        service.log_text().contains("configuration reload failed"),
        "{}",
        service.log_text()
    );

    // The same bad file by POST: 500 naming the field; then a good file by POST: 200.
    let response = c.post(service.url("/-/reload")).send().unwrap();
    assert_eq!(response.status().as_u16(), 500);
    assert!(response.text().unwrap().contains("max_body_byte"));
    write(
        service.dir(),
        "config.yml",
        "limits:\n  max_body_bytes: 2000\n",
    );
    let response = c.post(service.url("/-/reload")).send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(reload_metrics(&service, &c).0, 1.0);
    assert_eq!(junk_status(&service, &c), 413);
}
