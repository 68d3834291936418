use super::*;

fn log() -> GuestLog {
    let ctx = CallContext {
        subscription: Arc::from("s"),
        stream: Arc::from(""),
        shard_id: Arc::from(""),
        publisher: None,
        delivered: None,
        metrics: None,
        log_budget: LogBudget::default(),
        effects: None,
        pending: None,
    };
    GuestLog::new(&ctx, "abc")
}

#[test]
fn a_log_line_cannot_forge_host_lines_or_grow_without_bound() {
    let (line, cut) = clean_log_line("ok\r\n2026-12-03 INFO forged\u{1b}[31m");
    assert!(!cut);
    assert!(!line.contains(['\r', '\n', '\u{1b}']), "{line}");
    assert!(line.contains("\\r\\n2026-12-03"), "{line}");
    let (line, cut) = clean_log_line(&"x".repeat(100_000));
    assert!(cut);
    assert!(line.len() < MAX_LOG_LINE + 64, "{}", line.len());
    assert!(line.ends_with("[cut: 100000 bytes in all]"));
}

#[test]
fn stderr_written_in_pieces_gives_its_last_lines_as_the_reason() {
    let log = log();
    log.start_call();
    for piece in [
        "Traceback (most",
        " recent call last):\n  File \"app.py\", line 3\n",
        "\n",
    ] {
        log.write(Stdio::Stderr, piece.as_bytes());
    }
    log.write(Stdio::Stdout, b"printed, not a reason\n");
    log.write(Stdio::Stderr, b"KeyError: 'id'");
    assert_eq!(
        log.guest_reason().map(|r| r.text).as_deref(),
        Some("Traceback (most recent call last): |   File \"app.py\", line 3 | KeyError: 'id'")
    );
    // An error-level line says it better; a new call forgets both.
    log.line(Level::Error, "panicked at src/lib.rs:9: boom");
    assert_eq!(
        log.guest_reason().map(|r| r.text).as_deref(),
        Some("panicked at src/lib.rs:9: boom")
    );
    log.start_call();
    assert_eq!(log.guest_reason(), None);
}

#[test]
fn a_line_that_never_ends_is_written_in_pieces() {
    let log = log();
    log.write(Stdio::Stderr, &vec![b'x'; 3 * MAX_LOG_LINE]);
    let inner = log.lock();
    assert_eq!(
        inner.partial[1].len(),
        MAX_LOG_LINE,
        "the rest waits for more"
    );
    assert_eq!(inner.stderr_tail.len(), 2, "two pieces written");
    assert!(inner.stderr_tail.iter().all(|l| l.len() == MAX_LOG_LINE));
}
