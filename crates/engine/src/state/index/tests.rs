//! Tests of `index.rs`.

use super::*;

#[test]
fn an_entry_takes_24_bytes_and_a_target_12() {
    assert_eq!(std::mem::size_of::<Entry>(), 24);
    assert_eq!(std::mem::size_of::<Target>(), 12);
}
