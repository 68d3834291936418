//! The same metrics in Prometheus' classic text format (0.0.4), for the tools that read only
//! that one (`promtool check metrics`, older scrapers, a person with curl).
//!
//! prometheus-client writes OpenMetrics, where a counter's family is named without `_total`
//! (`# TYPE shardhost_records counter`) and its samples with it; the classic format names the
//! family as its samples (`# TYPE shardhost_records_total counter`), has no `# UNIT` and no
//! `# EOF`, and says `untyped` where OpenMetrics says `unknown`. The samples are the same lines.

use std::collections::HashSet;

/// `openmetrics` (as [`Metrics::encode`](super::Metrics::encode) writes it) in the classic
/// text format.
pub fn classic(openmetrics: &str) -> String {
    let counters: HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_once(' '))
        .filter(|(_, kind)| *kind == "counter")
        .map(|(name, _)| name)
        .collect();
    let family = |name: &str| -> String {
        if counters.contains(name) && !name.ends_with("_total") {
            format!("{name}_total")
        } else {
            name.to_owned()
        }
    };
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some((name, help)) = line.strip_prefix("# HELP ").and_then(|r| r.split_once(' ')) {
            // OpenMetrics escapes `"` in help text; the classic format escapes only `\` and
            // newlines.
            let help = help.replace("\\\"", "\"");
            out.push_str(&format!("# HELP {} {help}\n", family(name)));
        } else if let Some((name, kind)) =
            line.strip_prefix("# TYPE ").and_then(|r| r.split_once(' '))
        {
            let kind = if kind == "unknown" { "untyped" } else { kind };
            out.push_str(&format!("# TYPE {} {kind}\n", family(name)));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::classic;

    #[test]
    fn counter_families_take_their_samples_name_and_the_openmetrics_lines_go() {
        let om = "# HELP shardhost_records Records \\\"handled\\\".\n\
                  # TYPE shardhost_records counter\n\
                  shardhost_records_total{outcome=\"ack\"} 2\n\
                  # HELP shardhost_call_seconds Duration.\n\
                  # TYPE shardhost_call_seconds histogram\n\
                  # UNIT shardhost_call_seconds seconds\n\
                  shardhost_call_seconds_sum 0.5\n\
                  # HELP shardhost_leases_held Leases.\n\
                  # TYPE shardhost_leases_held gauge\n\
                  shardhost_leases_held 2\n\
                  # TYPE shardhost_odd unknown\n\
                  # EOF\n";
        assert_eq!(
            classic(om),
            "# HELP shardhost_records_total Records \"handled\".\n\
             # TYPE shardhost_records_total counter\n\
             shardhost_records_total{outcome=\"ack\"} 2\n\
             # HELP shardhost_call_seconds Duration.\n\
             # TYPE shardhost_call_seconds histogram\n\
             shardhost_call_seconds_sum 0.5\n\
             # HELP shardhost_leases_held Leases.\n\
             # TYPE shardhost_leases_held gauge\n\
             shardhost_leases_held 2\n\
             # TYPE shardhost_odd untyped\n"
        );
    }
}
