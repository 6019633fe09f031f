//! Growth over time, as an SVG line chart: coverage from libFuzzer logs
//! (`cov: N`), or distinct abstract states from `triage states` (`states: N`).

use plotters::prelude::*;
use std::path::Path;

/// What a chart shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Metric {
    /// libFuzzer's `cov:` (edges covered).
    Cov,
    /// `triage states`'s `states:` (distinct abstract states reached).
    States,
}

impl Metric {
    fn key(self) -> &'static str {
        match self {
            Metric::Cov => "cov: ",
            Metric::States => "states: ",
        }
    }

    fn caption(self) -> &'static str {
        match self {
            Metric::Cov => "coverage (libFuzzer cov: edges) over time",
            Metric::States => "distinct abstract states reached over time",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Metric::Cov => "edges covered",
            Metric::States => "abstract states",
        }
    }
}

/// One target's samples: (seconds since start, the metric's value).
pub struct Series {
    /// The target.
    pub name: String,
    /// The samples, in time order.
    pub points: Vec<(f64, u64)>,
}

/// Reads a log whose lines are prefixed with the seconds elapsed
/// (`ci/campaign.sh` writes libFuzzer's so: `12 #4096 pulse cov: 503 ft: ...`;
/// `triage states` writes `12 states: 77`).
pub fn read_log(name: &str, path: &Path, metric: Metric) -> Result<Series, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let points: Vec<(f64, u64)> = text
        .lines()
        .filter_map(|line| {
            let (secs, rest) = line.split_once(' ')?;
            let cov = rest.split_once(metric.key())?.1.split_whitespace().next()?;
            Some((secs.parse().ok()?, cov.parse().ok()?))
        })
        .collect();
    if points.is_empty() {
        return Err(format!(
            "{}: no `{}` line with a time prefix",
            path.display(),
            metric.key().trim_end()
        ));
    }
    Ok(Series {
        name: name.to_string(),
        points,
    })
}

/// Draws every series on one chart.
pub fn draw(series: &[Series], out: &Path, metric: Metric) -> Result<(), String> {
    let max_t = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let max_c = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .max()
        .unwrap_or(1) as f64;
    let root = SVGBackend::new(out, (900, 520)).into_drawing_area();
    let e = |e: DrawingAreaErrorKind<std::io::Error>| format!("{}: {e}", out.display());
    root.fill(&WHITE).map_err(e)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(metric.caption(), ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..max_t * 1.02, 0f64..max_c * 1.1)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc(metric.unit())
        .draw()
        .map_err(e)?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                s.points.iter().map(|&(t, c)| (t, c as f64)),
                color.stroke_width(2),
            ))
            .map_err(e)?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)
}
