//! Times the trace commitment on every backend present over a sweep of shapes, and writes a
//! table, a JSON file and an SVG plot of time against rows.
//!
//! ```text
//! cargo run --release --example bench_commit -- --quick
//! cargo run --release --features cuda --example bench_commit -- --log-rows 16,18,20 --cols 8,73
//! cargo run --release --features cuda --example bench_commit -- \
//!     --log-rows 20 --cols 73 --hash rpo --backends cpu,cuda --runs 5 --stages
//! cargo run --release --features cuda --example bench_commit -- \
//!     --log-rows 20 --cols 73 --hash rpo --skip-cpu --devices '0;0,1' --runs 7
//! ```
//!
//! Each point is the median of `--runs` runs, after one warm-up run on GPU backends, on random
//! (never zero) columns. Where the CPU backend ran (it runs first; `--skip-cpu` leaves it out),
//! ratios are against it on the same machine in the same run, and every GPU result is compared
//! with its result: polynomials, LDE rows, leaves and tree must be identical.
//!
//! GPU backends also report the device time of each stage of the median run (CUDA: events on
//! each GPU's stream; wgpu: timestamp queries, where the adapter has them) and the kernel rates
//! they give: hash and tree permutations/s, LDE and interpolation elements/s. `--stages` prints
//! them under each point; the JSON always has them. `--devices` times CUDA on several GPU sets
//! in one run (all stay open for the whole run), and each set against the first.
//! `RUST_LOG=miden_gpu=info` adds the backends' log lines and each of their spans with its time.

miden_gpu::use_jemalloc!();

#[path = "support/mod.rs"]
mod support;

use std::{error::Error, fs, path::PathBuf, str::FromStr, time::Instant};

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use miden_gpu::{Backend, CommitRequest, Commitment, Felt, GpuError, HashFunction};
use plotters::prelude::*;
use serde::Serialize;
use support::{
    device_times::{DeviceTimes, GpuStages},
    targets::{self, Target},
    Workload,
};
use tracing_subscriber::{fmt::format::FmtSpan, EnvFilter};

// ARGUMENTS
// ================================================================================================

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
    /// Hash functions: rpo, rpx, poseidon2, blake3-192, blake3-256.
    #[arg(long, value_delimiter = ',', default_value = "rpo,rpx")]
    hash: Vec<HashFunction>,
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
    /// Backends to time: cpu, wgpu, cuda [default: every backend present].
    #[arg(long, value_delimiter = ',')]
    backends: Option<Vec<Backend>>,
    /// Leave the CPU backend out: no ratios against it, no comparison of results.
    #[arg(long)]
    skip_cpu: bool,
    /// CUDA GPU sets to time one after the other: `;` between sets, `,` between CUDA ordinals
    /// (`'0;0,1'`: GPU 0 alone, then GPUs 0 and 1) [default: MIDEN_GPU_DEVICES, else every GPU].
    #[arg(long, value_delimiter = ';')]
    devices: Vec<GpuSet>,
    /// Print the device time of each stage and the kernel rates of every GPU point.
    #[arg(long)]
    stages: bool,
    /// GiB of host memory the CUDA committers keep registered for LDE rows and trees, written
    /// by the GPUs directly from the second commitment of a size on
    /// (`CudaOptions::pinned_rows_bytes`; 0: results through pinned slots).
    #[arg(long, default_value_t = 0)]
    pinned_rows_gib: u64,
    /// The CUDA hashing kernels' minimum resident blocks per SM, 1 to 16
    /// (`CudaOptions::hash_min_blocks`) [default: the kernels' own].
    #[arg(long)]
    hash_min_blocks: Option<u32>,
    /// Output folder for results.json and time_vs_rows.svg.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
}

/// CUDA ordinals of one GPU set (`0,1`).
#[derive(Clone)]
struct GpuSet(Vec<usize>);

impl FromStr for GpuSet {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        text.split(',')
            .map(|ordinal| ordinal.trim().parse().map_err(|_| format!("`{ordinal}` is not a GPU")))
            .collect::<Result<_, _>>()
            .map(GpuSet)
    }
}

impl Args {
    /// The backends to time.
    fn backends(&self) -> Result<Vec<Backend>, String> {
        let mut backends = self.backends.clone().unwrap_or(support::ALL_BACKENDS.to_vec());
        if self.skip_cpu {
            backends.retain(|&b| b != Backend::Cpu);
        }
        if !self.devices.is_empty() && !backends.contains(&Backend::Cuda) {
            return Err("--devices chooses CUDA GPUs, but cuda is not among the backends".into());
        }
        Ok(backends)
    }

    /// Every shape of the sweep whose LDE fits `--max-lde-gib`.
    fn workloads(&self) -> Vec<Workload> {
        let (rows, cols) = if self.quick {
            (vec![10, 12], vec![8, 73])
        } else {
            (vec![16, 18, 20, 22], vec![8, 73, 200])
        };
        let mut workloads = Vec::new();
        for &log_rows in self.log_rows.as_ref().unwrap_or(&rows) {
            for &cols in self.cols.as_ref().unwrap_or(&cols) {
                for &hash in &self.hash {
                    workloads.push(Workload { log_rows, cols, blowup: self.blowup, hash });
                }
            }
        }
        workloads.retain(|w| {
            let fits = w.lde_gib() <= self.max_lde_gib;
            if !fits {
                eprintln!(
                    "skipping 2^{} rows x {} columns: LDE of {:.1} GiB > --max-lde-gib",
                    w.log_rows,
                    w.cols,
                    w.lde_gib()
                );
            }
            fits
        });
        workloads
    }
}

// MAIN
// ================================================================================================

/// One measured point.
#[derive(Serialize)]
struct Point {
    backend: String,
    /// The backend, with the GPU set where `--devices` chose one (`cuda:0,1`).
    label: String,
    device: String,
    hash: String,
    log_rows: u32,
    cols: usize,
    blowup: usize,
    median_s: f64,
    runs: usize,
    /// Every timed run, in order.
    times_s: Vec<f64>,
    /// The untimed first commitment of a GPU backend (kernel loading, allocations, tables).
    warmup_s: Option<f64>,
    /// Opening the device and building the kernels, once before the sweep.
    startup_s: f64,
    ratio_vs_cpu: Option<f64>,
    /// Speedup over the first GPU set of `--devices` (CUDA on chosen sets).
    ratio_vs_first_set: Option<f64>,
    /// Whether the result is identical to the CPU backend's (GPU backends, where it ran).
    matches_cpu: Option<bool>,
    /// Where it differs from the CPU backend's, when it does.
    difference: Option<Difference>,
    lde_rows_per_s: f64,
    permutations_per_s: f64,
    /// Device times of the median run's stages and the kernel rates they give, per GPU.
    stages: Vec<GpuStages>,
}

fn main() -> Result<(), Box<dyn Error>> {
    #[cfg(feature = "wgpu")]
    miden_gpu::wgpu::prepare_headless_vulkan();
    let args = Args::parse();
    let log_filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    // a line per closed span, with its time, so RUST_LOG shows where a commitment spends it
    tracing_subscriber::fmt()
        .with_env_filter(log_filter)
        .with_span_events(FmtSpan::CLOSE)
        .with_writer(std::io::stderr)
        .init();

    let workloads = args.workloads();
    let gpu_sets: Vec<Vec<usize>> = args.devices.iter().map(|set| set.0.clone()).collect();
    let cuda = targets::CudaTuning {
        pinned_rows: args.pinned_rows_gib << 30,
        hash_min_blocks: args.hash_min_blocks,
    };
    let targets = targets::targets(&args.backends()?, &gpu_sets, &cuda);
    if targets.is_empty() {
        return Err("no backend to time".into());
    }
    for target in &targets {
        let startup = target.startup.as_secs_f64();
        println!("{}: {} (opened in {startup:.2} s)", target.label, target.device_name);
    }

    fs::create_dir_all(&args.out)?;
    let json = args.out.join("results.json");
    println!("\n{}", table_header());
    let progress = ProgressBar::new((workloads.len() * targets.len()) as u64);
    progress.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")?);
    let mut points: Vec<Point> = Vec::new();
    for workload in &workloads {
        let columns = workload.columns();
        let slices: Vec<&[Felt]> = columns.iter().map(Vec::as_slice).collect();
        let request = support::trace_request(&slices, workload.blowup, workload.hash);
        // the CPU backend's median and result, and the first GPU set's median, once they ran
        let mut cpu: Option<(f64, Commitment)> = None;
        let mut first_set_s: Option<f64> = None;
        for target in &targets {
            let Workload { log_rows, cols, hash, .. } = *workload;
            progress.set_message(format!("{} 2^{log_rows}x{cols} {hash}", target.label));
            // GPU sets are timed one at a time, each with no other committer open on its GPUs
            if gpu_sets.len() > 1 && target.gpu_set.is_some() {
                targets.iter().filter(|t| t.gpu_set.is_some()).for_each(Target::close);
            }
            let run = measure(target, &request, &args)?;
            let difference = cpu.as_ref().map(|(_, cpu)| Difference::between(&run.result, cpu));
            let backend = target.backend;
            if target.gpu_set.is_some() {
                first_set_s.get_or_insert(run.median_s);
            }
            let point = Point {
                backend: backend.to_string(),
                label: target.label.clone(),
                device: target.device_name.clone(),
                hash: hash.to_string(),
                log_rows,
                cols,
                blowup: workload.blowup,
                median_s: run.median_s,
                runs: run.times_s.len(),
                times_s: run.times_s,
                warmup_s: run.warmup_s,
                startup_s: target.startup.as_secs_f64(),
                // the CPU backend runs first: `cpu` is `None` while it runs
                ratio_vs_cpu: match &cpu {
                    Some((cpu_s, _)) => Some(cpu_s / run.median_s),
                    None => (backend == Backend::Cpu).then_some(1.0),
                },
                ratio_vs_first_set: target
                    .gpu_set
                    .as_ref()
                    .and(first_set_s)
                    .map(|s| s / run.median_s),
                matches_cpu: difference.as_ref().map(Option::is_none),
                difference: difference.flatten(),
                lde_rows_per_s: workload.lde_rows() as f64 / run.median_s,
                permutations_per_s: workload.permutations() as f64 / run.median_s,
                stages: GpuStages::of(run.device_times, workload),
            };
            if backend == Backend::Cpu {
                cpu = Some((run.median_s, run.result));
            }
            // each point is printed (through the progress bar on a terminal) and saved as soon as
            // it is measured, so a run cut short keeps what it measured
            let lines = point_lines(&point, args.stages);
            if progress.is_hidden() {
                println!("{lines}");
            } else {
                progress.println(lines);
            }
            points.push(point);
            fs::write(&json, serde_json::to_string_pretty(&points)?)?;
            progress.inc(1);
        }
    }
    progress.finish_and_clear();

    println!("\n{}", table_header());
    for point in &points {
        println!("{}", point_lines(point, args.stages));
    }
    let svg = args.out.join("time_vs_rows.svg");
    plot(&points, &svg)?;
    println!("\nwrote {} and {}", json.display(), svg.display());
    let differing = points.iter().filter(|p| p.matches_cpu == Some(false)).count();
    if differing > 0 {
        return Err(format!("{differing} results differ from the CPU backend's").into());
    }
    Ok(())
}

// MEASUREMENT
// ================================================================================================

/// The timed runs of one target on one workload.
struct Run {
    /// Every timed run, in order.
    times_s: Vec<f64>,
    median_s: f64,
    /// The warm-up commitment (GPU backends).
    warmup_s: Option<f64>,
    /// Device times of the median run, per GPU.
    device_times: Vec<DeviceTimes>,
    /// The last run's commitment.
    result: Commitment,
}

/// Commits `request` on `target` `--runs` times (once if the first run takes longer than
/// `--single-run-above`), after one untimed commitment on GPU backends.
fn measure(target: &Target, request: &CommitRequest<'_>, args: &Args) -> Result<Run, GpuError> {
    let committer = target.committer()?;
    // A GPU backend's first call loads kernels and grows device buffers; the CPU backend keeps
    // nothing between calls, so it needs no warm-up.
    let warmup_s = if committer.backend() == Backend::Cpu {
        None
    } else {
        let start = Instant::now();
        let first = committer.commit(request)?;
        let warmup_s = start.elapsed().as_secs_f64();
        drop(first);
        Some(warmup_s)
    };
    let mut times_s = Vec::new();
    let mut device_times = Vec::new();
    let mut result = None;
    while times_s.len() < args.runs.max(1) {
        // freeing gigabytes of LDE rows is the caller's cost, not the commitment's
        drop(result.take());
        let start = Instant::now();
        result = Some(committer.commit(request)?);
        times_s.push(start.elapsed().as_secs_f64());
        device_times.push(target.device_times());
        if times_s[0] > args.single_run_above {
            break;
        }
    }
    let mut order: Vec<usize> = (0..times_s.len()).collect();
    order.sort_by(|&a, &b| times_s[a].total_cmp(&times_s[b]));
    let median = order[order.len() / 2];
    Ok(Run {
        median_s: times_s[median],
        device_times: device_times.swap_remove(median),
        times_s,
        warmup_s,
        result: result.expect("at least one run"),
    })
}

/// Where a GPU commitment differs from the CPU backend's (`nodes[0]` is unused): the first
/// differing polynomial, LDE row, leaf and node, and the differing leaves' rows (a few), so that
/// a difference can be reproduced from the saved JSON.
#[derive(Serialize)]
struct Difference {
    first_poly: Option<usize>,
    first_lde_row: Option<usize>,
    differing_leaves: usize,
    first_node: Option<usize>,
    /// Up to four differing leaves: the row (canonical values), the GPU's and the CPU's leaf.
    leaves: Vec<LeafDifference>,
}

#[derive(Serialize)]
struct LeafDifference {
    index: usize,
    row: Vec<u64>,
    gpu: [u64; 4],
    cpu: [u64; 4],
}

impl Difference {
    /// `None` when the commitments are identical: polynomials, LDE rows, leaves and tree.
    fn between(gpu: &Commitment, cpu: &Commitment) -> Option<Self> {
        let first = |a: usize, differ: &dyn Fn(usize) -> bool| (0..a).find(|&i| differ(i));
        let rows = gpu.lde.num_rows().min(cpu.lde.num_rows());
        let leaves: Vec<usize> = (0..gpu.leaves.len().min(cpu.leaves.len()))
            .filter(|&i| gpu.leaves[i] != cpu.leaves[i])
            .collect();
        let difference = Self {
            first_poly: first(gpu.polys.len(), &|i| cpu.polys.get(i) != Some(&gpu.polys[i])),
            first_lde_row: first(rows, &|i| gpu.lde.row(i) != cpu.lde.row(i)),
            differing_leaves: leaves.len(),
            first_node: first(gpu.nodes.len().min(cpu.nodes.len()), &|i| {
                i > 0 && gpu.nodes[i] != cpu.nodes[i]
            }),
            leaves: leaves
                .iter()
                .take(4)
                .map(|&index| LeafDifference {
                    index,
                    row: cpu.lde.row(index).iter().map(|v| v.as_int()).collect(),
                    gpu: gpu.leaves[index].words(),
                    cpu: cpu.leaves[index].words(),
                })
                .collect(),
        };
        let same_shape = gpu.polys.len() == cpu.polys.len()
            && gpu.lde.num_rows() == cpu.lde.num_rows()
            && gpu.leaves.len() == cpu.leaves.len()
            && gpu.nodes.len() == cpu.nodes.len();
        let differs = !same_shape
            || difference.first_poly.is_some()
            || difference.first_lde_row.is_some()
            || difference.differing_leaves > 0
            || difference.first_node.is_some();
        differs.then_some(difference)
    }

    fn describe(&self) -> String {
        let at = |what: &str, i: Option<usize>| i.map(|i| format!(", {what} from {i}"));
        format!(
            "differs: {} leaves{}{}{}{}",
            self.differing_leaves,
            at("polynomials", self.first_poly).unwrap_or_default(),
            at("LDE rows", self.first_lde_row).unwrap_or_default(),
            self.leaves.first().map(|l| format!(", first leaf {}", l.index)).unwrap_or_default(),
            at("nodes", self.first_node).unwrap_or_default(),
        )
    }
}

// OUTPUT
// ================================================================================================

fn table_header() -> String {
    format!(
        "{:<10} {:<28} {:<4} {:>6} {:>5} {:>10} {:>8} {:>8} {:>6} {:>10} {:>10}",
        "backend",
        "device",
        "hash",
        "rows",
        "cols",
        "time",
        "vs cpu",
        "vs set1",
        "result",
        "LDE rows/s",
        "perms/s"
    )
}

/// The point's table row, and with `stages` its GPUs' stage times and kernel rates.
fn point_lines(p: &Point, stages: bool) -> String {
    let device: String = p.device.chars().take(28).collect();
    let ratio = |r: Option<f64>| r.map_or("-".into(), |r| format!("{r:.2}x"));
    let result = match p.matches_cpu {
        Some(true) => "same",
        Some(false) => "DIFFERS",
        None => "-",
    };
    let mut lines = format!(
        "{:<10} {device:<28} {:<4} {:>6} {:>5} {:>8.4} s {:>8} {:>8} {result:>6} {:>10.3e} {:>10.3e}",
        p.label,
        p.hash,
        format!("2^{}", p.log_rows),
        p.cols,
        p.median_s,
        ratio(p.ratio_vs_cpu),
        ratio(p.ratio_vs_first_set),
        p.lde_rows_per_s,
        p.permutations_per_s
    );
    if let Some(difference) = &p.difference {
        lines += &format!("\n    {}", difference.describe());
    }
    if stages && p.backend != Backend::Cpu.to_string() {
        if p.stages.is_empty() {
            lines += "\n    no device stage times on this device";
        }
        for gpu in &p.stages {
            for line in gpu.describe().lines() {
                lines += &format!("\n    {line}");
            }
        }
    }
    lines
}

/// Log-log plot of median time against trace rows, one line per backend (GPU set), column count
/// and hash.
fn plot(points: &[Point], path: &std::path::Path) -> Result<(), Box<dyn Error>> {
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
    chart.configure_mesh().x_desc("log2(trace rows)").y_desc("seconds").draw()?;
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for p in points {
        let name = format!("{} {} cols {}", p.label, p.cols, p.hash);
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
