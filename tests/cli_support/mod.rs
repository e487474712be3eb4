//! What the tests of the `miden-gpu` binary share: temporary directories, running the binary and
//! reading what it printed.

#![allow(dead_code)] // each test binary uses its own part

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::atomic::{AtomicUsize, Ordering},
};

// TEMPORARY DIRECTORIES
// ================================================================================================

/// A directory of its own under the system temp directory, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let unique = format!(
            "miden-gpu-cli-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = std::env::temp_dir().join(unique);
        fs::create_dir_all(&dir).expect("create a temp directory");
        Self(dir)
    }

    /// Writes `content` to `name` in this directory and returns its path.
    pub fn file(&self, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        fs::write(&path, content).expect("write a temp file");
        path
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The names of the files in this directory, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.0)
            .expect("list the temp directory")
            .map(|entry| entry.expect("a directory entry").file_name().to_string_lossy().into())
            .collect();
        names.sort();
        names
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

// RUNNING THE BINARY
// ================================================================================================

/// `miden-gpu` with `args`, with no backend or log settings from the environment.
pub fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_miden-gpu"));
    command.args(args).env_remove("MIDEN_GPU_BACKEND").env_remove("RUST_LOG");
    command
}

/// Runs `miden-gpu` with `args` (no backend or log settings from the environment).
pub fn miden_gpu(args: &[&str]) -> Output {
    command(args).output().expect("run miden-gpu")
}

/// A path as a command-line argument.
pub fn arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The value of the `name  value` line of a command's report.
pub fn report_value(output: &Output, name: &str) -> String {
    stdout(output)
        .lines()
        .find_map(|line| line.strip_prefix(name).map(|value| value.trim().to_string()))
        .unwrap_or_else(|| panic!("no `{name}` line in:\n{}", stdout(output)))
}

/// Asserts success, printing the command's output otherwise.
pub fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "miden-gpu failed ({}):\n{}\n{}",
        output.status,
        stdout(output),
        stderr(output)
    );
}

/// Asserts a failure with an `error:` line containing `message` and no panic.
pub fn assert_error(output: &Output, message: &str) {
    let stderr = stderr(output);
    assert!(!output.status.success(), "miden-gpu succeeded:\n{}", stdout(output));
    assert!(stderr.contains("error:") && stderr.contains(message), "unexpected stderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "miden-gpu panicked:\n{stderr}");
}

/// [`assert_error`] with exit status `status` (1: a failure; 2: invalid arguments).
pub fn assert_error_status(output: &Output, status: i32, message: &str) {
    assert_error(output, message);
    assert_eq!(output.status.code(), Some(status), "exit status:\n{}", stderr(output));
}
