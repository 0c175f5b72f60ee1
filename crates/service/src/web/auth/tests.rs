//! Basic-auth checks under floods: a flooding client spends its own allowance only, a repeated
//! wrong password and concurrent identical credentials cost one bcrypt, and a request that gives up
//! leaves nothing behind. The 503 through the router is in `settings_tests.rs`, a real server
//! socket in `tests/it/auth_flood.rs`.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::HeaderValue;
use base64::Engine as _;

use super::{HttpAuth, lock};
use crate::telemetry::AuthFailure;
use crate::web::WebConfigFile;
use crate::web::throttle::BURST;

const INVALID: Result<(), AuthFailure> = Err(AuthFailure::InvalidCredentials);
const LIMITED: Result<(), AuthFailure> = Err(AuthFailure::RateLimited);

/// User `alice` with password `s3cret`, hashed at `cost`.
fn alice(cost: u32) -> Arc<HttpAuth> {
    let hash = bcrypt::hash("s3cret", cost).unwrap();
    let yaml = format!("basic_auth_users:\n  alice: {hash}\n");
    let file = WebConfigFile::from_yaml(&yaml, Path::new("web.yml")).unwrap();
    Arc::new(HttpAuth::from_file(&file, Path::new(".")).unwrap())
}

fn basic(user: &str, password: &str) -> HeaderValue {
    let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    HeaderValue::from_str(&format!("Basic {pair}")).unwrap()
}

fn ip(text: &str) -> Option<IpAddr> {
    Some(text.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_credential_is_checked_promptly_while_another_client_floods_wrong_passwords() {
    // Cost 8: about 20 ms a check optimised, 80 ms in a debug build; 200 checks in one queue
    // would take 4 to 16 s.
    let auth = alice(8);
    let flood: Vec<_> = (0..200)
        .map(|i| {
            let auth = auth.clone();
            tokio::spawn(async move {
                let header = basic("alice", &format!("wrong-{i}"));
                auth.check(ip("10.0.0.1"), Some(&header)).await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    let outcome = auth
        .check(ip("10.0.0.2"), Some(&basic("alice", "s3cret")))
        .await;
    let took = started.elapsed();
    println!("valid credential checked in {took:?} beside 200 wrong ones");
    assert_eq!(outcome, Ok(()));
    assert!(took < Duration::from_secs(3), "took {took:?}");

    let mut invalid = 0;
    for task in flood {
        match task.await.unwrap() {
            Err(AuthFailure::InvalidCredentials) => invalid += 1,
            other => assert_eq!(other, LIMITED),
        }
    }
    assert!(
        (1..=BURST as usize).contains(&invalid),
        "{invalid} of the flood ran bcrypt"
    );
}

#[tokio::test]
async fn a_wrong_password_repeated_is_answered_from_memory_and_spends_no_allowance() {
    let auth = alice(4);
    for (user, password) in [("alice", "wrong"), ("mallory", "guess")] {
        for _ in 0..50 {
            let outcome = auth
                .check(ip("10.0.0.1"), Some(&basic(user, password)))
                .await;
            assert_eq!(outcome, INVALID, "{user}");
        }
    }
    // Two checks ran bcrypt (one per credential); the rest of the burst is left.
    for i in 2..BURST as u32 {
        let outcome = auth
            .check(ip("10.0.0.1"), Some(&basic("alice", &format!("w{i}"))))
            .await;
        assert_eq!(outcome, INVALID, "distinct wrong password {i}");
    }
    let outcome = auth
        .check(ip("10.0.0.1"), Some(&basic("alice", "more")))
        .await;
    assert_eq!(outcome, LIMITED);
    // Unknown users spend the allowance as known ones do, and the right password still passes
    // from another client.
    let outcome = auth.check(ip("10.0.0.1"), Some(&basic("eve", "x"))).await;
    assert_eq!(outcome, LIMITED);
    let outcome = auth
        .check(ip("10.0.0.2"), Some(&basic("alice", "s3cret")))
        .await;
    assert_eq!(outcome, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_with_the_same_credentials_share_one_check() {
    let auth = alice(8);
    // 50 shards of one sender after a reload: one client, one uncached valid credential. Each on
    // its own would be over the client's two checks in flight.
    for (password, expected) in [("s3cret", Ok(())), ("wrong", INVALID)] {
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let auth = auth.clone();
                tokio::spawn(async move {
                    let header = basic("alice", password);
                    auth.check(ip("10.0.0.1"), Some(&header)).await
                })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap(), expected, "{password}");
        }
        assert!(lock(&auth.checking).is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_gives_up_still_holds_its_checks_until_bcrypt_ends() {
    // Cost 12: a quarter of a second or more, far longer than the 10 ms the requests wait.
    let auth = alice(12);
    for i in 0..2 {
        let header = basic("alice", &format!("gone-{i}"));
        let gave_up = tokio::time::timeout(
            Duration::from_millis(10),
            auth.check(ip("10.0.0.1"), Some(&header)),
        )
        .await;
        assert!(gave_up.is_err(), "bcrypt at cost 12 took under 10 ms");
    }
    assert!(lock(&auth.checking).is_empty(), "no waiter, no entry");
    // Both computations still run: the client's two places are taken.
    let outcome = auth
        .check(ip("10.0.0.1"), Some(&basic("alice", "next")))
        .await;
    assert_eq!(outcome, LIMITED);
}

#[tokio::test]
async fn an_unknown_user_costs_a_bcrypt_check_as_a_known_one_does() {
    // Cost 10: a check takes tens of milliseconds or more, skipping it microseconds.
    let auth = alice(10);
    let timed = |user: &'static str, client: &'static str| {
        let auth = auth.clone();
        async move {
            let started = Instant::now();
            let outcome = auth.check(ip(client), Some(&basic(user, "guess"))).await;
            assert_eq!(outcome, INVALID, "{user}");
            started.elapsed()
        }
    };
    let known = timed("alice", "10.0.0.1").await;
    let unknown = timed("mallory", "10.0.0.2").await;
    assert!(unknown * 3 > known, "unknown {unknown:?}, known {known:?}");
}
