//! Text tables: what `status` and the fleet's rendering print.

/// Rows as aligned columns, indented by two spaces.
pub(super) fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out += &format!("  {}\n", line.join("  ").trim_end());
    }
    out
}
