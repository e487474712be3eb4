//! Times the trace commitment on every backend present over a sweep of shapes, and writes a
//! table, a JSON file and an SVG plot of time against rows.
//!
//! ```text
//! cargo run --release --example bench_commit -- --quick
//! cargo run --release --features cuda --example bench_commit -- --log-rows 16,18,20 --cols 8,73
//! ```
//!
//! Each point is the median of `--runs` runs, after one warm-up run on GPU backends, on random
//! (never zero) columns; ratios are against the CPU backend on the same machine in the same run.

#[path = "support/mod.rs"]
mod support;

use std::{fs, path::PathBuf, time::Instant};

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use miden_gpu::{Backend, Felt, HashFunction};
use plotters::prelude::*;
use serde::Serialize;

#[derive(Parser)]
#[command(about = "Trace-commitment timings of every backend present")]
struct Args {
    /// Small sweep for machines without a GPU (rows 2^10 and 2^12, 8 and 73 columns).
    #[arg(long)]
    quick: bool,
    /// log2 of the trace lengths [default: 16,18,20,22; --quick: 10,12].
    #[arg(long, value_delimiter = ',')]
    log_rows: Option<Vec<u32>>,
    /// Column counts [default: 8,73,200; --quick: 8,73].
    #[arg(long, value_delimiter = ',')]
    cols: Option<Vec<usize>>,
    /// Hash functions: rpo, rpx.
    #[arg(long, value_delimiter = ',', default_value = "rpo,rpx")]
    hash: Vec<String>,
    /// LDE blowup.
    #[arg(long, default_value_t = 8)]
    blowup: usize,
    /// Timed runs per point (the median is reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Points whose first timed run takes longer than this many seconds are timed once.
    #[arg(long, default_value_t = 20.0)]
    single_run_above: f64,
    /// Skip shapes whose LDE alone exceeds this many GiB.
    #[arg(long, default_value_t = 16.0)]
    max_lde_gib: f64,
    /// Backends to time [default: every backend present].
    #[arg(long, value_delimiter = ',')]
    backends: Option<Vec<String>>,
    /// Output folder for results.json and time_vs_rows.svg.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
}

/// One measured point.
#[derive(Serialize, Clone)]
struct Point {
    backend: String,
    device: String,
    hash: String,
    log_rows: u32,
    cols: usize,
    blowup: usize,
    median_s: f64,
    runs: usize,
    ratio_vs_cpu: Option<f64>,
    lde_rows_per_s: f64,
    permutations_per_s: f64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let log_rows = args.log_rows.clone().unwrap_or(if args.quick { vec![10, 12] } else { vec![16, 18, 20, 22] });
    let cols = args.cols.clone().unwrap_or(if args.quick { vec![8, 73] } else { vec![8, 73, 200] });
    let hashes: Vec<HashFunction> = args.hash.iter().map(|h| h.parse()).collect::<Result<_, _>>()?;
    let wanted: Option<Vec<Backend>> = args
        .backends
        .as_ref()
        .map(|names| names.iter().map(|n| n.parse()).collect::<Result<_, _>>())
        .transpose()?;
    let committers = support::available_backends(wanted.as_deref());

    let mut shapes = Vec::new();
    for &r in &log_rows {
        for &c in &cols {
            shapes.extend(hashes.iter().map(|&h| (r, c, h)));
        }
    }
    let shapes: Vec<(u32, usize, HashFunction)> = shapes
        .into_iter()
        .filter(|&(r, c, _)| {
            let gib = ((1usize << r) * args.blowup * c.div_ceil(8) * 8 * 8) as f64 / (1u64 << 30) as f64;
            let fits = gib <= args.max_lde_gib;
            if !fits {
                eprintln!("skipping 2^{r} rows x {c} columns: LDE of {gib:.1} GiB > --max-lde-gib");
            }
            fits
        })
        .collect();

    fs::create_dir_all(&args.out)?;
    let json = args.out.join("results.json");
    println!("{}", table_header());
    let progress = ProgressBar::new((shapes.len() * committers.len()) as u64);
    progress.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")?);
    let mut points = Vec::new();
    for &(log_rows, cols, hash) in &shapes {
        let columns = support::random_columns(u64::from(log_rows) * 1000 + cols as u64, cols, 1 << log_rows);
        let slices: Vec<&[Felt]> = columns.iter().map(Vec::as_slice).collect();
        let request = support::trace_request(&slices, args.blowup, hash);
        let mut cpu_time = None;
        for committer in &committers {
            progress.set_message(format!("{} 2^{log_rows}x{cols} {hash}", committer.backend()));
            // A GPU backend's first call compiles kernels and grows device buffers; the CPU
            // backend keeps nothing between calls, so it needs no warm-up.
            if committer.backend() != Backend::Cpu {
                committer.commit(&request)?;
            }
            let mut times = Vec::new();
            while times.len() < args.runs {
                let start = Instant::now();
                let commitment = committer.commit(&request)?;
                times.push(start.elapsed().as_secs_f64());
                // freeing gigabytes of LDE rows is the caller's cost, not the commitment's
                drop(commitment);
                if times[0] > args.single_run_above {
                    break;
                }
            }
            times.sort_by(f64::total_cmp);
            let median = times[times.len() / 2];
            if committer.backend() == Backend::Cpu {
                cpu_time = Some(median);
            }
            let lde_rows = (1usize << log_rows) * args.blowup;
            points.push(Point {
                backend: committer.backend().to_string(),
                device: committer.device_name(),
                hash: hash.to_string(),
                log_rows,
                cols,
                blowup: args.blowup,
                median_s: median,
                runs: times.len(),
                ratio_vs_cpu: cpu_time.map(|cpu| cpu / median),
                lde_rows_per_s: lde_rows as f64 / median,
                permutations_per_s: support::permutations(lde_rows, cols) as f64 / median,
            });
            // each point is printed and saved as soon as it is measured, so a run cut short
            // keeps what it measured
            progress.println(table_row(points.last().expect("just pushed")));
            fs::write(&json, serde_json::to_string_pretty(&points)?)?;
            progress.inc(1);
        }
    }
    progress.finish_and_clear();

    println!("\n{}", table_header());
    for p in &points {
        println!("{}", table_row(p));
    }
    let svg = args.out.join("time_vs_rows.svg");
    plot(&points, &svg)?;
    println!("\nwrote {} and {}", json.display(), svg.display());
    Ok(())
}

fn table_header() -> String {
    format!(
        "{:<6} {:<28} {:<4} {:>10} {:>6} {:>11} {:>9} {:>12} {:>12}",
        "backend", "device", "hash", "rows", "cols", "time", "vs cpu", "LDE rows/s", "perms/s"
    )
}

fn table_row(p: &Point) -> String {
    let device: String = p.device.chars().take(28).collect();
    format!(
        "{:<6} {:<28} {:<4} {:>10} {:>6} {:>9.4} s {:>8} {:>12.3e} {:>12.3e}",
        p.backend,
        device,
        p.hash,
        format!("2^{}", p.log_rows),
        p.cols,
        p.median_s,
        p.ratio_vs_cpu.map_or("-".into(), |r| format!("{r:.1}x")),
        p.lde_rows_per_s,
        p.permutations_per_s
    )
}

/// Log-log plot of median time against trace rows, one line per backend, column count and hash.
fn plot(points: &[Point], path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (960, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let min_rows = points.iter().map(|p| p.log_rows).min().unwrap_or(10);
    let max_rows = points.iter().map(|p| p.log_rows).max().unwrap_or(12);
    let min_t = points.iter().map(|p| p.median_s).fold(f64::INFINITY, f64::min).max(1e-6);
    let max_t = points.iter().map(|p| p.median_s).fold(0.0, f64::max).max(min_t * 10.0);
    let mut chart = ChartBuilder::on(&root)
        .caption("Trace commitment: median time vs trace rows", ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (min_rows as f64 - 0.5)..(max_rows as f64 + 0.5),
            (min_t / 2.0..max_t * 2.0).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("log2(trace rows)")
        .y_desc("seconds")
        .draw()?;
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for p in points {
        let name = format!("{} {} cols {}", p.backend, p.cols, p.hash);
        match series.iter_mut().find(|(n, _)| *n == name) {
            Some((_, s)) => s.push((p.log_rows as f64, p.median_s)),
            None => series.push((name, vec![(p.log_rows as f64, p.median_s)])),
        }
    }
    for (i, (name, data)) in series.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(data.clone(), color.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(data.into_iter().map(|xy| Circle::new(xy, 3, color.filled())))?;
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}
