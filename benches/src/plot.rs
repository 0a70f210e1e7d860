//! `bench_results/ratios.png`: one horizontal bar per smarm-vs-peer row,
//! the ratio smarm / peer on a log scale, and each row's goal as a black
//! mark across its bar.
//!
//! Drawn with plotters' bitmap backend into memory and encoded with `png`;
//! labels use [`crate::font`], so nothing outside the crate graph is needed.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use plotters::prelude::*;

use crate::font;

/// One bar.
#[derive(Debug, Clone)]
pub struct Bar {
    /// What is compared, e.g. `yield_ping: smarm vs tokio`.
    pub label: String,
    /// smarm / peer.
    pub ratio: f64,
    /// The largest ratio accepted, if the row has a goal.
    pub goal: Option<f64>,
}

const WIDTH: u32 = 1800;
const ROW: u32 = 26;
const TOP: u32 = 70;
const BOTTOM: u32 = 60;
const LABEL_SCALE: u32 = 2;
const PLOT_LEFT: u32 = 940;
const PLOT_RIGHT: u32 = WIDTH - 130;

const MET: RGBColor = RGBColor(46, 139, 87);
const MISSED: RGBColor = RGBColor(205, 55, 55);
const REPORTED: RGBColor = RGBColor(110, 130, 170);
const GRID: RGBColor = RGBColor(215, 215, 215);

/// Draws `bars` under `title` and writes the PNG to `path`.
pub fn draw(path: &Path, title: &str, bars: &[Bar]) -> Result<(), String> {
    let height = TOP + ROW * bars.len().max(1) as u32 + BOTTOM;
    let mut pixels = vec![255u8; (WIDTH * height * 3) as usize];
    {
        let backend = BitMapBackend::with_buffer(&mut pixels, (WIDTH, height));
        let area = backend.into_drawing_area();
        render(&area, height, title, bars).map_err(|error| format!("cannot draw the chart: {error}"))?;
        area.present().map_err(|error| format!("cannot draw the chart: {error}"))?;
    }
    let file = File::create(path).map_err(|error| format!("cannot create {}: {error}", path.display()))?;
    let mut encoder = png::Encoder::new(BufWriter::new(file), WIDTH, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer =
        encoder.write_header().map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    writer.write_image_data(&pixels).map_err(|error| format!("cannot write {}: {error}", path.display()))
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;
type DrawResult = Result<(), DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>>;

/// Decades shown: from the one below the smallest ratio or goal to the one
/// above the largest, at least 0.1 to 10.
fn decades(bars: &[Bar]) -> (i32, i32) {
    let values = bars.iter().flat_map(|bar| [Some(bar.ratio), bar.goal]).flatten();
    let values: Vec<f64> = values.filter(|value| value.is_finite() && *value > 0.0).collect();
    let low = values.iter().copied().fold(0.1f64, f64::min).log10().floor() as i32;
    let high = values.iter().copied().fold(10.0f64, f64::max).log10().ceil() as i32;
    (low, high.max(low + 1))
}

fn render(area: &Area<'_>, height: u32, title: &str, bars: &[Bar]) -> DrawResult {
    let (low, high) = decades(bars);
    let x_of = |value: f64| -> i32 {
        let fraction = (value.log10() - f64::from(low)) / f64::from(high - low);
        let fraction = fraction.clamp(0.0, 1.0);
        (f64::from(PLOT_LEFT) + fraction * f64::from(PLOT_RIGHT - PLOT_LEFT)).round() as i32
    };
    let plot_top = TOP as i32 - 6;
    let plot_bottom = (height - BOTTOM) as i32 + 6;

    text(area, title, 20, 16, 2, &BLACK)?;
    text(
        area,
        "smarm / peer, log scale: left of 1 smarm is faster. black mark = goal.",
        20,
        40,
        1,
        &RGBColor(80, 80, 80),
    )?;

    // Decade grid with labels under the plot, and the parity line at 1.
    for decade in low..=high {
        let value = 10f64.powi(decade);
        let x = x_of(value);
        let color = if decade == 0 { RGBColor(60, 60, 60) } else { GRID };
        area.draw(&PathElement::new(vec![(x, plot_top), (x, plot_bottom)], color.stroke_width(1)))?;
        let label =
            if decade < 0 { format!("{value:.*}", (-decade) as usize) } else { format!("{value:.0}") };
        let label_x = x - (font::width(&label, LABEL_SCALE) / 2) as i32;
        text(area, &label, label_x, plot_bottom + 8, LABEL_SCALE, &BLACK)?;
    }

    for (index, bar) in bars.iter().enumerate() {
        let top = (TOP + ROW * index as u32) as i32;
        let middle = top + (ROW / 2) as i32;
        text(area, &bar.label, 20, middle - 7, LABEL_SCALE, &BLACK)?;
        let color = match bar.goal {
            Some(goal) if bar.ratio <= goal => MET,
            Some(_) => MISSED,
            None => REPORTED,
        };
        let end = x_of(bar.ratio);
        area.draw(&Rectangle::new(
            [(PLOT_LEFT as i32, top + 4), (end, top + ROW as i32 - 4)],
            color.filled(),
        ))?;
        if let Some(goal) = bar.goal {
            let x = x_of(goal);
            area.draw(&Rectangle::new([(x - 1, top), (x + 1, top + ROW as i32)], BLACK.filled()))?;
        }
        let value = format!("{:.3}", bar.ratio);
        text(area, &value, end.max(PLOT_LEFT as i32) + 6, middle - 7, LABEL_SCALE, &BLACK)?;
    }
    Ok(())
}

/// Draws `label` with its top-left corner at (x, y).
fn text(area: &Area<'_>, label: &str, x: i32, y: i32, scale: u32, color: &RGBColor) -> DrawResult {
    for (dx, dy) in font::pixels(label, scale) {
        area.draw_pixel((x + dx as i32, y + dy as i32), color)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_png() {
        let path = std::env::temp_dir().join(format!("smarm-benches-chart-{}.png", std::process::id()));
        let bars = vec![
            Bar { label: "yield_ping: smarm vs tokio".into(), ratio: 0.42, goal: Some(1.0) },
            Bar { label: "skynet: smarm vs may".into(), ratio: 6.5, goal: Some(1.0) },
            Bar { label: "rq_micro: striped vs mpmc".into(), ratio: 1.7, goal: None },
        ];
        draw(&path, "test chart", &bars).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
    }

    #[test]
    fn decades_cover_every_ratio_and_goal() {
        let bars = vec![Bar { label: String::new(), ratio: 0.004, goal: Some(0.3) }];
        assert_eq!(decades(&bars), (-3, 1));
        let bars = vec![Bar { label: String::new(), ratio: 250.0, goal: None }];
        assert_eq!(decades(&bars), (-1, 3));
    }
}
