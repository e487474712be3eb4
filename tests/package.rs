//! The published package: `cargo package` holds every WGSL and CUDA source the crate loads, and
//! a scratch crate that depends on the packaged crate (not on this checkout) builds and runs a
//! commitment on the CPU backend and, where an adapter is present, on wgpu, with equal roots.
//!
//! Builds the scratch crate in `target/package-check/` (the first run compiles the dependencies
//! once more, in the dev profile without debug info).

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

const SCRATCH_MAIN: &str = r#"
use miden_gpu::{CommitRequest, CpuCommitter, Felt, GpuCommitter, HashFunction, PolyInput, RowHashing};

fn main() {
    let columns: Vec<Vec<Felt>> = (0..11u64)
        .map(|c| (0..64u64).map(|i| Felt::new((c + 3) * 1_000_003 + i * i + 1)).collect())
        .collect();
    let columns: Vec<&[Felt]> = columns.iter().map(|c| c.as_slice()).collect();
    let request = CommitRequest {
        input: PolyInput::Trace { columns: &columns },
        blowup: 8,
        row_hashing: RowHashing::WholeRow,
        hash: HashFunction::Rpo256,
    };
    let cpu = CpuCommitter::new().commit(&request).expect("CPU commitment").root();
    println!("cpu root {cpu:?}");
    if miden_gpu::wgpu::AdapterSummary::find(&Default::default()).is_ok() {
        let wgpu = miden_gpu::wgpu::WgpuCommitter::new().expect("wgpu backend");
        let root = wgpu.commit(&request).expect("wgpu commitment").root();
        assert_eq!(root, cpu, "wgpu root differs from the CPU's");
        println!("wgpu root equal on {}", wgpu.device_name());
    }
    #[cfg(target_os = "linux")]
    assert!(miden_gpu::cuda::kernel_source().contains("__global__"), "CUDA sources missing");
}
"#;

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Runs `command`, failing the test with its output if it fails; returns its stdout.
fn run(command: &mut Command) -> String {
    let output = command.output().expect("cargo runs");
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Every file in `folder` of the checkout, as package paths.
fn sources(root: &Path, folder: &str) -> Vec<String> {
    let mut files: Vec<String> = fs::read_dir(root.join(folder))
        .expect("source folder")
        .map(|entry| format!("{folder}/{}", entry.expect("entry").file_name().to_string_lossy()))
        .collect();
    files.sort();
    files
}

#[test]
fn packaged_crate_holds_its_kernels_and_commits() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let work = root.join("target/package-check");
    let _ = fs::remove_dir_all(work.join("package"));

    let listed = run(cargo().current_dir(&root).args(["package", "--list", "--allow-dirty"]));
    for file in sources(&root, "wgsl").into_iter().chain(sources(&root, "cuda")) {
        assert!(listed.lines().any(|line| line == file), "the package lacks {file}");
    }

    run(cargo()
        .current_dir(&root)
        .args(["package", "--no-verify", "--allow-dirty"])
        .arg(format!("--target-dir={}", work.join("package-target").display())));
    let version = env!("CARGO_PKG_VERSION");
    let archive = work.join(format!("package-target/package/miden-gpu-{version}.crate"));
    fs::create_dir_all(work.join("package")).expect("package folder");
    run(Command::new("tar").arg("xzf").arg(&archive).arg("-C").arg(work.join("package")));
    let unpacked = work.join(format!("package/miden-gpu-{version}"));

    let scratch = work.join("scratch");
    fs::create_dir_all(scratch.join("src")).expect("scratch crate");
    let features = if cfg!(target_os = "linux") { r#"["wgpu", "cuda"]"# } else { r#"["wgpu"]"# };
    fs::write(
        scratch.join("Cargo.toml"),
        format!(
            "[package]\nname = \"scratch\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
             [dependencies]\nmiden-gpu = {{ path = {:?}, features = {features} }}\n\n[workspace]\n",
            unpacked.display().to_string()
        ),
    )
    .expect("scratch manifest");
    fs::write(scratch.join("src/main.rs"), SCRATCH_MAIN).expect("scratch main");
    // The versions this checkout is tested with.
    fs::copy(root.join("Cargo.lock"), scratch.join("Cargo.lock")).expect("lock file");

    // a check of what the package holds, not a build to debug: no debug info, no incremental state
    let out = run(cargo()
        .current_dir(&scratch)
        .env("CARGO_PROFILE_DEV_DEBUG", "false")
        .env("CARGO_INCREMENTAL", "0")
        .args(["run", "--quiet"])
        .arg(format!("--target-dir={}", work.join("scratch-target").display())));
    eprintln!("{out}");
    assert!(out.contains("cpu root"), "the scratch crate did not commit: {out}");
}
