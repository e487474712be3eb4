//! Which GPUs a committer uses: the devices the driver reports, and the list the caller or
//! `MIDEN_GPU_DEVICES` names, checked before any device is opened.

use super::{driver::check, program};
use crate::error::{GpuError, Result};

/// The environment variable that selects the GPUs, as a comma-separated list of CUDA ordinals.
pub const DEVICES_ENV: &str = "MIDEN_GPU_DEVICES";

// SELECTION
// ================================================================================================

/// The CUDA ordinals to use: `requested`, else the list in [`DEVICES_ENV`], else every visible
/// device.
pub(super) fn select(requested: Option<Vec<usize>>) -> Result<Vec<usize>> {
    let count = device_count()?;
    let ordinals = match requested {
        Some(list) => {
            let text = list.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",");
            check_device_list(&text, list, count)?
        },
        None => match std::env::var(DEVICES_ENV) {
            Ok(text) if !text.trim().is_empty() => parse_device_list(&text, count)?,
            _ => (0..count).collect(),
        },
    };
    Ok(ordinals)
}

/// Number of CUDA devices, or [`GpuError::BackendUnavailable`] if there is no NVIDIA driver or
/// GPU. Opens no device and compiles nothing.
pub fn device_count() -> Result<usize> {
    // dynamic loading panics on a missing library: look for it first
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(program::unavailable("the CUDA driver library (libcuda) was not found"));
    }
    let no_gpu = |e: GpuError| program::unavailable(&format!("no usable CUDA device: {e}"));
    check(cudarc::driver::result::init(), "cuInit").map_err(no_gpu)?;
    let count =
        check(cudarc::driver::result::device::get_count(), "cuDeviceGetCount").map_err(no_gpu)?;
    if count <= 0 {
        return Err(program::unavailable("the CUDA driver reports no device"));
    }
    Ok(count as usize)
}

/// Parses a device list such as `0,1` against `count` visible devices.
pub fn parse_device_list(text: &str, count: usize) -> Result<Vec<usize>> {
    let invalid = |reason: String| GpuError::InvalidDeviceList { list: text.to_string(), reason };
    let list = text
        .split(',')
        .map(|item| {
            let item = item.trim();
            item.parse::<usize>().map_err(|_| invalid(format!("`{item}` is not a device number")))
        })
        .collect::<Result<Vec<usize>>>()?;
    check_device_list(text, list, count)
}

/// Checks `list` (written `text` in errors) against `count` visible devices: not empty, every
/// device present, none twice.
fn check_device_list(text: &str, list: Vec<usize>, count: usize) -> Result<Vec<usize>> {
    let invalid = |reason: String| GpuError::InvalidDeviceList { list: text.to_string(), reason };
    if list.is_empty() {
        return Err(invalid("no device given".into()));
    }
    if let Some(d) = list.iter().find(|&&d| d >= count) {
        return Err(invalid(format!("device {d} does not exist ({count} visible)")));
    }
    if let Some((i, d)) = list.iter().enumerate().find(|(i, d)| list[..*i].contains(d)) {
        return Err(invalid(format!("device {d} is listed twice (position {i})")));
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_lists_are_validated() {
        assert_eq!(parse_device_list("0,1", 2).unwrap(), vec![0, 1]);
        assert_eq!(parse_device_list(" 1 ", 2).unwrap(), vec![1]);
        for bad in ["", "0,", "a", "0,0", "2", "-1", "0;1"] {
            assert!(
                matches!(parse_device_list(bad, 2), Err(GpuError::InvalidDeviceList { .. })),
                "{bad:?} accepted"
            );
        }
    }
}
