//! Tests of `table.rs`.

use super::*;

#[test]
fn columns_align_on_the_widest_cell_and_colour_is_optional() {
    let mut t = Table::new(&["quantity", "raw"]);
    t.push(vec![Cell::plain("TPOT mean"), Cell::new("12.5", Tone::Bad)]);
    t.push(vec![Cell::plain("p99"), Cell::plain("7")]);
    // Widths: column 1 = len("TPOT mean") = 9, column 2 = len("12.5") = 4; rule 9 + 2 + 4 = 15.
    let plain = t.render(false);
    assert_eq!(
        plain,
        "quantity    raw\n───────────────\nTPOT mean  12.5\np99           7\n"
    );
    let coloured = t.render(true);
    assert!(coloured.contains("\x1b[31m12.5\x1b[0m"), "{coloured}");
    assert!(coloured.starts_with("\x1b[1mquantity\x1b[0m"), "{coloured}");
}
