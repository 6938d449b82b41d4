//! The chart a run writes: over the day, the instances each contender ran beside the instances the games in play
//! filled, as a PNG. Text is drawn with a TrueType font read from the system (DejaVu Sans, Debian's
//! fonts-dejavu-core, which `make deps` installs), so that no font is bundled.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use crate::run::Day;

/// Where the font is looked for, first found first.
const FONTS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Why the chart was not written.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("no font to draw its text with: install fonts-dejavu-core (looked for {FONTS:?})")]
    NoFont,
    #[error("the chart could not be drawn: {0}")]
    Drawing(String),
}

fn drawing(err: impl std::fmt::Display) -> ChartError {
    ChartError::Drawing(err.to_string())
}

/// Writes the chart of `days` to `path`.
pub fn write(days: &[Day], path: &Path) -> Result<(), ChartError> {
    let font = FONTS
        .iter()
        .find_map(|path| std::fs::read(path).ok())
        .ok_or(ChartError::NoFont)?;
    // The font backs every chart drawn until the process exits.
    register_font("sans-serif", FontStyle::Normal, Box::leak(font.into_boxed_slice()))
        .map_err(|_| ChartError::NoFont)?;
    let hours = days
        .iter()
        .flat_map(|d| d.samples.last())
        .map(|s| s.hour)
        .fold(1.0, f64::max);
    let top = days
        .iter()
        .flat_map(|d| &d.samples)
        .map(|s| s.instances.max(s.needed))
        .fold(1.0, f64::max)
        * 1.1;
    let root = BitMapBackend::new(path, (1400, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(drawing)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Instances over the day, by scaling policy", ("sans-serif", 28))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..hours, 0.0..top)
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .x_desc("hour of the day")
        .y_desc("instances")
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(drawing)?;
    if let Some(first) = days.first() {
        chart
            .draw_series(LineSeries::new(
                first.samples.iter().map(|s| (s.hour, s.needed)),
                BLACK.stroke_width(2),
            ))
            .map_err(drawing)?
            .label("instances the games filled (first policy's day)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    }
    for (n, day) in days.iter().enumerate() {
        let color = Palette99::pick(n).to_rgba();
        chart
            .draw_series(LineSeries::new(
                day.samples.iter().map(|s| (s.hour, s.instances)),
                color,
            ))
            .map_err(drawing)?
            .label(day.name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(drawing)?;
    root.present().map_err(drawing)
}
