//! Which GPUs a committer uses: the devices the driver reports, and the list the options name
//! ([`CudaOptions::devices`](super::CudaOptions::devices)), checked before any device is opened.

use super::{driver::check, status::unavailable};
use crate::error::{GpuError, Result};

// SELECTION
// ================================================================================================

/// The CUDA ordinals to use: `requested`, checked against the visible devices, else every
/// visible device.
pub(super) fn select(requested: Option<&[usize]>) -> Result<Vec<usize>> {
    let count = device_count()?;
    match requested {
        Some(list) => {
            let text = list.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",");
            check_device_list(&text, list.to_vec(), count)
        },
        None => Ok((0..count).collect()),
    }
}

/// Number of CUDA devices, or [`GpuError::BackendUnavailable`] if there is no NVIDIA driver or
/// GPU. Opens no device and compiles nothing.
pub fn device_count() -> Result<usize> {
    // dynamic loading panics on a missing library: look for it first
    // SAFETY: only looks for the library; loads nothing and calls no entry point.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(unavailable("the CUDA driver library (libcuda) was not found"));
    }
    let no_gpu = |e: GpuError| unavailable(&format!("no usable CUDA device: {e}"));
    check(cudarc::driver::result::init(), "cuInit").map_err(no_gpu)?;
    let count =
        check(cudarc::driver::result::device::get_count(), "cuDeviceGetCount").map_err(no_gpu)?;
    if count <= 0 {
        return Err(unavailable("the CUDA driver reports no device"));
    }
    Ok(count as usize)
}

/// Where a GPU sits on the PCI bus: how CUDA's ordinals are matched with another enumeration of
/// the same GPUs (NVML's indices, `nvidia-smi`), whose order may differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PciAddress {
    /// The PCI domain.
    pub domain: u32,
    /// The bus.
    pub bus: u32,
    /// The device on the bus.
    pub device: u32,
}

/// The PCI address of every visible CUDA device, indexed by CUDA ordinal; opens no device.
///
/// # Errors
/// [`GpuError::BackendUnavailable`] as [`device_count`]; a driver error for an attribute.
pub fn pci_addresses() -> Result<Vec<PciAddress>> {
    use cudarc::driver::sys::CUdevice_attribute::{
        CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID,
        CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID,
    };
    let count = device_count()?;
    (0..count)
        .map(|ordinal| {
            let ordinal = i32::try_from(ordinal).unwrap_or(i32::MAX);
            let device = check(cudarc::driver::result::device::get(ordinal), "cuDeviceGet")?;
            let attribute = |attribute| {
                // SAFETY: `device` is a handle the driver returned, and the attributes are plain
                // integers
                let value =
                    unsafe { cudarc::driver::result::device::get_attribute(device, attribute) };
                check(value, "cuDeviceGetAttribute").map(|value| value as u32)
            };
            Ok(PciAddress {
                domain: attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
                bus: attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
                device: attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?,
            })
        })
        .collect()
}

/// Parses a device list such as `0,1` (CUDA ordinals, comma-separated) without checking it
/// against the devices present (opening the committer does); anything but numbers is
/// [`GpuError::InvalidDeviceList`].
pub(super) fn parse_ordinals(text: &str) -> Result<Vec<usize>> {
    let invalid = |reason: String| GpuError::InvalidDeviceList { list: text.to_string(), reason };
    text.split(',')
        .map(|item| {
            let item = item.trim();
            item.parse::<usize>().map_err(|_| invalid(format!("`{item}` is not a device number")))
        })
        .collect()
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
    fn device_lists_are_parsed_then_checked() {
        assert_eq!(parse_ordinals("0,1").unwrap(), vec![0, 1]);
        assert_eq!(parse_ordinals(" 1 ").unwrap(), vec![1]);
        for bad in ["", "0,", "a", "-1", "0;1"] {
            assert!(
                matches!(parse_ordinals(bad), Err(GpuError::InvalidDeviceList { .. })),
                "{bad:?} parsed"
            );
        }
        assert_eq!(check_device_list("1,0", vec![1, 0], 2).unwrap(), vec![1, 0]);
        for (text, list) in [("", vec![]), ("0,0", vec![0, 0]), ("2", vec![2])] {
            assert!(
                matches!(check_device_list(text, list, 2), Err(GpuError::InvalidDeviceList { .. })),
                "{text:?} accepted"
            );
        }
    }
}
