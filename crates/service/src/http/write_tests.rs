//! Unit tests of `crates/service/src/http/write.rs`.

use super::*;

#[test]
fn a_multiline_panic_message_is_quoted_on_one_bounded_line() {
    let assert_eq_message = "assertion `left == right` failed\n  left: 1\n right: 2";
    assert_eq!(
        one_line(assert_eq_message),
        "assertion `left == right` failed / left: 1 / right: 2"
    );
    // 300 two-byte characters = 600 bytes: cut at the last boundary within 512 bytes (256
    // characters), then the ellipsis.
    let long = "é".repeat(300);
    let quoted = one_line(&long);
    assert_eq!(quoted, format!("{}…", "é".repeat(256)));
    assert_eq!(panic_message(&"static str"), "static str");
    assert_eq!(panic_message(&String::from("owned")), "owned");
    assert_eq!(
        panic_message(&42_u32),
        "a panic payload that is not a string"
    );
}
