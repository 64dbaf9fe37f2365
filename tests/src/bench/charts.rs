//! The report's charts, each as SVG and PNG (plotters; the PNG's text is
//! drawn with DejaVu Sans, embedded, so no system font is needed):
//!
//! - `throughput.{svg,png}`: rate against size over the square GEMMs, one
//!   panel per dtype, one line per contender (cuBLAS beside);
//! - `ladder.{svg,png}`: the architecture ladder at one shape as grouped bars;
//! - `roofline.{svg,png}`: one panel per dtype, every GEMM case's best
//!   warpforge rate and cuBLAS's against arithmetic intensity, under the
//!   ceilings measured in the same run where their sections ran: memory (the
//!   stream section's fastest copy) and compute (the `mma` section's
//!   `mma.sync` and `wgmma` rates for the dtype).

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::report::{Report, WorkUnit, CEILINGS, LADDER};

const SIZE: (u32, u32) = (1200, 800);
const FONT: &str = "sans-serif";

/// Writes every chart into `dir`; returns the files written.
pub fn write_all(report: &Report, dir: &Path, ladder_shape: &str) -> Result<Vec<PathBuf>, String> {
    register_font();
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    // Every chart plots GEMM cases: a run whose sections had none (`--sections
    // launch`, say) gets no empty axes.
    let mut written = Vec::new();
    if report.has_gemm_at(None) {
        written.extend(write(&Throughput(report), dir)?);
        written.extend(write(&Roofline(report), dir)?);
    }
    if report.has_gemm_at(Some(ladder_shape)) {
        written.extend(write(&Ladder(report, ladder_shape), dir)?);
    }
    Ok(written)
}

/// One chart, drawn the same way on either backend.
trait Chart {
    /// The file name, without extension.
    const NAME: &'static str;
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// Writes `chart` as `NAME.svg` and `NAME.png` into `dir`.
fn write<C: Chart>(chart: &C, dir: &Path) -> Result<[PathBuf; 2], String> {
    let svg = dir.join(format!("{}.svg", C::NAME));
    let png = dir.join(format!("{}.png", C::NAME));
    chart.draw(&SVGBackend::new(&svg, SIZE).into_drawing_area())?;
    chart.draw(&BitMapBackend::new(&png, SIZE).into_drawing_area())?;
    Ok([svg, png])
}

/// A drawing error as text (the backends' error types differ).
fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The embedded font is valid TrueType; a failure would leave text undrawn.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

/// A colour per contender name, stable across charts.
fn colour(name: &str) -> RGBColor {
    match LADDER.iter().position(|n| *n == name) {
        Some(0) => RGBColor(0x8c, 0x56, 0x4b),
        Some(1) => RGBColor(0x1f, 0x77, 0xb4),
        Some(2) => RGBColor(0x2c, 0xa0, 0x2c),
        Some(3) => RGBColor(0x30, 0x30, 0x30),
        _ if name == "warpforge tuned" => RGBColor(0xff, 0x7f, 0x0e),
        _ => RGBColor(0xd6, 0x27, 0x28),
    }
}

/// The GEMM dtypes of the report, in order of first appearance.
fn gemm_dtypes(report: &Report) -> Vec<String> {
    let mut dtypes: Vec<String> = Vec::new();
    for case in report.cases.iter().filter(|c| c.section == "gemm") {
        if !dtypes.contains(&case.dtype) {
            dtypes.push(case.dtype.clone());
        }
    }
    dtypes
}

/// Per contender, (size, rate) over the square GEMMs of `dtype`.
fn square_series(report: &Report, dtype: &str) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for case in &report.cases {
        let Some((m, n, k)) = case.dims else { continue };
        if case.section != "gemm" || case.dtype != dtype || m != n || n != k {
            continue;
        }
        for c in case.summary() {
            let point = (f64::from(m), c.rate);
            match series.iter_mut().find(|(name, _)| *name == c.name) {
                Some((_, points)) => points.push(point),
                None => series.push((c.name.clone(), vec![point])),
            }
        }
    }
    for (_, points) in &mut series {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

struct Throughput<'a>(&'a Report);

impl Chart for Throughput<'_> {
    const NAME: &'static str = "throughput";
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let report = self.0;
        root.fill(&WHITE).map_err(err)?;
        let dtypes = gemm_dtypes(report);
        let columns = 2.min(dtypes.len().max(1));
        let rows = dtypes.len().div_ceil(columns).max(1);
        for (area, dtype) in root.split_evenly((rows, columns)).iter().zip(&dtypes) {
            let series = square_series(report, dtype);
            let max_rate = series
                .iter()
                .flat_map(|(_, p)| p.iter().map(|q| q.1))
                .fold(1.0, f64::max);
            let (lo, hi) = series
                .iter()
                .flat_map(|(_, p)| p.iter().map(|q| q.0))
                .fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
                    (lo.min(x), hi.max(x))
                });
            if !lo.is_finite() {
                continue;
            }
            let unit = if dtype == "s8" { "TOP/s" } else { "TFLOP/s" };
            // The legend beside the plot, not on it: every line crosses the
            // plot's height somewhere, and a legend on it hid the sm_80 line
            // of the tf32 and s8 panels.
            let (plot, legend) = area.split_horizontally(area.dim_in_pixel().0 * 3 / 4);
            {
                let mut chart = ChartBuilder::on(&plot)
                    .caption(format!("{dtype} GEMM, m = n = k"), (FONT, 22))
                    .margin(12)
                    .x_label_area_size(40)
                    .y_label_area_size(60)
                    // x is log2 of the size, labelled with the size.
                    .build_cartesian_2d(lo.log2() - 0.3..hi.log2() + 0.3, 0.0..max_rate * 1.1)
                    .map_err(err)?;
                chart
                    .configure_mesh()
                    .x_desc("size")
                    .y_desc(unit)
                    .label_style((FONT, 14))
                    .x_labels((hi.log2() - lo.log2()) as usize + 2)
                    .x_label_formatter(&|x| {
                        if (x - x.round()).abs() < 1e-6 {
                            format!("{:.0}", x.round().exp2())
                        } else {
                            String::new()
                        }
                    })
                    .max_light_lines(0)
                    .draw()
                    .map_err(err)?;
                for (name, points) in &series {
                    let c = colour(name);
                    let points: Vec<(f64, f64)> =
                        points.iter().map(|&(x, y)| (x.log2(), y)).collect();
                    chart
                        .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))
                        .map_err(err)?;
                    chart
                        .draw_series(points.iter().map(|&p| Circle::new(p, 3, c.filled())))
                        .map_err(err)?;
                }
            }
            for (row, (name, _)) in series.iter().enumerate() {
                let (c, y) = (colour(name), 50 + 22 * row as i32);
                legend
                    .draw(&PathElement::new(vec![(4, y), (24, y)], c.stroke_width(2)))
                    .map_err(err)?;
                legend
                    .draw(&Text::new(name.clone(), (30, y - 8), (FONT, 14)))
                    .map_err(err)?;
            }
        }
        root.present().map_err(err)
    }
}

struct Ladder<'a>(&'a Report, &'a str);

impl Chart for Ladder<'_> {
    const NAME: &'static str = "ladder";
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let (report, shape) = (self.0, self.1);
        root.fill(&WHITE).map_err(err)?;
        let cases: Vec<_> = report
            .cases
            .iter()
            .filter(|c| c.section == "gemm" && c.shape == shape)
            .collect();
        let max_rate = cases
            .iter()
            .flat_map(|c| c.summary().into_iter().map(|s| s.rate))
            .fold(1.0, f64::max);
        let groups = cases.len().max(1) as f64;
        let width = 1.0 / (LADDER.len() as f64 + 1.0);
        {
            let mut chart = ChartBuilder::on(root)
                .caption(
                    format!("The architecture ladder, GEMM {shape} (TOP/s for s8)"),
                    (FONT, 24),
                )
                .margin(16)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..groups, 0.0..max_rate * 1.15)
                .map_err(err)?;
            let labels: Vec<String> = cases.iter().map(|c| c.dtype.clone()).collect();
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(cases.len().max(1) * 2 + 1)
                .x_label_formatter(&|x| {
                    let i = x.floor() as usize;
                    if (x - i as f64 - 0.5).abs() < 0.26 {
                        labels.get(i).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .y_desc("TFLOP/s")
                .label_style((FONT, 14))
                .draw()
                .map_err(err)?;
            for (slot, name) in LADDER.iter().enumerate() {
                let c = colour(name);
                let bars: Vec<_> = cases
                    .iter()
                    .enumerate()
                    .filter_map(|(group, case)| {
                        let rate = case.contender(name)?.rate;
                        let x0 = group as f64 + width * (slot as f64 + 0.5);
                        Some(Rectangle::new([(x0, 0.0), (x0 + width, rate)], c.filled()))
                    })
                    .collect();
                chart
                    .draw_series(bars)
                    .map_err(err)?
                    .label(name.to_string())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled())
                    });
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .label_font((FONT, 16))
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(err)?;
        }
        root.present().map_err(err)
    }
}

/// Bytes a GEMM moves at least once: A, B and C, at the dtype's sizes
/// (`bench`'s outputs: s8 to i32, e4m3 to bf16, the rest their own type).
fn gemm_bytes(dtype: &str, (m, n, k): (u32, u32, u32)) -> f64 {
    let (input, output) = match dtype {
        "s8" => (1.0, 4.0),
        "e4m3" => (1.0, 2.0),
        "f16" | "bf16" => (2.0, 2.0),
        _ => (4.0, 4.0),
    };
    let (m, n, k) = (f64::from(m), f64::from(n), f64::from(k));
    input * (m * k + n * k) + output * m * n
}

/// A compute ceiling of the roofline: its label, its rate and its colour.
struct Ceiling {
    label: String,
    rate: f64,
    colour: RGBColor,
}

/// The compute ceilings of `dtype`: the rates its Tensor Core instructions
/// ([`CEILINGS`]) reached in the run's `mma` section.
fn compute_ceilings(report: &Report, dtype: &str) -> Vec<Ceiling> {
    report
        .cases
        .iter()
        .filter(|c| c.section == "mma" && c.dtype == dtype)
        .flat_map(|c| c.summary())
        .filter_map(|s| {
            let slot = CEILINGS.iter().position(|n| *n == s.name)?;
            Some(Ceiling {
                label: format!("{} ceiling: {:.0}", s.name, s.rate),
                rate: s.rate,
                colour: CEILING_COLOURS[slot],
            })
        })
        .collect()
}

struct Roofline<'a>(&'a Report);

impl Chart for Roofline<'_> {
    const NAME: &'static str = "roofline";
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let report = self.0;
        root.fill(&WHITE).map_err(err)?;
        // The memory ceiling: the fastest byte-moving contender of the run.
        let bandwidth_gbs = report
            .cases
            .iter()
            .filter(|c| c.work_unit == WorkUnit::Bytes)
            .flat_map(|c| c.summary().into_iter().map(|s| s.rate))
            .reduce(f64::max);
        let dtypes = gemm_dtypes(report);
        let columns = 2.min(dtypes.len().max(1));
        let rows = dtypes.len().div_ceil(columns).max(1);
        for (area, dtype) in root.split_evenly((rows, columns)).iter().zip(&dtypes) {
            roofline_panel(report, dtype, bandwidth_gbs, area)?;
        }
        root.present().map_err(err)
    }
}

/// One dtype's roofline: per GEMM case its best warpforge rate and the
/// baseline's against arithmetic intensity, under the memory ceiling and
/// the dtype's compute ceilings, all measured in the same run.
fn roofline_panel<DB: DrawingBackend>(
    report: &Report,
    dtype: &str,
    bandwidth_gbs: Option<f64>,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for case in report
        .cases
        .iter()
        .filter(|c| c.section == "gemm" && c.dtype == dtype)
    {
        let Some(dims) = case.dims else { continue };
        let intensity = case.work / gemm_bytes(&case.dtype, dims);
        let summary = case.summary();
        let (baseline, others): (Vec<_>, Vec<_>) = summary.iter().partition(|s| s.baseline);
        if let Some(best) = others.iter().map(|s| s.rate).reduce(f64::max) {
            ours.push((intensity, best));
        }
        theirs.extend(baseline.iter().map(|s| (intensity, s.rate)));
    }
    let ceilings = compute_ceilings(report, dtype);
    let (x_lo, x_hi, y_lo, y_hi) = ours.iter().chain(&theirs).fold(
        (f64::INFINITY, 1.0f64, f64::INFINITY, 1.0f64),
        |(lo, hi, y_lo, y_hi), p| (lo.min(p.0), hi.max(p.0), y_lo.min(p.1), y_hi.max(p.1)),
    );
    let y_hi = ceilings.iter().map(|c| c.rate).fold(y_hi, f64::max);
    let x_lo = if x_lo.is_finite() { x_lo * 0.5 } else { 1.0 };
    // Room below the points for the legend.
    let y_lo = if y_lo.is_finite() { y_lo / 100.0 } else { 0.5 };
    let (x_end, y_top) = (x_hi * 2.0, y_hi * 2.0);
    let unit = if dtype == "s8" { "TOP/s" } else { "TFLOP/s" };
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{dtype} GEMM roofline"), (FONT, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((x_lo..x_end).log_scale(), (y_lo..y_top).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("operations per byte of A, B and C")
        .y_desc(unit)
        .label_style((FONT, 13))
        .max_light_lines(1)
        .draw()
        .map_err(err)?;
    if let Some(gbs) = bandwidth_gbs {
        // Points along the ceiling inside the plotted range only: a line to
        // a point outside it would be clipped to the wrong slope.
        let line: Vec<(f64, f64)> = (0..=64)
            .map(|i| x_lo * (x_end / x_lo).powf(f64::from(i) / 64.0))
            .map(|x| (x, gbs * x / 1e3))
            .filter(|&(_, y)| y <= y_top)
            .collect();
        chart
            .draw_series(LineSeries::new(line, BLACK.stroke_width(1)))
            .map_err(err)?
            .label(format!("memory ceiling: {gbs:.0} GB/s measured"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
    }
    for ceiling in &ceilings {
        let c = ceiling.colour;
        // From where the memory ceiling meets it: the roof is the lower one.
        let start = bandwidth_gbs.map_or(x_lo, |gbs| (ceiling.rate * 1e3 / gbs).max(x_lo));
        chart
            .draw_series(DashedLineSeries::new(
                [(start, ceiling.rate), (x_end, ceiling.rate)],
                6,
                4,
                c.stroke_width(2),
            ))
            .map_err(err)?
            .label(format!("{} {unit} measured", ceiling.label))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
    }
    let ours_colour = colour("warpforge");
    chart
        .draw_series(
            ours.iter()
                .map(|&p| Circle::new(p, 4, ours_colour.filled())),
        )
        .map_err(err)?
        .label("warpforge, best path")
        .legend(move |(x, y)| Circle::new((x + 8, y), 4, ours_colour.filled()));
    let theirs_colour = colour("cuBLAS");
    chart
        .draw_series(
            theirs
                .iter()
                .map(|&p| Cross::new(p, 5, theirs_colour.stroke_width(2))),
        )
        .map_err(err)?
        .label("baseline (cuBLAS)")
        .legend(move |(x, y)| Cross::new((x + 8, y), 5, theirs_colour.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.6))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// The compute ceilings' colours, in [`CEILINGS`]' order.
const CEILING_COLOURS: [RGBColor; 2] = [RGBColor(0x94, 0x67, 0xbd), RGBColor(0x17, 0xbe, 0xcf)];
