//! `invoke` ends with a totals line (on stderr: stdout keeps one line per record).

use super::{shardhost, text};
use crate::support::{self, Scratch, guest};

#[test]
fn invoke_ends_with_a_totals_line_that_counts_each_outcome() {
    // Issue 32, 5: `invoke` printed no totals.
    let dir = Scratch::new("invoke-totals");
    let records = dir.write(
        "r.ndjson",
        [
            support::text_record("a", "ack"),
            support::text_record("b", "drop"),
            support::text_record("c", "ack"),
            support::text_record("d", "retry"),
            support::text_record("e", "panic"),
        ]
        .join("\n"),
    );
    let out = shardhost()
        .arg("invoke")
        .arg(guest("scripted"))
        .arg("--records")
        .arg(&records)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stdout.lines().count(), 5, "one line per record: {stdout}");
    let totals = stderr
        .lines()
        .find(|l| l.contains("records:"))
        .unwrap_or_else(|| panic!("no totals line:\n{stderr}"));
    assert!(
        totals.ends_with("5 records: 2 ack, 1 drop, 1 retry, 1 failed"),
        "{totals}"
    );
}
