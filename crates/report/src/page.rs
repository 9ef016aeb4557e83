//! The page itself: header with the verdicts, the table of figures, the chart sections and the
//! parameters, with inline styles and the self-check script.
//!
//! The self-check ([`CHECK_SCRIPT`]) lets a headless browser tell whether the page a person
//! would see actually shows its charts: on load it measures every chart and writes the result
//! into `data-report-check` on `<html>` (`ok: N charts` or `fail: reasons`), which
//! `scripts/check-report.sh` reads from the rendered DOM. It fails a chart whose `<svg>` is
//! missing or has no size, whose series groups are missing or draw nothing (no marks, an empty
//! bounding box, or marks outside the chart), or whose text labels overlap; and the page on
//! any script error, or when it has no chart at all.

use crate::charts::{self, Section};
use crate::model::Model;
use crate::table;
use crate::units::escape;
use std::fmt::Write as _;

/// The whole page.
pub fn render(model: &Model) -> String {
    let study = model.study;
    let sections = if model.has_data() {
        charts::sections(model)
    } else {
        Vec::new()
    };
    let mut html = String::with_capacity(1 << 20);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n<script>\n{CHECK_SCRIPT}</script>\n\
         </head>\n<body>\n<main>\n",
        escape(&study.title)
    );
    header(model, &mut html);
    contents(&sections, &mut html);

    html.push_str("<section id=\"results\">\n<h2>Results</h2>\n");
    if model.has_data() {
        html.push_str(
            "<p>fio's figures for every run: IOPS and bandwidth over each job's runtime, and \
             completion latency (clat, from submission to completion). A job's clones \
             (<code>numjobs</code>) are one row, as in the terminal's tables; a run that \
             starved a job (no I/O of it completed within the runtime) is marked \
             <em>starved</em>.</p>\n",
        );
        html.push_str(&table::results(model));
    } else {
        html.push_str("<p class=\"empty\">No run measured any I/O.</p>\n");
    }
    html.push_str("</section>\n");

    let mut figure_number = 0;
    for section in &sections {
        let _ = write!(
            html,
            "<section id=\"{}\">\n<h2>{}</h2>\n<p>{}</p>\n",
            section.id,
            escape(&section.title),
            escape(&section.intro)
        );
        if section.figures.is_empty() {
            html.push_str("<p class=\"empty\">Nothing to draw.</p>\n");
        }
        html.push_str("<div class=\"grid\">\n");
        for figure in &section.figures {
            figure_number += 1;
            let _ = write!(
                html,
                "<figure class=\"chart\" id=\"figure-{figure_number}\" data-series=\"{}\">\n\
                 <figcaption>Figure {figure_number}. {}</figcaption>\n",
                figure.chart.series.len(),
                escape(&figure.title)
            );
            match figure.chart.svg() {
                Ok(svg) => html.push_str(&svg),
                Err(error) => {
                    let _ = writeln!(
                        html,
                        "<p class=\"chart-error\">This chart could not be drawn: {}</p>",
                        escape(&error)
                    );
                }
            }
            html.push_str("</figure>\n");
        }
        html.push_str("</div>\n</section>\n");
    }

    html.push_str("<section id=\"parameters\">\n<h2>Parameters</h2>\n");
    html.push_str(&table::parameters(model));
    html.push_str("</section>\n</main>\n</body>\n</html>\n");
    html
}

fn header(model: &Model, html: &mut String) {
    let study = model.study;
    let _ = writeln!(html, "<header>\n<h1>{}</h1>", escape(&study.title));
    verdicts(model, html);
    per_job(model, html);
    for paragraph in study.summary.split("\n\n") {
        let paragraph = paragraph.trim();
        if !paragraph.is_empty() {
            let _ = writeln!(html, "<p class=\"summary\">{}</p>", escape(paragraph));
        }
    }
    html.push_str("<dl class=\"facts\">\n");
    let _ = writeln!(html, "<dt>seed</dt><dd><code>{}</code></dd>", study.seed);
    let _ = writeln!(
        html,
        "<dt>device</dt><dd><code>{}</code></dd>",
        escape(&study.device)
    );
    let settings = if study.settings.is_empty() {
        "defaults".to_string()
    } else {
        study
            .settings
            .iter()
            .map(|(name, value)| format!("<code>{}={}</code>", escape(name), escape(value)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(html, "<dt>settings</dt><dd>{settings}</dd>");
    let policies = (0..model.policies.len())
        .map(|policy| {
            format!(
                "<span class=\"policy\">{}</span>",
                table::policy_name(model, policy)
            )
        })
        .collect::<Vec<_>>()
        .join(" ");
    let _ = writeln!(html, "<dt>policies</dt><dd>{policies}</dd>");
    if let Some(sweep) = &study.sweep {
        let _ = writeln!(
            html,
            "<dt>swept</dt><dd><code>{}</code> over {}</dd>",
            escape(&sweep.name),
            sweep
                .values
                .iter()
                .map(|v| escape(v))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _ = writeln!(html, "<dt>runs</dt><dd>{}</dd>", study.runs.len());
    html.push_str("</dl>\n</header>\n");
}

/// One line per job (at the last point with data): the policy under which its mean completion
/// latency was lowest, what the other jobs got under that policy against the most any policy
/// gave them, and the policies that starved it; so the page says who protected whom and at
/// what cost.
fn per_job(model: &Model, html: &mut String) {
    let Some(point) = (0..model.points.len()).rev().find(|&point| {
        (0..model.policies.len())
            .any(|policy| (0..model.keys.len()).any(|key| model.cell(point, policy, key).is_some()))
    }) else {
        return;
    };
    if model.policies.len() < 2 {
        return;
    }
    let mut lines = Vec::new();
    for key in 0..model.keys.len() {
        let best = (0..model.policies.len())
            .filter_map(|policy| {
                let cell = model.cell(point, policy, key)?;
                (cell.clat.count() > 0 && cell.starved.is_none())
                    .then(|| (policy, cell.clat.mean()))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let starved: Vec<String> = (0..model.policies.len())
            .filter(|&policy| {
                model
                    .cell(point, policy, key)
                    .is_some_and(|cell| cell.starved.is_some())
            })
            .map(|policy| crate::table::policy_name(model, policy))
            .collect();
        let starved_text = if starved.is_empty() {
            String::new()
        } else {
            format!(
                "; <span class=\"starved\">starved</span> under {} (no I/O completed within \
                 the runtime)",
                starved.join(", ")
            )
        };
        let Some((best, mean)) = best else {
            lines.push(format!(
                "<li><b>{}</b>: no I/O completed under any policy{starved_text}</li>",
                escape(&model.keys[key].label())
            ));
            continue;
        };
        let worst = (0..model.policies.len())
            .filter_map(|policy| model.cell(point, policy, key))
            .filter(|cell| cell.clat.count() > 0)
            .map(|cell| cell.clat.mean())
            .fold(0.0, f64::max);
        // The others' bandwidth under `best`, against the most each got under any policy.
        let (mut got, mut most) = (0.0, 0.0);
        for other in (0..model.keys.len()).filter(|&other| other != key) {
            let bandwidth = |policy| {
                model
                    .cell(point, policy, other)
                    .map_or(0.0, |c| c.bandwidth)
            };
            got += bandwidth(best);
            most += (0..model.policies.len()).map(bandwidth).fold(0.0, f64::max);
        }
        let cost = if most > 0.0 {
            format!(
                "; the other jobs got {} there, {:.0}% of the most any policy gave them",
                crate::units::bandwidth(got),
                100.0 * got / most
            )
        } else {
            String::new()
        };
        lines.push(format!(
            "<li><b>{}</b>: fastest under <span class=\"policy\">{}</span> (mean {}; {} under \
             the slowest){}{starved_text}</li>",
            escape(&model.keys[key].label()),
            crate::table::policy_name(model, best),
            escape(&crate::units::latency(mean)),
            escape(&crate::units::latency(worst)),
            escape(&cost)
        ));
    }
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        html,
        "<section id=\"per-job\">\n<p class=\"per-job-lead\">Each job, by its mean completion \
         latency{}:</p>\n<ul class=\"per-job\">\n{}\n</ul>\n</section>",
        escape(&model_point_text(model, point)),
        lines.join("\n")
    );
}

/// ` at iodepth=16` for a sweep point (empty without a sweep).
fn model_point_text(model: &Model, point: usize) -> String {
    match (
        model.sweep_name(),
        model.points.get(point).and_then(|p| p.as_deref()),
    ) {
        (Some(name), Some(value)) => format!(" at {name}={value}"),
        _ => String::new(),
    }
}

fn verdicts(model: &Model, html: &mut String) {
    let verdicts = &model.study.verdicts;
    if verdicts.is_empty() {
        return;
    }
    let failed = verdicts.iter().filter(|v| v.failed()).count();
    let gaps = verdicts.iter().filter(|v| v.word() == "GAP").count();
    let (class, headline) = if let Some(headline) = &model.study.headline {
        (
            if verdicts.iter().any(|v| v.pass) {
                "pass"
            } else {
                "fail"
            },
            escape(headline),
        )
    } else if failed == 0 {
        (
            "pass",
            format!(
                "PASS: {} of {} claim{} hold{}{}",
                verdicts.len() - gaps,
                verdicts.len(),
                plural(verdicts.len()),
                if verdicts.len() - gaps == 1 { "s" } else { "" },
                if gaps > 0 {
                    format!("; {gaps} known gap{}", plural(gaps))
                } else {
                    String::new()
                }
            ),
        )
    } else {
        (
            "fail",
            format!(
                "FAIL: {failed} of {} claim{} do{} not hold",
                verdicts.len(),
                plural(verdicts.len()),
                if failed == 1 { "es" } else { "" }
            ),
        )
    };
    let _ = writeln!(
        html,
        "<section id=\"verdicts\" class=\"verdicts {class}\">\n<p class=\"headline\">{headline}</p>"
    );
    for verdict in verdicts {
        let word = verdict.word();
        let class = word.to_ascii_lowercase();
        let gap = match (&verdict.gap, verdict.pass) {
            (Some(gap), false) => format!("<p class=\"gap\">known gap: {}</p>", escape(gap)),
            _ => String::new(),
        };
        let _ = writeln!(
            html,
            "<div class=\"verdict {class}\"><span class=\"badge\">{word}</span>\
             <div><p class=\"claim\">{}</p><p class=\"figure\">{}</p>{gap}</div></div>",
            escape(&verdict.claim),
            escape(&verdict.figure)
        );
    }
    html.push_str("</section>\n");
}

fn plural(count: usize) -> &'static str {
    if count == 1 {
        ""
    } else {
        "s"
    }
}

fn contents(sections: &[Section], html: &mut String) {
    html.push_str("<nav><a href=\"#results\">Results</a>");
    for section in sections {
        let _ = write!(
            html,
            " <a href=\"#{}\">{}</a>",
            section.id,
            escape(&section.title)
        );
    }
    html.push_str(" <a href=\"#parameters\">Parameters</a></nav>\n");
}

/// The page's styles: readable at 1200 px, charts two per row.
const STYLE: &str = r#"body { margin: 0; background: #f6f7f9; color: #1f2328;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 20px 24px 48px; background: #fff; }
h1 { font-size: 28px; margin: 8px 0 12px; }
h2 { font-size: 21px; margin: 36px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #d8dee4; }
h3 { font-size: 16px; margin: 20px 0 6px; }
p.summary { white-space: pre-line; max-width: 70em; }
code { font: 13px ui-monospace, "DejaVu Sans Mono", monospace; background: #f0f2f4; padding: 1px 4px; border-radius: 3px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 12px 0; }
dl.facts dt { font-weight: 600; color: #57606a; }
dl.facts dd { margin: 0; }
.policy { margin-right: 14px; white-space: nowrap; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
nav { position: sticky; top: 0; background: #fff; padding: 8px 0; border-bottom: 1px solid #d8dee4; z-index: 1; }
nav a { margin-right: 16px; color: #0969da; text-decoration: none; }
.verdicts { margin: 12px 0 16px; padding: 12px 16px; border-radius: 6px; border: 2px solid; }
.verdicts.pass { border-color: #1a7f37; background: #eefbf1; }
.verdicts.fail { border-color: #cf222e; background: #fff0ef; }
.verdicts .headline { font-size: 20px; font-weight: 700; margin: 0 0 8px; }
.verdicts.pass .headline { color: #1a7f37; }
.verdicts.fail .headline { color: #cf222e; }
.verdict { display: flex; gap: 12px; align-items: flex-start; padding: 6px 0; border-top: 1px solid rgba(0,0,0,.08); }
.verdict p { margin: 0; }
.verdict .figure { color: #57606a; font-size: 14px; }
.badge { flex: none; font-weight: 700; color: #fff; border-radius: 4px; padding: 1px 8px; font-size: 14px; }
.verdict.pass .badge { background: #1a7f37; }
.verdict.gap .badge { background: #9a6700; }
.verdict .gap { color: #9a6700; font-size: 0.9em; }
.verdict.fail .badge { background: #cf222e; }
table { border-collapse: collapse; font-size: 14px; margin: 8px 0; }
th, td { padding: 4px 10px; text-align: left; border-bottom: 1px solid #eaeef2; vertical-align: top; }
thead th { background: #f6f8fa; border-bottom: 2px solid #d0d7de; white-space: nowrap; }
tbody th { font-weight: 600; }
table.results tbody { border-top: 2px solid #d0d7de; }
table.results tbody:nth-of-type(even) { background: #fafbfc; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.note { font-weight: 400; color: #57606a; font-size: 13px; }
.starved { font-weight: 600; color: #b42318; font-size: 12px; text-transform: uppercase; letter-spacing: 0.03em; }
table.params td:last-child { color: #57606a; }
details { margin: 12px 0; }
summary { cursor: pointer; font-weight: 600; }
.grid { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 16px 20px; }
figure.chart { margin: 0; border: 1px solid #eaeef2; border-radius: 6px; padding: 8px; }
figure.chart figcaption { font-weight: 600; font-size: 14px; margin: 0 0 4px 4px; }
figure.chart svg { display: block; width: 100%; height: auto; }
.chart-error, .empty { color: #cf222e; }
ul.notes { color: #57606a; font-size: 14px; }
@media print {
  body { background: #fff; font-size: 11pt; }
  main { max-width: none; padding: 0; }
  nav { display: none; }
  details > * { display: block; }
  section, figure.chart, .verdict, tr { break-inside: avoid; }
  h2 { break-after: avoid; }
  .grid { gap: 8px 12px; }
  .verdicts, .badge { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"#;

/// The page's self-check; see the module documentation.
pub const CHECK_SCRIPT: &str = r#"(function () {
  'use strict';
  var scriptErrors = [];
  var chartErrors = [];
  var checked = false;
  var chartCount = 0;
  function publish() {
    var root = document.documentElement;
    var errors = scriptErrors.concat(chartErrors);
    if (checked && chartCount === 0) { errors.push('the page has no charts'); }
    var verdict = errors.length ? 'fail: ' + errors.join('; ')
      : !checked ? 'fail: the check did not run'
      : 'ok: ' + chartCount + ' charts';
    root.setAttribute('data-report-check', verdict);
    root.setAttribute('data-page-height', String(Math.ceil(root.scrollHeight)));
  }
  window.addEventListener('error', function (event) {
    scriptErrors.push('script error: ' + (event.message || 'in ' + (event.target && event.target.tagName)));
    publish();
  }, true);
  window.addEventListener('unhandledrejection', function (event) {
    scriptErrors.push('unhandled rejection: ' + event.reason);
    publish();
  });
  function overlap(a, b) {
    return a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  }
  function checkChart(figure) {
    var name = figure.id || 'a chart';
    var svgs = figure.getElementsByTagName('svg');
    if (svgs.length !== 1) { chartErrors.push(name + ' has ' + svgs.length + ' <svg> elements'); return; }
    var svg = svgs[0];
    var box = svg.getBoundingClientRect();
    if (!(box.width >= 100 && box.height >= 60)) {
      chartErrors.push(name + ' is ' + Math.round(box.width) + 'x' + Math.round(box.height) + ' px');
      return;
    }
    var view = svg.viewBox && svg.viewBox.baseVal;
    var series = svg.querySelectorAll('g.series');
    var expected = Number(figure.getAttribute('data-series'));
    if (series.length === 0) { chartErrors.push(name + ' draws no series'); }
    if (series.length !== expected) {
      chartErrors.push(name + ' draws ' + series.length + ' series of ' + expected);
    }
    for (var i = 0; i < series.length; i++) {
      var label = name + ' series "' + series[i].getAttribute('data-series') + '"';
      if (series[i].querySelectorAll('polyline, rect, circle, polygon, line').length === 0) {
        chartErrors.push(label + ' has no marks');
        continue;
      }
      var b = series[i].getBBox();
      if (!(b.width > 0 || b.height > 0)) { chartErrors.push(label + ' has an empty bounding box'); }
      if (view && (b.x < -1 || b.y < -1 || b.x + b.width > view.width + 1 || b.y + b.height > view.height + 1)) {
        chartErrors.push(label + ' is drawn outside the chart');
      }
    }
    var texts = svg.getElementsByTagName('text');
    if (texts.length < 2) { chartErrors.push(name + ' has no axis labels'); }
    var boxes = [];
    for (var t = 0; t < texts.length; t++) {
      var r = texts[t].getBoundingClientRect();
      if (r.width > 0 && r.height > 0) { boxes.push({ r: r, text: texts[t].textContent.trim() }); }
    }
    for (var p = 0; p < boxes.length; p++) {
      for (var q = p + 1; q < boxes.length; q++) {
        if (overlap(boxes[p].r, boxes[q].r)) {
          chartErrors.push(name + ': labels "' + boxes[p].text + '" and "' + boxes[q].text + '" overlap');
        }
      }
    }
  }
  window.addEventListener('load', function () {
    var figures = document.querySelectorAll('figure.chart');
    chartCount = figures.length;
    for (var f = 0; f < figures.length; f++) { checkChart(figures[f]); }
    checked = true;
    publish();
  });
})();
"#;
