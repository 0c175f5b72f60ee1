//! Tests of `known.rs`.

use super::*;

#[test]
fn an_entry_takes_24_bytes_and_a_look_up_16() {
    assert_eq!(std::mem::size_of::<Entry>(), 24);
    assert_eq!(std::mem::size_of::<Option<KnownSeries>>(), 16);
}
