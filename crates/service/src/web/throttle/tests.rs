//! The per-client allowance of bcrypt checks, the slots, and the bounded tables.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;

fn ip(text: &str) -> Option<IpAddr> {
    Some(text.parse().unwrap())
}

fn throttle() -> Arc<Throttle> {
    Arc::new(Throttle::new(2))
}

fn kept<K, V>(recent: &Recent<K, V>) -> usize {
    recent.current.len() + recent.previous.len()
}

#[test]
fn a_client_fails_its_burst_then_one_check_a_second() {
    let (throttle, t0) = (throttle(), Instant::now());
    for i in 0..BURST as u32 {
        assert!(
            throttle.admit_at(ip("10.0.0.1"), t0).is_some(),
            "check {i} of the burst"
        );
    }
    assert!(throttle.admit_at(ip("10.0.0.1"), t0).is_none());
    // Half a second regains half a check: still refused; a whole second regains one.
    let half = t0 + Duration::from_millis(500);
    assert!(throttle.admit_at(ip("10.0.0.1"), half).is_none());
    let one = t0 + Duration::from_millis(1000);
    assert!(throttle.admit_at(ip("10.0.0.1"), one).is_some());
    assert!(throttle.admit_at(ip("10.0.0.1"), one).is_none());
    // Others are not charged for it.
    assert!(throttle.admit_at(ip("10.0.0.2"), one).is_some());
    // A long pause refills the burst, no more.
    let later = one + Duration::from_secs(3600);
    let admitted = (0..100)
        .filter(|_| throttle.admit_at(ip("10.0.0.1"), later).is_some())
        .count();
    assert_eq!(admitted, BURST as usize);
}

#[test]
fn a_client_has_at_most_two_checks_in_flight() {
    let (throttle, now) = (throttle(), Instant::now());
    let first = throttle.admit_at(ip("10.0.0.1"), now).unwrap();
    let second = throttle.admit_at(ip("10.0.0.1"), now).unwrap();
    assert_eq!(MAX_IN_FLIGHT_PER_CLIENT, 2);
    assert!(throttle.admit_at(ip("10.0.0.1"), now).is_none());
    assert!(throttle.admit_at(ip("10.0.0.2"), now).is_some());
    drop(first);
    let third = throttle.admit_at(ip("10.0.0.1"), now);
    assert!(third.is_some(), "a finished check frees its place");
    drop((second, third));
}

#[test]
fn a_successful_check_gives_its_token_back() {
    let (throttle, now) = (throttle(), Instant::now());
    for _ in 0..100 {
        let mut admitted = throttle.admit_at(ip("10.0.0.1"), now).unwrap();
        admitted.give_back();
    }
    let failed = (0..100)
        .filter(|_| throttle.admit_at(ip("10.0.0.1"), now).is_some())
        .count();
    assert_eq!(
        failed, BURST as usize,
        "the whole burst is left for failures"
    );
}

#[test]
fn an_ipv6_client_is_its_slash_64_and_a_mapped_ipv4_its_address() {
    let (throttle, now) = (throttle(), Instant::now());
    for i in 0..BURST as u32 {
        let address = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 7, 0, 0, 0, i as u16));
        assert!(throttle.admit_at(Some(address), now).is_some());
    }
    assert!(throttle.admit_at(ip("2001:db8:0:7:ffff::1"), now).is_none());
    assert!(throttle.admit_at(ip("2001:db8:0:8::1"), now).is_some());

    for _ in 0..BURST as u32 {
        assert!(throttle.admit_at(ip("192.0.2.1"), now).is_some());
    }
    assert!(throttle.admit_at(ip("::ffff:192.0.2.1"), now).is_none());
}

#[test]
fn the_client_table_is_bounded_and_keeps_the_most_recent_clients() {
    let (throttle, now) = (throttle(), Instant::now());
    // A client used up its allowance, then a flood of other addresses comes by.
    while throttle.admit_at(ip("10.0.0.1"), now).is_some() {}
    for i in 0..100_000u32 {
        let address = IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + i));
        drop(throttle.admit_at(Some(address), now));
        if i % 1000 == 0 {
            // Seen again and again: stays in the table, and stays limited.
            assert!(throttle.admit_at(ip("10.0.0.1"), now).is_none(), "at {i}");
        }
        let kept = kept(&throttle.clients.lock().unwrap());
        assert!(kept <= MAX_CLIENTS, "{kept} clients kept at {i}");
    }
    // Not seen for MAX_CLIENTS other clients: dropped, and starts afresh.
    let mut stale = Throttle::new(1);
    stale.clients = Mutex::new(Recent::new(4));
    let stale = Arc::new(stale);
    while stale.admit_at(ip("10.0.0.1"), now).is_some() {}
    for last in 2..=5 {
        drop(stale.admit_at(ip(&format!("10.0.0.{last}")), now));
    }
    assert!(stale.admit_at(ip("10.0.0.1"), now).is_some());
}

#[test]
fn recent_keeps_at_most_its_capacity_and_what_was_used_last() {
    let mut recent: Recent<u32, u32> = Recent::new(8);
    for i in 0..1000 {
        *recent.get_or_insert_with(i, || 0) += 1;
        // 0 is used after every insertion: never dropped.
        *recent.get_or_insert_with(0, || 0) += 1;
        assert!(kept(&recent) <= 8);
    }
    assert_eq!(recent.get_mut(&0).copied(), Some(1001));
    assert_eq!(recent.get_mut(&999).copied(), Some(1));
    assert_eq!(recent.get_mut(&1), None);
}

#[tokio::test]
async fn a_check_waits_at_most_a_second_for_a_slot() {
    let throttle = Throttle::new(2);
    let (a, b) = (throttle.slot().await, throttle.slot().await);
    assert!(a.is_some() && b.is_some());
    let started = Instant::now();
    assert!(throttle.slot().await.is_none());
    let waited = started.elapsed();
    assert!(
        waited >= MAX_SLOT_WAIT && waited < MAX_SLOT_WAIT * 3,
        "{waited:?}"
    );
    drop(a);
    assert!(throttle.slot().await.is_some(), "a freed slot is taken");
}
