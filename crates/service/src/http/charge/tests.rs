use super::*;

fn budget(kib: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(kib))
}

#[test]
fn a_charge_grows_in_whole_kib_and_releases_everything_when_dropped() {
    let budget = budget(10);
    let mut charge = Charge::new(&budget);
    assert!(charge.try_grow_to(1));
    assert_eq!((charge.bytes(), budget.available_permits()), (1024, 9));
    assert!(charge.try_grow_to(3 * 1024 + 1));
    assert_eq!((charge.bytes(), budget.available_permits()), (4096, 6));
    // Growing to less than is held takes nothing.
    assert!(charge.try_grow_to(100));
    assert_eq!(budget.available_permits(), 6);
    charge.shrink_to(2 * 1024);
    assert_eq!((charge.bytes(), budget.available_permits()), (2048, 8));
    drop(charge);
    assert_eq!(budget.available_permits(), 10);
}

#[test]
fn a_charge_past_the_free_budget_fails_at_once_and_keeps_what_it_held() {
    let budget = budget(4);
    let mut a = Charge::new(&budget);
    let mut b = Charge::new(&budget);
    assert!(a.try_grow_to(3 * 1024));
    assert!(b.try_grow_to(1024));
    assert!(!b.try_grow_to(2 * 1024));
    assert_eq!(
        (a.bytes(), b.bytes(), budget.available_permits()),
        (3072, 1024, 0)
    );
}

#[tokio::test]
async fn a_waiting_charge_gets_what_another_request_releases_within_its_wait() {
    let budget = budget(4);
    let mut holder = Charge::new(&budget);
    assert!(holder.try_grow_to(4 * 1024));
    let mut waiter = Charge::new(&budget);
    let release = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(holder);
    };
    let (granted, ()) = tokio::join!(waiter.grow_to(2 * 1024, Duration::from_secs(5)), release);
    assert!(granted);
    assert_eq!((waiter.bytes(), budget.available_permits()), (2048, 2));
    // Nothing frees this time: refused after the wait, holding what it held.
    let mut other = Charge::new(&budget);
    assert!(other.try_grow_to(2 * 1024));
    assert!(!waiter.grow_to(3 * 1024, Duration::from_millis(200)).await);
    assert_eq!(waiter.bytes(), 2048);
}
