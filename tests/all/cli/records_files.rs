//! Record files (`invoke --records`, a subscription's `feed`): every bad line is reported at
//! once, each with its line number and what is wrong, and with what a line must look like.

use super::{shardhost, text};
use crate::support::{Scratch, guest};

#[test]
fn invoke_reports_every_bad_line_of_a_records_file_at_once_with_what_a_line_must_look_like() {
    // Issue 32, 4: a bare text line said `not JSON: expected ident at line 1 column 2`, and the
    // lines after the first bad one were never looked at.
    let dir = Scratch::new("records-bad");
    let records = dir.write(
        "orders.ndjson",
        "{\"partition_key\": \"a\", \"data\": {\"id\": 1}}\n\
         hello world\n\
         {\"partition_key\": \"b\", \"data\": {\"id\": 2}}\n\
         {\"data\": {\"id\": 3}}\n\
         [1, 2]\n\
         {\"partition_key\": \"c\", \"data\": 4, \"extra\": true}\n",
    );
    let out = shardhost()
        .arg("invoke")
        .arg(guest("ship"))
        .arg("--records")
        .arg(&records)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing runs: {}", text(&out.stdout));
    for expected in [
        "orders.ndjson: 4 bad lines",
        "line 2: not JSON",
        "`hello world`",
        "line 4: missing `partition_key`",
        "line 5: not a JSON object",
        "line 6: unknown key `extra`",
        r#"{"partition_key": "order-1", "data": {"id": 1}}"#,
    ] {
        assert!(stderr.contains(expected), "`{expected}` in:\n{stderr}");
    }
    assert!(
        !stderr.contains("line 1:") && !stderr.contains("line 3:"),
        "{stderr}"
    );
}
