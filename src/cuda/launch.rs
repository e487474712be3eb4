//! Kernel signatures ([`Signature`]: the kernels that share one parameter list), loaded CUDA
//! modules and kernel handles, over the driver API (through cudarc's `result`/`sys` layers).
//!
//! Like the owners in `driver`, a [`Module`] unloads itself on drop with its context bound. A
//! [`Kernel`] is typed by its signature (see `kernels`, where every launch is packed), so a
//! kernel can only be launched with the arguments of its own signature; with
//! [`CudaOptions::sync_each_launch`](super::CudaOptions::sync_each_launch) each launch is
//! followed by a synchronization so that a fault names its kernel.

use core::ffi::c_void;
use std::{marker::PhantomData, sync::Arc};

use cudarc::driver::{result, sys, CudaContext};

use super::{
    driver::{bind, check, refused, DriverResult, Stream},
    health::driver_call,
};

// SIGNATURES
// ================================================================================================

/// One kernel parameter as the CUDA side declares it (what the signature test compares).
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Param {
    /// `const W*`, for the word type `W` (`u64`, `u32`).
    ConstPtr(&'static str),
    /// `W*`.
    MutPtr(&'static str),
    /// `u32`.
    U32,
    /// `u64`.
    U64,
}

/// A kernel signature: the kernels that have it and their parameters.
pub(super) trait Signature {
    /// The `extern "C"` names of the kernels of this signature.
    const KERNELS: &'static [&'static str];
    /// The parameters, in order.
    #[cfg(test)]
    const PARAMS: &'static [Param];
}

// MODULES AND LAUNCHES
// ================================================================================================

/// A loaded module, unloaded on drop.
pub(super) struct Module {
    raw: sys::CUmodule,
    ctx: Arc<CudaContext>,
}

impl Module {
    /// Loads a CUBIN image into `ctx`.
    pub(super) fn load(ctx: &Arc<CudaContext>, cubin: &[u8]) -> DriverResult<Self> {
        bind(ctx)?;
        let raw =
            // SAFETY: the context is bound and `cubin` is a complete CUBIN image, which the driver
            // copies while loading.
            check(unsafe { result::module::load_data(cubin.as_ptr().cast()) }, "cuModuleLoadData")?;
        Ok(Self { raw, ctx: ctx.clone() })
    }

    /// Looks up a kernel by its `extern "C"` name, as a kernel of signature `S`, which must list
    /// it among [`Signature::KERNELS`]; `sync_each_launch` synchronizes after each of its
    /// launches.
    pub(super) fn function<S: Signature>(
        &self,
        name: &str,
        sync_each_launch: bool,
    ) -> DriverResult<Kernel<S>> {
        let invalid =
            |why: &str| refused("cuModuleGetFunction", format!("the kernel {why}")).serving(name);
        if !S::KERNELS.contains(&name) {
            return Err(invalid("does not have the signature it is loaded as"));
        }
        let c_name = std::ffi::CString::new(name).map_err(|_| invalid("contains a NUL byte"))?;
        let raw = check(
            // SAFETY: `raw` is a loaded module of this value and `c_name` a NUL-terminated name.
            unsafe { result::module::get_function(self.raw, c_name) },
            "cuModuleGetFunction",
        )?;
        Ok(Kernel {
            raw,
            name: name.to_string(),
            lanes: 1,
            sync_each_launch,
            _signature: PhantomData,
        })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if bind(&self.ctx).is_ok() {
            // SAFETY: `raw` is this value's module, unloaded once here with its context bound.
            let _ = unsafe { result::module::unload(self.raw) };
        }
    }
}

// SAFETY: module handles may be used from any thread with their context bound.
unsafe impl Send for Module {}
// SAFETY: a loaded module is immutable; the driver serializes calls on its handle.
unsafe impl Sync for Module {}

/// A kernel of a loaded [`Module`] (valid while the module is), of signature `S`.
pub(super) struct Kernel<S> {
    raw: sys::CUfunction,
    name: String,
    /// Threads that work on one item (a row, a Merkle node) together.
    lanes: u32,
    /// Synchronize after each launch, so that a fault is attributed to this kernel.
    sync_each_launch: bool,
    _signature: PhantomData<S>,
}

// SAFETY: function handles are immutable driver objects.
unsafe impl<S> Send for Kernel<S> {}
// SAFETY: a function handle is immutable; launching it from several threads is allowed by the
// driver.
unsafe impl<S> Sync for Kernel<S> {}

impl<S> Kernel<S> {
    /// This kernel with `lanes` threads per item.
    pub(super) fn with_lanes(self, lanes: u32) -> Self {
        Self { lanes, ..self }
    }

    /// Threads per item: a launch over `n` items runs `n · lanes` threads.
    pub(super) fn lanes(&self) -> u32 {
        self.lanes
    }

    /// Launches the kernel with `grid` blocks of `block` threads on `stream` (nothing for an
    /// empty grid).
    ///
    /// Launch-configuration errors are returned here; with `sync_each_launch` the stream is also
    /// synchronized so that a fault is attributed to this kernel.
    ///
    /// # Safety
    /// `args` must point at values whose types and order match the kernel's parameters (the
    /// typed functions of `kernels` build them), and every device range among them must be
    /// valid for what the kernel accesses until it completes.
    pub(super) unsafe fn launch(
        &self,
        stream: &Stream,
        grid: u32,
        block: u32,
        args: &mut [*mut c_void],
    ) -> DriverResult<()> {
        if grid == 0 {
            return Ok(());
        }
        let status = driver_call!(
            stream.health(),
            Launch,
            result::launch_kernel(self.raw, (grid, 1, 1), (block, 1, 1), 0, stream.raw(), args)
        );
        check(status, "cuLaunchKernel").map_err(|e| e.serving(&self.name))?;
        if self.sync_each_launch {
            stream.synchronize().map_err(|e| e.serving(&self.name))?;
        }
        Ok(())
    }
}
