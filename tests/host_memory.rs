//! Host memory in a container: a commitment larger than the room its control group's memory
//! limit leaves is a typed `GpuError::OutOfMemory`, not a kill by the kernel's OOM killer.
//!
//! The test creates a memory-limited cgroup (v2 where the unified hierarchy has the memory
//! controller, else v1), runs itself again inside it, and removes it. That needs root and a
//! writable cgroup file system, so it is `#[ignore]`d; `scripts/test.sh` runs it where both are
//! present and says so where they are not. Run by hand with
//! `cargo test --release --test host_memory -- --ignored`: where no group can be made it fails
//! with the reason, never passes unexercised. Control groups are Linux's: elsewhere the file
//! holds no test.

#![cfg(target_os = "linux")]

use std::{
    fs,
    os::unix::process::ExitStatusExt,
    path::{Path, PathBuf},
    process::Command,
};

use miden_gpu::{
    CommitRequest, CpuCommitter, Felt, GpuCommitter, GpuError, HashFunction, PolyInput, RowHashing,
};

/// Set in the child process that runs inside the limited group.
const CHILD_ENV: &str = "MIDEN_GPU_TEST_IN_LIMITED_CGROUP";

/// The group's memory limit.
const LIMIT: u64 = 256 << 20;

#[test]
#[ignore = "creates a memory-limited cgroup: needs root and a writable cgroup v1 or v2 memory \
            controller (scripts/test.sh runs it where they are)"]
fn commitment_beyond_a_cgroup_memory_limit_is_out_of_memory() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return commit_inside_the_limit();
    }
    let group = LimitedGroup::create(LIMIT)
        .unwrap_or_else(|reason| panic!("cannot create a memory-limited cgroup here: {reason}"));
    let test = "commitment_beyond_a_cgroup_memory_limit_is_out_of_memory";
    let executable = std::env::current_exe().expect("the test executable");
    // the shell joins the group, then becomes the test: everything it allocates is charged there
    let status = Command::new("sh")
        .arg("-c")
        .arg(r#"echo $$ > "$0" && exec "$@""#)
        .arg(group.dir.join("cgroup.procs"))
        .arg(executable)
        .args([test, "--exact", "--ignored", "--test-threads=1", "--nocapture"])
        .env(CHILD_ENV, "1")
        .status()
        .expect("the test in the limited group");
    drop(group);
    match status.signal() {
        Some(signal) => panic!(
            "the test in a group limited to {LIMIT} bytes was killed by signal {signal} (9: the \
             OOM killer): the reservation was not refused"
        ),
        None => assert!(status.success(), "the test in the limited group failed: {status}"),
    }
}

/// In the limited group: a commitment well inside the limit succeeds, one beyond it is
/// `OutOfMemory` naming what it needed and what the group leaves.
fn commit_inside_the_limit() {
    let commit = |rows: usize, blowup: usize| {
        let column: Vec<Felt> = (1..=rows as u64).map(Felt::new).collect();
        let columns: Vec<&[Felt]> = vec![&column; 8];
        CpuCommitter::new().commit(&CommitRequest {
            input: PolyInput::Trace { columns: &columns },
            blowup,
            row_hashing: RowHashing::WholeRow,
            hash: HashFunction::Rpo256,
        })
    };
    // 2^15 LDE rows of 8 elements: 2 MiB
    let commitment = commit(1 << 12, 8).expect("a commitment inside the limit");
    assert_eq!(commitment.leaves.len(), 1 << 15);
    // 2^24 LDE rows of 8 elements: 1 GiB, four times the limit, less than the machine has
    match commit(1 << 16, 1 << 8) {
        Err(GpuError::OutOfMemory { memory: "host", needed, available }) => {
            assert_eq!(needed, 1 << 30);
            assert!(available < LIMIT, "{available} bytes available under a {LIMIT}-byte limit");
        },
        other => panic!("expected OutOfMemory, got {:?}", other.map(|c| c.leaves.len())),
    }
}

// A MEMORY-LIMITED GROUP
// ================================================================================================

/// A control group with a memory limit, removed when dropped.
struct LimitedGroup {
    dir: PathBuf,
}

impl LimitedGroup {
    /// A new group under the root of the v2 hierarchy (where it has the memory controller) or
    /// of the v1 memory hierarchy, limited to `limit` bytes (swap included where the kernel
    /// accounts it); the reason where none can be made.
    fn create(limit: u64) -> Result<Self, String> {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("no /proc/self/mountinfo ({e})"))?;
        let mount = |fs_type: &str, option: Option<&str>| {
            mountinfo.lines().find_map(|line| {
                let (mount, file_system) = line.split_once(" - ")?;
                let mut file_system = file_system.split_whitespace();
                let options = file_system.nth(2).unwrap_or("");
                let matches = file_system_type(line) == Some(fs_type)
                    && option.is_none_or(|o| options.split(',').any(|x| x == o));
                matches.then(|| mount.split_whitespace().nth(4).map(PathBuf::from)).flatten()
            })
        };
        let name = format!("miden-gpu-test-{}", std::process::id());
        let v2 = mount("cgroup2", None).filter(|root| {
            fs::read_to_string(root.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
        });
        if let Some(root) = v2 {
            // children get the controller only where the root hands it down
            let _ = fs::write(root.join("cgroup.subtree_control"), "+memory");
            let group = Self::make(&root.join(&name))?;
            group.write("memory.max", limit)?;
            let _ = group.write("memory.swap.max", 0);
            return Ok(group);
        }
        let Some(root) = mount("cgroup", Some("memory")) else {
            return Err("no cgroup v2 hierarchy with the memory controller, and no cgroup v1 \
                        memory hierarchy, is mounted"
                .into());
        };
        let group = Self::make(&root.join(&name))?;
        group.write("memory.limit_in_bytes", limit)?;
        let _ = group.write("memory.memsw.limit_in_bytes", limit);
        Ok(group)
    }

    fn make(dir: &Path) -> Result<Self, String> {
        fs::create_dir(dir).map_err(|e| format!("cannot create {} ({e})", dir.display()))?;
        Ok(Self { dir: dir.to_path_buf() })
    }

    fn write(&self, file: &str, value: u64) -> Result<(), String> {
        let path = self.dir.join(file);
        fs::write(&path, value.to_string())
            .map_err(|e| format!("cannot write {value} to {} ({e})", path.display()))
    }
}

impl Drop for LimitedGroup {
    fn drop(&mut self) {
        // the child has exited, so the group is empty and can go
        if let Err(e) = fs::remove_dir(&self.dir) {
            eprintln!("could not remove {}: {e}", self.dir.display());
        }
    }
}

/// The file system type of a `/proc/self/mountinfo` line (the field after ` - `).
fn file_system_type(line: &str) -> Option<&str> {
    line.split_once(" - ")?.1.split_whitespace().next()
}
