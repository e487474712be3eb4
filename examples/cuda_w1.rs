//! W1 timing: a trace commitment of 73 base columns x 2^20 rows, blowup 8, RPO256, from host
//! columns to host LDE rows and Merkle tree, on the CPU backend and on CUDA in one run, with the
//! results compared. Also prints the CUDA per-stage device times, the hash kernel's
//! permutations/s and the NTT's elements/s.
//!
//! ```text
//! cargo run --release --no-default-features --features cuda,concurrent --example cuda_w1 -- \
//!     [--log-rows 20] [--cols 73] [--blowup 8] [--hash rpo|rpx] [--reps 3] [--skip-cpu]
//! ```

#[cfg(feature = "cuda")]
fn main() {
    w1::main();
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("cuda_w1 needs the `cuda` feature: --no-default-features --features cuda,concurrent");
}

#[cfg(feature = "cuda")]
mod w1 {
    use std::time::Instant;

    use miden_gpu::{
        cuda::CudaCommitter, CommitRequest, CpuCommitter, Felt, GpuCommitter, HashFunction,
        PolyInput, RowHashing,
    };
    use rand::{rngs::StdRng, Rng, SeedableRng};
    use rayon::prelude::*;

    struct Args {
        log_rows: u32,
        cols: usize,
        blowup: usize,
        hash: HashFunction,
        reps: usize,
        skip_cpu: bool,
    }

    fn args() -> Args {
        let mut a = Args {
            log_rows: 20,
            cols: 73,
            blowup: 8,
            hash: HashFunction::Rpo256,
            reps: 3,
            skip_cpu: false,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
            match flag.as_str() {
                "--log-rows" => a.log_rows = value().parse().expect("--log-rows"),
                "--cols" => a.cols = value().parse().expect("--cols"),
                "--blowup" => a.blowup = value().parse().expect("--blowup"),
                "--hash" => a.hash = value().parse().expect("--hash"),
                "--reps" => a.reps = value().parse().expect("--reps"),
                "--skip-cpu" => a.skip_cpu = true,
                other => panic!("unknown argument {other}"),
            }
        }
        a
    }

    pub fn main() {
        let a = args();
        let n = 1usize << a.log_rows;
        println!(
            "W1: {} columns x 2^{} rows, blowup {}, {}",
            a.cols, a.log_rows, a.blowup, a.hash
        );
        // random, never zero, one seed per column
        let columns: Vec<Vec<Felt>> = (0..a.cols)
            .into_par_iter()
            .map(|c| {
                let mut rng = StdRng::seed_from_u64(c as u64 + 1);
                (0..n)
                    .map(|_| Felt::new(rng.random_range(1..u64::MAX - (1 << 32))))
                    .collect()
            })
            .collect();
        let refs: Vec<&[Felt]> = columns.iter().map(|c| c.as_slice()).collect();
        let request = CommitRequest {
            input: PolyInput::Trace { columns: &refs },
            blowup: a.blowup,
            row_hashing: RowHashing::WholeRow,
            hash: a.hash,
        };

        // RUST_LOG=miden_gpu=info prints the per-GPU stage times and the download's host split
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
        let start = Instant::now();
        let cuda = CudaCommitter::new().expect("CUDA backend");
        println!(
            "cuda: {} (opened + kernels compiled in {:.2} s)",
            cuda.device_name(),
            start.elapsed().as_secs_f64()
        );
        let warm = Instant::now();
        let first = cuda.commit(&request).expect("CUDA commit");
        println!(
            "cuda: first commit (allocations, tables) {:.3} s",
            warm.elapsed().as_secs_f64()
        );
        drop(first);
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..a.reps.max(1) {
            drop(last.take()); // free the previous result before the next run
            let t = Instant::now();
            let c = cuda.commit(&request).expect("CUDA commit");
            times.push(t.elapsed().as_secs_f64());
            last = Some(c);
        }
        times.sort_by(f64::total_cmp);
        let gpu_s = times[times.len() / 2];
        println!(
            "cuda: W1 commit median {:.3} s over {} runs {:?}",
            gpu_s,
            times.len(),
            times
        );
        let lde_rows = n * a.blowup;
        let perms_per_row = a.cols.div_ceil(8);
        let perms = lde_rows * perms_per_row + (lde_rows - 1);
        for s in cuda.last_stage_times() {
            println!(
                "cuda:{} upload+lde {:.2} ms (kernels: interpolate {:.2} ms, lde {:.2} ms), exchange {:.2} ms, hash {:.2} ms, tree {:.2} ms",
                s.device, s.upload_lde_ms, s.interpolate_ms, s.lde_ms, s.exchange_ms, s.hash_ms, s.tree_ms
            );
            let leaf_perms = (lde_rows * perms_per_row) as f64 / cuda.devices().len() as f64;
            println!(
                "cuda:{} hash kernel {:.1} M permutations/s (leaves, with the row-major LDE copy); tree {:.1} M/s",
                s.device,
                leaf_perms / (s.hash_ms as f64 * 1e3),
                (lde_rows as f64 / cuda.devices().len() as f64) / (s.tree_ms as f64 * 1e3)
            );
            let ntt_elems = (a.cols * lde_rows) as f64 / cuda.devices().len().min(a.cols) as f64;
            println!(
                "cuda:{} LDE {:.2} G elements/s (coset scaling + NTTs), interpolation {:.2} G elements/s",
                s.device,
                ntt_elems / (s.lde_ms as f64 * 1e6),
                (a.cols * n) as f64 / cuda.devices().len() as f64 / (s.interpolate_ms as f64 * 1e6)
            );
        }
        println!(
            "cuda: {perms} permutations in total ({:.1} M/s end to end)",
            perms as f64 / gpu_s / 1e6
        );
        let gpu = last.expect("at least one run");

        if a.skip_cpu {
            return;
        }
        let t = Instant::now();
        let cpu = CpuCommitter::new().commit(&request).expect("CPU commit");
        let cpu_s = t.elapsed().as_secs_f64();
        println!(
            "cpu: {} W1 commit {:.3} s",
            CpuCommitter::new().device_name(),
            cpu_s
        );
        let same = gpu.nodes[1..] == cpu.nodes[1..]
            && gpu.leaves == cpu.leaves
            && gpu.polys == cpu.polys
            && gpu.lde.data == cpu.lde.data;
        println!("results identical: {same}");
        assert!(same, "CUDA and CPU commitments differ");
        println!(
            "speedup: {:.1}x (cpu {:.3} s / cuda {:.3} s)",
            cpu_s / gpu_s,
            cpu_s,
            gpu_s
        );
    }
}
