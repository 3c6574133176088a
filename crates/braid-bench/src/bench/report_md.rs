//! report.md: the document as GitHub-flavoured markdown, verdict first:
//! the summary table, then the legend, then a section per suite.

use super::report::{Doc, Table};
use super::targets::Mark;
use std::fmt::Write as _;

fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn table(out: &mut String, t: &Table) {
    let _ = writeln!(
        out,
        "| {} |",
        t.head
            .iter()
            .map(|h| esc(h))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(out, "|{}", "---|".repeat(t.head.len()));
    for (i, (row, verdict)) in t.rows.iter().zip(&t.verdicts).enumerate() {
        let mut cells: Vec<String> = row.iter().map(|c| esc(c)).collect();
        if let Some(first) = cells.first_mut() {
            if let Some(Some(anchor)) = t.links.get(i) {
                *first = format!("[{first}](#{anchor})");
            }
            match verdict {
                Some(Mark::Miss) => *first = format!("**{first}** ✗"),
                Some(Mark::NearMiss(_)) => *first = format!("{first} ≈"),
                Some(Mark::Met) | None => {}
            }
        }
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
}

pub fn render(doc: &Doc) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", doc.title);
    let _ = writeln!(out, "**{}**\n", doc.verdict);
    table(&mut out, &doc.summary);
    out.push('\n');
    for n in &doc.summary_notes {
        let _ = writeln!(out, "- {n}");
    }
    let _ = writeln!(out, "\n## Legend\n");
    for line in &doc.intro {
        let _ = writeln!(out, "- {line}");
    }
    for sec in &doc.sections {
        let _ = writeln!(out, "\n## {}\n", sec.title);
        for p in &sec.paragraphs {
            let _ = writeln!(out, "{p}\n");
        }
        for (i, t) in sec.tables.iter().enumerate() {
            if i > 0 {
                let _ = writeln!(out, "\n{}:\n", t.caption);
            }
            table(&mut out, t);
        }
        if !sec.notes.is_empty() {
            out.push('\n');
            for n in &sec.notes {
                let _ = writeln!(out, "- {n}");
            }
        }
        for f in &sec.figures {
            let _ = write!(out, "\n![{}]({})", f.title, f.svg);
            if let Some(png) = &f.png {
                let _ = write!(out, " ([PNG]({png}))");
            }
            out.push('\n');
        }
    }
    out.push_str("\n---\n\n");
    for line in &doc.footer {
        let _ = writeln!(out, "{line}\n");
    }
    out
}
