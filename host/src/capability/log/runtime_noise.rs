//! What a guest's language runtime writes to stderr as a call dies, after the handler's SDK
//! already logged why: a Rust runtime's panic lines (`thread '<unnamed>' panicked at
//! runtime/src/lib.rs`, `Python function threw an unexpected exception`, the
//! `RUST_BACKTRACE` hint), a JavaScript engine's report of the exception (its message again,
//! `Stack:` and the frames) and its `abort()` notice, and blank lines. Those go to the log at
//! debug (`-v` shows them); a panic of the handler's own Rust code becomes one line.

/// How loud a stderr line is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Said {
    /// The guest's own words: at warn, as stderr always was.
    Loud(String),
    /// The runtime's: at debug.
    Quiet(String),
}

/// Reads a guest's stderr, line by line, through one call.
#[derive(Debug, Default)]
pub struct Noise {
    /// A panic's first line (`thread '…' panicked at LOCATION:`): its message is the next one.
    panic_at: Option<(String, String)>,
    /// Inside a JavaScript engine's `Stack:` block.
    in_stack: bool,
}

/// The Rust runtime componentize-py builds on says this once a Python exception escaped.
const PYTHON_ESCAPED: &str = "Python function threw an unexpected exception";
/// SpiderMonkey (componentize-js) on its way out.
const JS_ABORT: &str = "Redirecting call to abort() to mozalloc_abort";

impl Noise {
    /// A new call: nothing held from the last one.
    pub fn reset(&mut self) {
        *self = Noise::default();
    }

    /// One complete stderr line; `said` is the handler's last error-level line in this call.
    /// Answers what to write (nothing while a panic's first line waits for its message).
    pub fn line(&mut self, line: &str, said: Option<&str>) -> Vec<Said> {
        if let Some((header, at)) = self.panic_at.take() {
            return if line == PYTHON_ESCAPED {
                vec![Said::Quiet(header), Said::Quiet(line.to_owned())]
            } else {
                vec![Said::Loud(format!("panicked at {at}: {line}"))]
            };
        }
        if let Some(at) = panic_location(line) {
            self.panic_at = Some((line.to_owned(), at.to_owned()));
            return Vec::new();
        }
        let trimmed = line.trim();
        if self.in_stack && line.starts_with("  ") {
            return vec![Said::Quiet(line.to_owned())];
        }
        self.in_stack = false;
        let runtime = trimmed.is_empty()
            || trimmed == JS_ABORT
            || trimmed.starts_with("note: run with `RUST_BACKTRACE=1`");
        if trimmed == "Stack:" {
            self.in_stack = true;
            return vec![Said::Quiet(line.to_owned())];
        }
        let repeated = said.is_some_and(|s| s.contains(trimmed));
        if runtime || repeated {
            vec![Said::Quiet(line.to_owned())]
        } else {
            vec![Said::Loud(line.to_owned())]
        }
    }

    /// The call ended: a panic's first line still waiting goes as it is.
    pub fn end(&mut self) -> Option<Said> {
        self.in_stack = false;
        self.panic_at.take().map(|(header, _)| Said::Loud(header))
    }
}

/// `thread 'NAME' (ID) panicked at LOCATION:` → LOCATION.
fn panic_location(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("thread '")?;
    let at = rest.find(" panicked at ")?;
    rest[at + " panicked at ".len()..].strip_suffix(':')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(noise: &mut Noise, lines: &[&str], said: Option<&str>) -> Vec<Said> {
        let mut out: Vec<Said> = lines.iter().flat_map(|l| noise.line(l, said)).collect();
        out.extend(noise.end());
        out
    }

    fn loud(said: &[Said]) -> Vec<&str> {
        said.iter()
            .filter_map(|s| match s {
                Said::Loud(l) => Some(l.as_str()),
                Said::Quiet(_) => None,
            })
            .collect()
    }

    #[test]
    fn componentize_pys_panic_after_a_python_exception_is_quiet() {
        let out = read(
            &mut Noise::default(),
            &[
                "",
                "thread '<unnamed>' (1) panicked at runtime/src/lib.rs:1280:25:",
                PYTHON_ESCAPED,
                "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
            ],
            Some("handler raised RuntimeError: boom at app.py:3 in f"),
        );
        assert_eq!(out.len(), 4);
        assert!(loud(&out).is_empty(), "{out:?}");
    }

    #[test]
    fn a_panic_of_the_handlers_own_code_is_one_loud_line() {
        let out = read(
            &mut Noise::default(),
            &[
                "thread '<unnamed>' panicked at src/lib.rs:9:5:",
                "boom",
                "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
            ],
            None,
        );
        assert_eq!(loud(&out), ["panicked at src/lib.rs:9:5: boom"]);
    }

    #[test]
    fn a_javascript_engines_report_of_what_the_sdk_logged_is_quiet() {
        let out = read(
            &mut Noise::default(),
            &[
                "raised on purpose",
                "Stack:",
                "  command@app.bundle.js:848:13",
                "  handle2@app.bundle.js:668:24",
                "",
                JS_ABORT,
                "",
            ],
            Some("handler threw Error: raised on purpose\\ncommand@app.bundle.js:848:13"),
        );
        assert_eq!(out.len(), 7);
        assert!(loud(&out).is_empty(), "{out:?}");
    }

    #[test]
    fn the_guests_own_stderr_lines_stay_loud() {
        let mut noise = Noise::default();
        let out = read(&mut noise, &["retrying order 7", "  indented detail"], None);
        assert_eq!(loud(&out), ["retrying order 7", "  indented detail"]);
        let out = read(&mut noise, &["thread 'main' panicked at x.rs:1:1:"], None);
        assert_eq!(loud(&out), ["thread 'main' panicked at x.rs:1:1:"]);
    }
}
