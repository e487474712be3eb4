//! One GPU as the backend uses it: context, streams, the compiled module, cached tables and
//! device buffers reused across commitments.

use std::{collections::HashMap, sync::Arc};

use cudarc::driver::{sys, CudaContext};

use super::{
    driver::{bind, check, Allocator, DeviceBuffer, DriverResult, Event, Gauge, Scratch, Stream},
    launch::{Kernel, Module},
    program::{compile_for_arch, rescue_lanes, HASHES},
    transfer::{self, Lane, Ring},
};
use crate::{hash::HashFunction, host::stage_twiddles};

/// The kernels of one hash function.
struct HashKernels {
    hash_rows: Kernel,
    hash_rows_partitioned: Kernel,
    merkle_level: Kernel,
}

/// The kernels of the module, by role.
pub(super) struct Kernels {
    pub ntt_pass: Kernel,
    pub scale_coefficients: Kernel,
    pub coset_ntt_first_pass: Kernel,
    hashes: HashMap<HashFunction, HashKernels>,
    pub fri_spread: Kernel,
    pub fri_to_slots: Kernel,
    fri_fold: [Kernel; 3],
    pub gather_words: Kernel,
    deep_combine: [Kernel; 3],
    deep_evaluate: [Kernel; 3],
}

impl Kernels {
    fn load(module: &Module) -> DriverResult<Self> {
        let k = |name: &str| module.function(name);
        let mut hashes = HashMap::new();
        for hash in HASHES {
            let symbol = hash.ident();
            // whole rows and Merkle nodes of RPO and RPX: one permutation per quad of lanes
            let lanes = match hash {
                HashFunction::Rpo256 | HashFunction::Rpx256 => rescue_lanes(),
                _ => 1,
            };
            let kernels = HashKernels {
                hash_rows: k(&format!("hash_rows_{symbol}"))?.with_lanes(lanes),
                hash_rows_partitioned: k(&format!("hash_rows_{symbol}_partitioned"))?,
                merkle_level: k(&format!("merkle_level_{symbol}"))?.with_lanes(lanes),
            };
            hashes.insert(hash, kernels);
        }
        Ok(Self {
            ntt_pass: k("ntt_pass")?,
            scale_coefficients: k("scale_coefficients")?,
            coset_ntt_first_pass: k("coset_ntt_first_pass")?,
            hashes,
            fri_spread: k("fri_spread")?,
            fri_to_slots: k("fri_to_slots")?,
            fri_fold: [k("fri_fold_base")?, k("fri_fold_quadratic")?, k("fri_fold_cubic")?],
            gather_words: k("gather_words")?,
            deep_combine: [
                k("deep_combine_base")?,
                k("deep_combine_quadratic")?,
                k("deep_combine_cubic")?,
            ],
            deep_evaluate: [
                k("deep_evaluate_base")?,
                k("deep_evaluate_quadratic")?,
                k("deep_evaluate_cubic")?,
            ],
        })
    }

    /// The FRI fold kernel for elements of `ext_degree` (1, 2 or 3) base components.
    pub(super) fn fri_fold(&self, ext_degree: usize) -> &Kernel {
        &self.fri_fold[ext_degree - 1]
    }

    /// The DEEP combination kernel for a sum of `ext_degree` (1, 2 or 3) base components.
    pub(super) fn deep_combine(&self, ext_degree: usize) -> &Kernel {
        &self.deep_combine[ext_degree - 1]
    }

    /// The DEEP evaluation kernel for points of `ext_degree` (1, 2 or 3) base components.
    pub(super) fn deep_evaluate(&self, ext_degree: usize) -> &Kernel {
        &self.deep_evaluate[ext_degree - 1]
    }

    /// The row-hashing kernel for `hash` (one of [`HASHES`], as the trait methods check), whole
    /// rows or partitioned.
    pub(super) fn hash_rows(&self, hash: HashFunction, partitioned: bool) -> &Kernel {
        let kernels = &self.hashes[&hash];
        if partitioned {
            &kernels.hash_rows_partitioned
        } else {
            &kernels.hash_rows
        }
    }

    /// The Merkle level kernel for `hash` (one of [`HASHES`]).
    pub(super) fn merkle_level(&self, hash: HashFunction) -> &Kernel {
        &self.hashes[&hash].merkle_level
    }
}

/// Device buffers kept between commitments (grown on demand, never shrunk).
#[derive(Default)]
pub(super) struct Buffers {
    /// Uploaded evaluations, transformed in place into bit-reversed coefficients.
    pub source: Scratch,
    /// Natural-order coefficients of this GPU's columns, for the host.
    pub polys: Scratch,
    /// LDE of this GPU's columns (of the pass's cosets): column-major, each column coset by
    /// coset.
    pub lde: Scratch,
    /// All columns of this GPU's rows (several GPUs only), gathered from every GPU's LDE.
    pub slab: Scratch,
    /// This GPU's rows, row-major and padded: what the host receives (per pass when the LDE is
    /// streamed, in two halves that alternate).
    pub rows: Scratch,
    /// Leaves (4 words each), indexed by absolute row.
    pub leaves: Scratch,
    /// Merkle nodes in Winterfell's layout, this GPU's subtrees filled.
    pub nodes: Scratch,
    /// Power tables and column sources for `scale_coefficients` and `coset_ntt_first_pass`.
    pub polys_tables: Scratch,
    pub lde_tables: Scratch,
    pub col_src: Scratch,
}

impl Buffers {
    /// Bytes held by all the buffers.
    pub(super) fn held(&self) -> u64 {
        self.bytes_each().iter().map(|&bytes| bytes as u64).sum()
    }

    /// Bytes of each buffer: source, polys, lde, slab, rows, leaves, nodes, polys_tables,
    /// lde_tables, col_src.
    pub(super) fn bytes_each(&self) -> [usize; 10] {
        self.all().map(Scratch::bytes)
    }

    /// Frees every buffer.
    pub(super) fn release(&mut self) {
        for scratch in [
            &mut self.source,
            &mut self.polys,
            &mut self.lde,
            &mut self.slab,
            &mut self.rows,
            &mut self.leaves,
            &mut self.nodes,
            &mut self.polys_tables,
            &mut self.lde_tables,
            &mut self.col_src,
        ] {
            scratch.release();
        }
    }

    /// The buffers, in the order of [`Self::bytes_each`].
    fn all(&self) -> [&Scratch; 10] {
        [
            &self.source,
            &self.polys,
            &self.lde,
            &self.slab,
            &self.rows,
            &self.leaves,
            &self.nodes,
            &self.polys_tables,
            &self.lde_tables,
            &self.col_src,
        ]
    }
}

/// Mutable per-GPU state: buffers, twiddle tables and the pinned ring.
pub(super) struct GpuState {
    pub buffers: Buffers,
    twiddles: HashMap<TwiddleKey, DeviceBuffer>,
    pub ring: Ring,
}

impl GpuState {
    /// Device bytes held between calls: the buffers and the cached twiddle tables.
    pub(super) fn held(&self) -> u64 {
        self.buffers.held() + self.twiddles_held()
    }

    /// Device bytes of the cached twiddle tables.
    pub(super) fn twiddles_held(&self) -> u64 {
        self.twiddles.values().map(|table| table.bytes() as u64).sum()
    }

    /// Bytes of the twiddle tables `keys` (`(log_n, inverse)`) that are not cached yet.
    pub(super) fn missing_twiddle_bytes(&self, keys: &[TwiddleKey]) -> u64 {
        keys.iter()
            .filter(|key| !self.twiddles.contains_key(key))
            .map(|&(log_n, _)| twiddle_bytes(log_n))
            .sum()
    }

    /// Frees every buffer and every cached twiddle table but `keep`.
    pub(super) fn release_all_but(&mut self, keep: &[TwiddleKey]) {
        self.buffers.release();
        self.twiddles.retain(|key, _| keep.contains(key));
    }
}

/// A twiddle table's size and direction: `(log_n, inverse)`.
pub(super) type TwiddleKey = (u32, bool);

/// Bytes of the twiddle table of a size-2^log_n transform (`stage_twiddles`: n words).
pub(super) fn twiddle_bytes(log_n: u32) -> u64 {
    8 << log_n
}

/// Bytes of the twiddle tables `keys`.
pub(super) fn twiddles_bytes(keys: &[TwiddleKey]) -> u64 {
    keys.iter().map(|&(log_n, _)| twiddle_bytes(log_n)).sum()
}

/// One GPU.
pub(super) struct Gpu {
    pub ordinal: usize,
    pub name: String,
    pub ctx: Arc<CudaContext>,
    /// Where this committer's device buffers on the GPU are allocated and counted.
    pub alloc: Allocator,
    /// Kernels and the peer copies that feed them.
    pub compute: Stream,
    /// A second kernel stream for kernels that may overlap the compute stream's: every other
    /// row-hash chunk, so that the last wave of one chunk's blocks shares the GPU with the
    /// next chunk's first.
    pub side: Stream,
    /// Host transfers.
    pub copy: Stream,
    pub kernels: Kernels,
    _module: Module,
}

impl Gpu {
    /// Opens device `ordinal`, compiles (or reuses) the program for its architecture and loads it.
    pub(super) fn open(ordinal: usize) -> DriverResult<(Self, GpuState)> {
        let ctx = check(CudaContext::new(ordinal), "cuCtxRetain")?;
        let name = check(ctx.name(), "cuDeviceGetName")?;
        let (major, minor) = check(ctx.compute_capability(), "cuDeviceGetAttribute")?;
        let cubin = compile_for_arch(&format!("sm_{major}{minor}"))?;
        let module = Module::load(&ctx, &cubin)?;
        let kernels = Kernels::load(&module)?;
        let gpu = Self {
            ordinal,
            name,
            compute: Stream::new(&ctx)?,
            side: Stream::new(&ctx)?,
            copy: Stream::new(&ctx)?,
            kernels,
            _module: module,
            alloc: Allocator { ctx: ctx.clone(), gauge: Arc::new(Gauge::default()) },
            ctx,
        };
        let state = GpuState {
            buffers: Buffers::default(),
            twiddles: HashMap::new(),
            ring: Ring::new(&gpu.ctx)?,
        };
        Ok((gpu, state))
    }

    /// Lets this GPU's kernels and copies reach `peer`'s memory directly when the hardware
    /// allows (NVLink or PCIe peer-to-peer); copies fall back to staging through the host.
    pub(super) fn enable_peer_access(&self, peer: &Gpu) -> DriverResult<()> {
        let mut can = 0;
        check(
            unsafe {
                sys::cuDeviceCanAccessPeer(&mut can, self.ctx.cu_device(), peer.ctx.cu_device())
                    .result()
            },
            "cuDeviceCanAccessPeer",
        )?;
        if can == 1 {
            bind(&self.ctx)?;
            match unsafe { sys::cuCtxEnablePeerAccess(peer.ctx.cu_ctx(), 0) } {
                sys::CUresult::CUDA_SUCCESS
                | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {},
                other => check(other.result(), "cuCtxEnablePeerAccess")?,
            }
        }
        Ok(())
    }

    /// Uploads `words` (`u64` or `Felt`, in Montgomery form) into a new device buffer
    /// (synchronously: small tables only).
    pub(super) fn upload_table<T: Copy>(&self, words: &[T]) -> DriverResult<DeviceBuffer> {
        let buffer = DeviceBuffer::new(&self.alloc, std::mem::size_of_val(words))?;
        self.upload_into(buffer.ptr(), words)?;
        Ok(buffer)
    }

    /// Copies small host data to `dst` (a device range of at least its size) on the compute
    /// stream and waits for it.
    pub(super) fn upload_into<T: Copy>(
        &self,
        dst: sys::CUdeviceptr,
        data: &[T],
    ) -> DriverResult<()> {
        bind(&self.ctx)?;
        // SAFETY: `data` outlives the copy (we synchronize before returning).
        unsafe { self.compute.copy_htod(dst, data.as_ptr().cast(), std::mem::size_of_val(data))? };
        self.compute.synchronize()
    }

    /// The twiddle table `key` (a size-2^log_n transform, inverse or forward), cached per GPU.
    pub(super) fn twiddles(
        &self,
        state: &mut GpuState,
        key: TwiddleKey,
    ) -> DriverResult<sys::CUdeviceptr> {
        if let Some(table) = state.twiddles.get(&key) {
            return Ok(table.ptr());
        }
        let (log_n, inverse) = key;
        let table = self.upload_table(&stage_twiddles(log_n, inverse))?;
        let ptr = table.ptr();
        state.twiddles.insert(key, table);
        Ok(ptr)
    }

    /// A timing event recorded now on the compute stream.
    pub(super) fn mark(&self) -> DriverResult<Event> {
        let event = Event::timed(&self.ctx)?;
        event.record(&self.compute)?;
        Ok(event)
    }

    /// An event recorded now on the compute stream: what other streams wait on.
    pub(super) fn completion(&self) -> DriverResult<Event> {
        self.completion_on(&self.compute)
    }

    /// An event recorded now on `stream`, one of this GPU's.
    pub(super) fn completion_on(&self, stream: &Stream) -> DriverResult<Event> {
        let event = Event::new(&self.ctx)?;
        event.record(stream)?;
        Ok(event)
    }

    /// This GPU's side of a host transfer: its copy stream and `ring`.
    pub(super) fn copy_lane<'a>(&'a self, ring: &'a mut Ring) -> Lane<'a> {
        Lane { ctx: &self.ctx, stream: &self.copy, ring }
    }

    /// Uploads `bytes` to `dst` on the copy stream through `ring` (see [`transfer::upload`]);
    /// kernels wait for it through [`Gpu::wait_for_uploads`].
    pub(super) fn upload(
        &self,
        ring: &mut Ring,
        dst: sys::CUdeviceptr,
        bytes: &[u8],
    ) -> DriverResult<()> {
        transfer::upload(&mut self.copy_lane(ring), dst, bytes)
    }

    /// Makes later work on the compute stream wait for every upload enqueued so far on the copy
    /// stream; returns the event waited on, which the caller keeps while it enqueues that work.
    pub(super) fn wait_for_uploads(&self) -> DriverResult<Event> {
        let uploaded = Event::new(&self.ctx)?;
        uploaded.record(&self.copy)?;
        self.compute.wait(&uploaded)?;
        Ok(uploaded)
    }
}
