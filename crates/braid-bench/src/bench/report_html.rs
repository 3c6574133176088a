//! report.html: the document as one self-contained page (the plots'
//! SVG inline, no network fetches).

use super::report::{Doc, Table};
use super::targets::Mark;
use std::fmt::Write as _;
use std::path::Path;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `code` spans for the markdown backticks of the document's text.
fn inline(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in esc(s).split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

fn table(out: &mut String, t: &Table) {
    let _ = writeln!(
        out,
        "<table>\n<caption>{}</caption>\n<thead><tr>",
        esc(&t.caption)
    );
    for h in &t.head {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for (i, (row, verdict)) in t.rows.iter().zip(&t.verdicts).enumerate() {
        let class = match verdict {
            Some(Mark::Miss) => " class=\"miss\"",
            Some(Mark::NearMiss(_)) => " class=\"near\"",
            Some(Mark::Met) => " class=\"met\"",
            None => "",
        };
        let _ = write!(out, "<tr{class}>");
        for (j, c) in row.iter().enumerate() {
            match t.links.get(i) {
                Some(Some(anchor)) if j == 0 => {
                    let _ = write!(out, "<td><a href=\"#{}\">{}</a></td>", esc(anchor), esc(c));
                }
                _ => {
                    let _ = write!(out, "<td>{}</td>", esc(c));
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

/// An SVG file's markup without its XML declaration, for inlining.
fn inline_svg(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let start = text.find("<svg")?;
    Some(text[start..].to_owned())
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:1em 0;font-size:13px}\
caption{text-align:left;font-weight:bold;padding:.3em 0}\
th,td{border:1px solid #bbb;padding:2px 6px;vertical-align:top}\
th{background:#eee}tr.miss td:first-child{background:#fdd;font-weight:bold}\
tr.met td:first-child{background:#dfd}\
tr.near td:first-child{background:#ffe9b3}\
p.verdict{font-size:1.15em;font-weight:bold}\
figure{display:inline-block;margin:.5em;vertical-align:top}\
figcaption{font-size:13px}footer{margin-top:2em;color:#555}";

pub fn render(doc: &Doc, out_dir: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n<p class=\"verdict\">{}</p>",
        esc(&doc.title),
        esc(&doc.title),
        esc(&doc.verdict)
    );
    table(&mut out, &doc.summary);
    out.push_str("<ul>\n");
    for n in &doc.summary_notes {
        let _ = writeln!(out, "<li>{}</li>", inline(n));
    }
    out.push_str("</ul>\n<section id=\"legend\">\n<h2>Legend</h2>\n<ul>\n");
    for line in &doc.intro {
        let _ = writeln!(out, "<li>{}</li>", inline(line));
    }
    out.push_str("</ul>\n</section>\n");
    for sec in &doc.sections {
        let _ = writeln!(
            out,
            "<section id=\"{}\">\n<h2>{}</h2>",
            esc(&sec.anchor),
            esc(&sec.title)
        );
        for p in &sec.paragraphs {
            let _ = writeln!(out, "<p>{}</p>", inline(p));
        }
        for t in &sec.tables {
            table(&mut out, t);
        }
        if !sec.notes.is_empty() {
            out.push_str("<ul>\n");
            for n in &sec.notes {
                let _ = writeln!(out, "<li>{}</li>", inline(n));
            }
            out.push_str("</ul>\n");
        }
        for f in &sec.figures {
            let svg = inline_svg(&out_dir.join(&f.svg))
                .unwrap_or_else(|| format!("<p>(missing {})</p>", esc(&f.svg)));
            let _ = writeln!(
                out,
                "<figure>{svg}<figcaption>{}</figcaption></figure>",
                esc(&f.title)
            );
        }
        out.push_str("</section>\n");
    }
    out.push_str("<footer>\n");
    for line in &doc.footer {
        let _ = writeln!(out, "<p>{}</p>", inline(line));
    }
    out.push_str("</footer>\n</body>\n</html>\n");
    out
}
