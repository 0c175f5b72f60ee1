//! The SLO family's plan: which finish reasons it reads.

use super::plan::abnormal_finishes;
use crate::classify::{Input, Part, RoleKey};

fn reason(index: u8) -> RoleKey {
    RoleKey {
        input: Input::AbnormalFinishes,
        le_bits: f64::from(index).to_bits(),
    }
}

#[test]
fn abort_and_error_are_read_together_and_abort_alone_is_the_whole_of_an_older_release() {
    let count = RoleKey {
        input: Input::Tpot(Part::Count),
        le_bits: 0,
    };
    let both = [(count, 0), (reason(0), 3), (reason(1), 7)];
    assert_eq!(abnormal_finishes(&both, &[]), vec![3, 7]);
    assert_eq!(abnormal_finishes(&both[..2], &[]), vec![3]);
}

#[test]
fn a_lapsed_finish_reason_leaves_the_rest_unread() {
    // The abort series lapsed while the error series kept coming (the goodput fuzz target's seed
    // `lapsed_abort_series.bin`): read alone, the error series counted none of the aborts.
    assert_eq!(
        abnormal_finishes(&[(reason(1), 4)], &[reason(0)]),
        Vec::<usize>::new()
    );
    assert_eq!(
        abnormal_finishes(&[(reason(0), 4)], &[reason(1)]),
        Vec::<usize>::new()
    );
}

#[test]
fn error_without_abort_is_not_read_as_every_abnormal_finish() {
    assert_eq!(
        abnormal_finishes(&[(reason(1), 4)], &[]),
        Vec::<usize>::new()
    );
}
