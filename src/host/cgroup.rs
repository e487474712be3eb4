//! The memory limits of the process's control groups (Linux containers).
//!
//! In a container the machine's memory (`/proc/meminfo`) is not what the process may use: its
//! control group has a limit, and a process that goes over it is killed by the kernel's OOM
//! killer, with no error to return. [`room`] reads the limits of every group the process belongs
//! to, from its own group up to its hierarchy's root (a parent's limit binds its children too):
//!
//! - cgroup v2: `memory.max` (`max` when there is none) and `memory.current`;
//! - cgroup v1: `memory.limit_in_bytes` (a page-rounded `i64::MAX` when there is none) and
//!   `memory.usage_in_bytes`.
//!
//! Usage counts the page cache, which the kernel reclaims before it kills; the inactive file
//! pages of `memory.stat` (`inactive_file`, v1 `total_inactive_file`) are subtracted from it, as
//! container runtimes do for a group's working set.
//!
//! Where the groups are comes from `/proc/self/cgroup` (the process's path in each hierarchy)
//! and `/proc/self/mountinfo` (where each hierarchy is mounted, and which of its groups the mount
//! shows at its root). Everything is parsed defensively: a file that is missing, unreadable or
//! malformed means no limit.

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
};

/// Limits at or above this many bytes are no limit: cgroup v1 writes "none" as `i64::MAX`
/// rounded down to a page.
const UNLIMITED_FROM: u64 = 1 << 62;

// ROOM
// ================================================================================================

/// The room the tightest limited group leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Room {
    /// The group's limit, in bytes.
    pub limit: u64,
    /// Its usage (without inactive page cache), in bytes.
    pub usage: u64,
}

impl Room {
    /// Bytes below the limit kept free for what the process allocates besides the
    /// reservation being checked: 1/64 of the limit, at least 16 MiB.
    pub fn margin(&self) -> u64 {
        (self.limit / 64).max(16 << 20)
    }

    /// The bytes a reservation may take: the limit less the usage and the margin.
    pub fn available(&self) -> u64 {
        self.limit.saturating_sub(self.usage).saturating_sub(self.margin())
    }
}

/// The room of the process's tightest memory-limited control group now, or `None` where no
/// group has a limit (or none can be read). The groups are found once; their limits and usage
/// are read on every call.
pub(super) fn room() -> Option<Room> {
    static GROUPS: OnceLock<Vec<Group>> = OnceLock::new();
    let groups = GROUPS.get_or_init(|| {
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        memory_groups(&cgroup, &mountinfo)
    });
    groups.iter().filter_map(Group::room).min_by_key(|room| room.available())
}

// GROUPS
// ================================================================================================

/// The cgroup version of a group, which names its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

impl Version {
    fn limit_file(self) -> &'static str {
        match self {
            Version::V1 => "memory.limit_in_bytes",
            Version::V2 => "memory.max",
        }
    }

    fn usage_file(self) -> &'static str {
        match self {
            Version::V1 => "memory.usage_in_bytes",
            Version::V2 => "memory.current",
        }
    }

    /// The `memory.stat` field of the inactive page cache, the group's descendants included.
    fn inactive_file_field(self) -> &'static str {
        match self {
            Version::V1 => "total_inactive_file",
            Version::V2 => "inactive_file",
        }
    }
}

/// One control group directory whose memory limit may bind the process.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Group {
    dir: PathBuf,
    version: Version,
}

impl Group {
    /// The group's limit and usage, where it has a limit.
    fn room(&self) -> Option<Room> {
        let read = |file: &str| std::fs::read_to_string(self.dir.join(file)).ok();
        let limit = parse_limit(&read(self.version.limit_file())?)?;
        let usage = parse_bytes(&read(self.version.usage_file())?)?;
        let inactive = read("memory.stat")
            .and_then(|stat| parse_stat_field(&stat, self.version.inactive_file_field()))
            .unwrap_or(0);
        Some(Room { limit, usage: usage.saturating_sub(inactive) })
    }
}

/// The memory groups of the process, each hierarchy's from the process's own group up to the
/// mount's root, from the contents of `/proc/self/cgroup` and `/proc/self/mountinfo`.
fn memory_groups(cgroup: &str, mountinfo: &str) -> Vec<Group> {
    let mounts = parse_mountinfo(mountinfo);
    let mut groups = Vec::new();
    for (version, path) in memory_paths(cgroup) {
        let is_memory_mount = |mount: &&Mount<'_>| match version {
            Version::V2 => mount.fs_type == "cgroup2",
            Version::V1 => {
                mount.fs_type == "cgroup" && mount.super_options.split(',').any(|o| o == "memory")
            },
        };
        for mount in mounts.iter().filter(is_memory_mount) {
            let leaf = group_dir(&mount.mount_point, &mount.root, path);
            let dirs = leaf.ancestors().take_while(|dir| dir.starts_with(&mount.mount_point));
            groups.extend(dirs.map(|dir| Group { dir: dir.to_path_buf(), version }));
        }
    }
    groups
}

/// The directory of the group at `path` (as `/proc/self/cgroup` names it) under a mount of its
/// hierarchy at `mount_point` showing the group `mount_root`; the mount point itself where the
/// path is not under the mount's root (a group outside the process's cgroup namespace).
fn group_dir(mount_point: &Path, mount_root: &str, path: &str) -> PathBuf {
    let relative = Path::new(path).strip_prefix(mount_root).ok().filter(|relative| {
        relative.components().all(|c| matches!(c, std::path::Component::Normal(_)))
    });
    match relative {
        Some(relative) if relative.components().next().is_some() => mount_point.join(relative),
        _ => mount_point.to_path_buf(),
    }
}

// PARSERS
// ================================================================================================

/// The paths of the process's groups that can limit memory, from `/proc/self/cgroup`: lines
/// `id:controllers:path`, the v2 hierarchy's as `0::path`, a v1 hierarchy's with `memory` among
/// its comma-separated controllers.
fn memory_paths(cgroup: &str) -> Vec<(Version, &str)> {
    cgroup
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            if !path.starts_with('/') {
                return None;
            }
            if id == "0" && controllers.is_empty() {
                Some((Version::V2, path))
            } else if controllers.split(',').any(|c| c == "memory") {
                Some((Version::V1, path))
            } else {
                None
            }
        })
        .collect()
}

/// One line of `/proc/self/mountinfo`, the fields this module reads.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount<'a> {
    /// The directory of the mounted file system shown at the mount point (for a cgroup
    /// hierarchy, the group at the mount point).
    root: String,
    /// Where it is mounted.
    mount_point: PathBuf,
    /// The file system type (`cgroup`, `cgroup2`, ...).
    fs_type: &'a str,
    /// The file system's own options (for cgroup v1: its controllers).
    super_options: &'a str,
}

/// The mounts of `/proc/self/mountinfo`: `id parent major:minor root mount-point options
/// [optional fields] - type source super-options`, with spaces and other special characters of
/// the paths written as octal escapes.
fn parse_mountinfo(mountinfo: &str) -> Vec<Mount<'_>> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (mount, file_system) = line.split_once(" - ")?;
            let mut mount = mount.split_whitespace().skip(3);
            let (root, mount_point) = (mount.next()?, mount.next()?);
            let mut file_system = file_system.split_whitespace();
            let (fs_type, _source) = (file_system.next()?, file_system.next()?);
            Some(Mount {
                root: unescape(root),
                mount_point: PathBuf::from(unescape(mount_point)),
                fs_type,
                super_options: file_system.next().unwrap_or(""),
            })
        })
        .collect()
}

/// A mountinfo path with its octal escapes (`\040` for a space) decoded; an escape that is not
/// three octal digits is kept as written.
fn unescape(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = bytes.get(i + 1..i + 4).filter(|_| bytes[i] == b'\\');
        let value = escape
            .and_then(|digits| std::str::from_utf8(digits).ok())
            .and_then(|digits| u8::from_str_radix(digits, 8).ok());
        match value {
            Some(byte) => {
                out.push(byte);
                i += 4;
            },
            None => {
                out.push(bytes[i]);
                i += 1;
            },
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A limit file's bytes: `None` for `max` (v2), a v1 "no limit" ([`UNLIMITED_FROM`]) or
/// anything that is not a number.
fn parse_limit(contents: &str) -> Option<u64> {
    parse_bytes(contents).filter(|&limit| limit < UNLIMITED_FROM)
}

/// A file holding one decimal number of bytes.
fn parse_bytes(contents: &str) -> Option<u64> {
    contents.trim().parse().ok()
}

/// The value of `field` in a `memory.stat` file (lines `name value`).
fn parse_stat_field(stat: &str, field: &str) -> Option<u64> {
    stat.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == field).then(|| value.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/self/mountinfo` of a hybrid system: v1 hierarchies (memory among them) and the
    /// unified v2 one, plus a bind mount of a v1 memory group whose root is not `/`.
    const HYBRID_MOUNTINFO: &str = "\
23 1 0:21 / /sys rw,nosuid - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
34 31 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:10 - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    const HYBRID_CGROUP: &str = "\
9:name=systemd:/
4:memory:/jobs/run-7
2:cpu,cpuacct:/
0::/
";

    #[test]
    fn proc_self_cgroup_names_the_v2_and_v1_memory_groups() {
        assert_eq!(
            memory_paths(HYBRID_CGROUP),
            vec![(Version::V1, "/jobs/run-7"), (Version::V2, "/")]
        );
        // pure v2, and a v1 memory hierarchy shared with another controller
        assert_eq!(
            memory_paths("0::/user.slice/app.scope\n"),
            vec![(Version::V2, "/user.slice/app.scope")]
        );
        assert_eq!(
            memory_paths("5:blkio,memory:/docker/ab12\n"),
            vec![(Version::V1, "/docker/ab12")]
        );
        // malformed lines and a path that is not absolute are no groups
        assert_eq!(memory_paths("garbage\n3:memory\n4:memory:relative\n\n"), vec![]);
    }

    #[test]
    fn mountinfo_lines_give_root_mount_point_type_and_options() {
        let mounts = parse_mountinfo(HYBRID_MOUNTINFO);
        assert_eq!(mounts.len(), 5);
        assert_eq!(
            mounts[3],
            Mount {
                root: "/".into(),
                mount_point: "/sys/fs/cgroup/memory".into(),
                fs_type: "cgroup",
                super_options: "rw,memory",
            }
        );
        assert_eq!(mounts[4].fs_type, "cgroup2");
        let escaped = "50 31 0:40 /a\\040b /mnt/with\\040space rw - cgroup2 none rw\n";
        let mounts = parse_mountinfo(escaped);
        assert_eq!(mounts[0].root, "/a b");
        assert_eq!(mounts[0].mount_point, PathBuf::from("/mnt/with space"));
        assert_eq!(unescape("bad\\09x\\"), "bad\\09x\\");
        assert!(parse_mountinfo("no separator here\n1 2 3\n").is_empty());
    }

    #[test]
    fn groups_run_from_the_process_group_up_to_the_mount() {
        let dirs = |cgroup: &str, mountinfo: &str| -> Vec<(String, Version)> {
            memory_groups(cgroup, mountinfo)
                .into_iter()
                .map(|g| (g.dir.display().to_string(), g.version))
                .collect()
        };
        assert_eq!(
            dirs(HYBRID_CGROUP, HYBRID_MOUNTINFO),
            vec![
                ("/sys/fs/cgroup/memory/jobs/run-7".to_string(), Version::V1),
                ("/sys/fs/cgroup/memory/jobs".to_string(), Version::V1),
                ("/sys/fs/cgroup/memory".to_string(), Version::V1),
                ("/sys/fs/cgroup/unified".to_string(), Version::V2),
            ]
        );
        // a container's v2 mount showing its own group at the root (no cgroup namespace)
        let container = "60 50 0:30 /kubepods/pod1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
        assert_eq!(
            dirs("0::/kubepods/pod1/app\n", container),
            vec![
                ("/sys/fs/cgroup/app".to_string(), Version::V2),
                ("/sys/fs/cgroup".to_string(), Version::V2),
            ]
        );
        // a path outside the mount's root, or climbing with `..`, is the mount point alone
        assert_eq!(
            dirs("0::/../../elsewhere\n", container),
            vec![("/sys/fs/cgroup".to_string(), Version::V2)]
        );
        // no mount of the hierarchy: no groups
        assert_eq!(dirs("0::/a\n", "1 0 0:1 / / rw - ext4 /dev/sda rw\n"), vec![]);
        assert_eq!(dirs("", ""), vec![]);
    }

    #[test]
    fn limits_usage_and_stat_fields_parse_defensively() {
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None);
        assert_eq!(parse_limit("268435456\n"), Some(268_435_456));
        assert_eq!(parse_limit(""), None);
        assert_eq!(parse_limit("-1"), None);
        assert_eq!(parse_bytes(" 4096 \n"), Some(4096));
        assert_eq!(parse_bytes("12 kB"), None);
        let v2_stat = "anon 1000\nfile 5000\nactive_file 2000\ninactive_file 3000\n";
        assert_eq!(parse_stat_field(v2_stat, "inactive_file"), Some(3000));
        let v1_stat = "cache 8192\ninactive_file 10\ntotal_inactive_file 4096\n";
        assert_eq!(parse_stat_field(v1_stat, "total_inactive_file"), Some(4096));
        assert_eq!(parse_stat_field(v1_stat, "missing"), None);
        assert_eq!(parse_stat_field("inactive_file lots\n", "inactive_file"), None);
    }

    #[test]
    fn room_keeps_a_margin_below_the_limit() {
        let room = Room { limit: 1 << 30, usage: 200 << 20 };
        assert_eq!(room.margin(), 16 << 20);
        assert_eq!(room.available(), (1 << 30) - (200 << 20) - (16 << 20));
        let large = Room { limit: 64 << 30, usage: 0 };
        assert_eq!(large.margin(), 1 << 30);
        let full = Room { limit: 1 << 30, usage: 2 << 30 };
        assert_eq!(full.available(), 0);
    }

    #[test]
    fn missing_group_files_are_no_limit() {
        let group = Group { dir: "/nonexistent/cgroup".into(), version: Version::V2 };
        assert_eq!(group.room(), None);
    }
}
