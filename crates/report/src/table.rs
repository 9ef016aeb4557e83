//! The page's tables: every run's figures side by side, and the parameters the runs used.

use crate::model::Model;
use crate::plot::{hex, policy_color};
use crate::units::{self, escape};
use iosched_fio::Parameter;
use std::fmt::Write as _;

/// The table of figures: for each sweep point, job and direction with I/O, one row per policy
/// with IOPS, bandwidth and completion latency (mean, p99, p99.99, max); a run that starved
/// the job says so after the policy's name (the mark's full text in its title).
pub fn results(model: &Model) -> String {
    let sweep = model.sweep_name();
    let mut html = String::from("<table class=\"results\">\n<thead><tr>");
    if let Some(name) = sweep {
        let _ = write!(html, "<th>{}</th>", escape(name));
    }
    html.push_str(
        "<th>job</th><th>dir</th><th>policy</th><th class=\"num\">IOPS</th>\
         <th class=\"num\">bandwidth</th><th class=\"num\">clat mean</th>\
         <th class=\"num\">clat p99</th><th class=\"num\">clat p99.99</th>\
         <th class=\"num\">clat max</th><th class=\"num\">I/Os</th></tr></thead>\n",
    );
    for point in 0..model.points.len() {
        for (key_index, key) in model.keys.iter().enumerate() {
            let rows: Vec<(usize, &crate::model::Cell)> = (0..model.policies.len())
                .filter_map(|policy| Some((policy, model.cell(point, policy, key_index)?)))
                .collect();
            let Some(&(_, first)) = rows.first() else {
                continue;
            };
            html.push_str("<tbody>\n");
            for (row, &(policy, cell)) in rows.iter().enumerate() {
                html.push_str("<tr class=\"result\">");
                if row == 0 {
                    let span = rows.len();
                    if sweep.is_some() {
                        let value = model.points[point].as_deref().unwrap_or("");
                        let _ = write!(html, "<th rowspan=\"{span}\">{}</th>", escape(value));
                    }
                    let merged = if first.members > 1 {
                        format!("<span class=\"note\"> ({} jobs)</span>", first.members)
                    } else {
                        String::new()
                    };
                    let _ = write!(
                        html,
                        "<th rowspan=\"{span}\">{}{merged}</th><th rowspan=\"{span}\">{}</th>",
                        escape(&key.job),
                        key.dir.name()
                    );
                }
                let clat = &cell.clat;
                // No samples: no latency to show, rather than 0.
                let latency = |nanos: f64| {
                    if clat.count() == 0 {
                        "\u{2013}".to_string()
                    } else {
                        units::latency(nanos)
                    }
                };
                let starved = match &cell.starved {
                    Some(mark) => format!(
                        " <span class=\"starved\" title=\"{}\">starved</span>",
                        escape(mark)
                    ),
                    None => String::new(),
                };
                let _ = writeln!(
                    html,
                    "<td>{}{starved}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                     <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                     <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                    policy_name(model, policy),
                    units::iops(cell.iops),
                    units::bandwidth(cell.bandwidth),
                    latency(clat.mean()),
                    latency(clat.percentile(99.0) as f64),
                    latency(clat.percentile(99.99) as f64),
                    latency(clat.max() as f64),
                    cell.ios
                );
            }
            html.push_str("</tbody>\n");
        }
    }
    html.push_str("</table>\n");
    html
}

/// A policy's name with its colour swatch, as in the charts' legends.
pub fn policy_name(model: &Model, policy: usize) -> String {
    format!(
        "<span class=\"swatch\" style=\"background:{}\"></span>{}",
        hex(policy_color(policy)),
        escape(&model.policies[policy])
    )
}

fn parameter_table(parameters: &[Parameter]) -> String {
    let mut html = String::from(
        "<table class=\"params\"><thead><tr><th>name</th><th class=\"num\">value</th>\
         <th>unit</th><th>meaning and source</th></tr></thead>\n<tbody>\n",
    );
    for p in parameters {
        let _ = writeln!(
            html,
            "<tr><td><code>{}</code></td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(&p.name),
            escape(&p.value),
            escape(&p.unit),
            escape(&p.note)
        );
    }
    html.push_str("</tbody></table>\n");
    html
}

/// The seed, the settings given, each policy's tunables (from its first run), the device's
/// parameters (from the study's first run, folded away) and the simulator's notes.
pub fn parameters(model: &Model) -> String {
    let study = model.study;
    let mut html = String::new();
    let _ = writeln!(
        html,
        "<p>Every run used seed <code>{}</code> on device <code>{}</code>; \
         <code>--seed {}</code> replays any of them exactly.</p>",
        study.seed,
        escape(&study.device),
        study.seed
    );
    if study.settings.is_empty() {
        html.push_str("<p>Settings given: none (every value is the model's default).</p>\n");
    } else {
        html.push_str(
            "<h3>Settings given</h3>\n<table class=\"params\"><thead><tr><th>name</th>\
             <th class=\"num\">value</th></tr></thead>\n<tbody>\n",
        );
        for (name, value) in &study.settings {
            let _ = writeln!(
                html,
                "<tr><td><code>{}</code></td><td class=\"num\">{}</td></tr>",
                escape(name),
                escape(value)
            );
        }
        html.push_str("</tbody></table>\n");
    }
    for (index, policy) in model.policies.iter().enumerate() {
        let Some(run) = study.runs.iter().find(|r| &r.policy == policy) else {
            continue;
        };
        let _ = writeln!(html, "<h3>Tunables of {}</h3>", policy_name(model, index));
        if run.report.tunables.is_empty() {
            html.push_str("<p>None.</p>\n");
        } else {
            html.push_str(&parameter_table(&run.report.tunables));
        }
    }
    if let Some(run) = study.runs.first() {
        let _ = writeln!(
            html,
            "<details><summary>Device parameters of <code>{}</code> ({} values, given and \
             derived)</summary>\n{}</details>",
            escape(&run.report.device),
            run.report.device_parameters.len(),
            parameter_table(&run.report.device_parameters)
        );
    }
    let mut notes: Vec<&str> = Vec::new();
    for run in &study.runs {
        for note in &run.report.notes {
            if !notes.contains(&note.as_str()) {
                notes.push(note);
            }
        }
    }
    if !notes.is_empty() {
        html.push_str("<h3>Notes from the runs</h3>\n<ul class=\"notes\">\n");
        for note in notes {
            let _ = writeln!(html, "<li>{}</li>", escape(note));
        }
        html.push_str("</ul>\n");
    }
    html
}
