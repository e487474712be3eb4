//! One GPU as the backend uses it: context, streams, the compiled module, cached tables and
//! device buffers reused across commitments.

use std::{collections::HashMap, sync::Arc};

use cudarc::driver::{sys, CudaContext};
use miden_crypto::Felt;

use super::{
    buffer::{
        Allocator, DeviceBuffer, DeviceElement, DeviceSlice, DeviceSliceMut, Gauge, PeerSlice,
        Scratch,
    },
    driver::{bind, check, DriverResult, Event, Stream},
    health::Health,
    kernels::sig,
    launch::{Kernel, Module, Signature},
    options::CudaOptions,
    program::{compile_for_arch, HASHES},
    shared_device::SharedDevice,
    tables::{twiddle_bytes, TwiddleKey},
    transfer::{self, Lane, Ring},
};
use crate::{
    hash::{Digest, HashFunction},
    host::{stage_twiddles, HostOptions},
};

/// The kernels of one hash function.
struct HashKernels {
    hash_rows: Kernel<sig::HashRows>,
    hash_rows_partitioned: Kernel<sig::HashRows>,
    merkle_level: Kernel<sig::MerkleLevel>,
    merkle_top: Kernel<sig::MerkleTop>,
}

/// The kernels of the module, by role.
pub(super) struct Kernels {
    pub ntt_pass: Kernel<sig::NttPass>,
    pub scale_coefficients: Kernel<sig::ScaleCoefficients>,
    pub coset_ntt_first_pass: Kernel<sig::CosetNttFirstPass>,
    hashes: HashMap<HashFunction, HashKernels>,
    pub fri_spread: Kernel<sig::FriSpread>,
    pub fri_to_slots: Kernel<sig::FriToSlots>,
    /// By extension degree, 1 to 3.
    fri_fold: Vec<Kernel<sig::FriFold>>,
    pub gather_words: Kernel<sig::GatherWords>,
    /// RPO's, then RPX's.
    grind: Vec<Kernel<sig::Grind>>,
    pub copy_rows: Kernel<sig::CopyRows>,
    /// By extension degree, 1 to 3.
    deep_combine: Vec<Kernel<sig::DeepCombine>>,
    /// By extension degree, 1 to 3.
    deep_evaluate: Vec<Kernel<sig::DeepEvaluate>>,
}

impl Kernels {
    /// The kernels of `module`, launched as `options` ask (lanes per Rescue permutation, a
    /// synchronization after each launch), each signature's taken from its list in `kernels`.
    fn load(module: &Module, options: &CudaOptions) -> DriverResult<Self> {
        let sync = options.sync_each_launch;
        /// The one kernel of signature `S`.
        fn one<S: Signature>(module: &Module, sync: bool) -> DriverResult<Kernel<S>> {
            module.function(S::KERNELS[0], sync)
        }
        /// Every kernel of signature `S`, in the order of its list.
        fn all<S: Signature>(module: &Module, sync: bool) -> DriverResult<Vec<Kernel<S>>> {
            S::KERNELS.iter().map(|name| module.function(name, sync)).collect()
        }
        // the hash kernels are listed in the order of `HASHES` (rows whole, then partitioned)
        let mut rows = all::<sig::HashRows>(module, sync)?.into_iter();
        let rows_by_hash = std::iter::from_fn(|| Some((rows.next()?, rows.next()?)));
        let hashes = HASHES
            .into_iter()
            .zip(rows_by_hash)
            .zip(all::<sig::MerkleLevel>(module, sync)?)
            .zip(all::<sig::MerkleTop>(module, sync)?)
            .map(|(((hash, (hash_rows, hash_rows_partitioned)), merkle_level), merkle_top)| {
                // whole rows and Merkle nodes of RPO and RPX: one permutation per quad of lanes
                let lanes = match hash {
                    HashFunction::Rpo256 | HashFunction::Rpx256 => options.rescue_lanes.count(),
                    _ => 1,
                };
                let kernels = HashKernels {
                    hash_rows: hash_rows.with_lanes(lanes),
                    hash_rows_partitioned,
                    merkle_level: merkle_level.with_lanes(lanes),
                    merkle_top: merkle_top.with_lanes(lanes),
                };
                (hash, kernels)
            })
            .collect();
        Ok(Self {
            ntt_pass: one(module, sync)?,
            scale_coefficients: one(module, sync)?,
            coset_ntt_first_pass: one(module, sync)?,
            hashes,
            fri_spread: one(module, sync)?,
            fri_to_slots: one(module, sync)?,
            fri_fold: all(module, sync)?,
            gather_words: one(module, sync)?,
            grind: all(module, sync)?,
            copy_rows: one(module, sync)?,
            deep_combine: all(module, sync)?,
            deep_evaluate: all(module, sync)?,
        })
    }

    /// The FRI fold kernel for elements of `ext_degree` (1, 2 or 3) base components.
    pub(super) fn fri_fold(&self, ext_degree: usize) -> &Kernel<sig::FriFold> {
        &self.fri_fold[ext_degree - 1]
    }

    /// The DEEP combination kernel for a sum of `ext_degree` (1, 2 or 3) base components.
    pub(super) fn deep_combine(&self, ext_degree: usize) -> &Kernel<sig::DeepCombine> {
        &self.deep_combine[ext_degree - 1]
    }

    /// The DEEP evaluation kernel for points of `ext_degree` (1, 2 or 3) base components.
    pub(super) fn deep_evaluate(&self, ext_degree: usize) -> &Kernel<sig::DeepEvaluate> {
        &self.deep_evaluate[ext_degree - 1]
    }

    /// The row-hashing kernel for `hash` (one of [`HASHES`], as the trait methods check), whole
    /// rows or partitioned.
    pub(super) fn hash_rows(
        &self,
        hash: HashFunction,
        partitioned: bool,
    ) -> &Kernel<sig::HashRows> {
        let kernels = &self.hashes[&hash];
        if partitioned {
            &kernels.hash_rows_partitioned
        } else {
            &kernels.hash_rows
        }
    }

    /// The Merkle level kernel for `hash` (one of [`HASHES`]).
    pub(super) fn merkle_level(&self, hash: HashFunction) -> &Kernel<sig::MerkleLevel> {
        &self.hashes[&hash].merkle_level
    }

    /// The proof-of-work kernel of `hash`'s sponge coin (RPO or RPX).
    pub(super) fn grind(&self, hash: HashFunction) -> Option<&Kernel<sig::Grind>> {
        match hash {
            HashFunction::Rpo256 => Some(&self.grind[0]),
            HashFunction::Rpx256 => Some(&self.grind[1]),
            _ => None,
        }
    }

    /// The kernel building the top levels of a tree in one block, for `hash`.
    pub(super) fn merkle_top(&self, hash: HashFunction) -> &Kernel<sig::MerkleTop> {
        &self.hashes[&hash].merkle_top
    }
}

/// Device buffers kept between commitments (grown on demand, never shrunk).
#[derive(Default)]
pub(super) struct Buffers {
    /// Uploaded evaluations, transformed in place into bit-reversed coefficients.
    pub source: Scratch<Felt>,
    /// Natural-order coefficients of this GPU's columns, for the host.
    pub polys: Scratch<Felt>,
    /// LDE of this GPU's columns (of the pass's cosets): column-major, each column coset by
    /// coset.
    pub lde: Scratch<Felt>,
    /// All columns of this GPU's rows (several GPUs only), gathered from every GPU's LDE.
    pub slab: Scratch<Felt>,
    /// This GPU's rows, row-major and padded: what the host receives (per pass when the LDE is
    /// streamed, in two halves that alternate).
    pub rows: Scratch<Felt>,
    /// Leaves, indexed by absolute row.
    pub leaves: Scratch<Digest>,
    /// Merkle nodes in Winterfell's layout, this GPU's subtrees filled.
    pub nodes: Scratch<Digest>,
    /// Power tables (Montgomery words) for `scale_coefficients` and `coset_ntt_first_pass`.
    pub polys_tables: Scratch<u64>,
    pub lde_tables: Scratch<u64>,
    /// Column sources (three words per output column) for the same kernels.
    pub col_src: Scratch<u32>,
}

impl Buffers {
    /// Bytes held by all the buffers.
    pub(super) fn held(&self) -> u64 {
        self.bytes_each().iter().map(|&bytes| bytes as u64).sum()
    }

    /// Bytes of each buffer: source, polys, lde, slab, rows, leaves, nodes, polys_tables,
    /// lde_tables, col_src.
    pub(super) fn bytes_each(&self) -> [usize; 10] {
        [
            self.source.bytes(),
            self.polys.bytes(),
            self.lde.bytes(),
            self.slab.bytes(),
            self.rows.bytes(),
            self.leaves.bytes(),
            self.nodes.bytes(),
            self.polys_tables.bytes(),
            self.lde_tables.bytes(),
            self.col_src.bytes(),
        ]
    }

    /// Frees every buffer.
    pub(super) fn release(&mut self) {
        self.source.release();
        self.polys.release();
        self.lde.release();
        self.slab.release();
        self.rows.release();
        self.leaves.release();
        self.nodes.release();
        self.polys_tables.release();
        self.lde_tables.release();
        self.col_src.release();
    }
}

/// The twiddle tables of one GPU, uploaded once per transform size and direction.
#[derive(Default)]
pub(super) struct Twiddles(HashMap<TwiddleKey, DeviceBuffer<Felt>>);

impl Twiddles {
    /// The table `key` (a size-2^log_n transform, inverse or forward), uploaded on `gpu` the
    /// first time it is asked for.
    pub(super) fn table(
        &mut self,
        gpu: &Gpu,
        key: TwiddleKey,
    ) -> DriverResult<DeviceSlice<'_, Felt>> {
        let table = match self.0.entry(key) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let (log_n, inverse) = key;
                entry.insert(gpu.upload_table(&stage_twiddles(log_n, inverse))?)
            },
        };
        Ok(table.as_slice())
    }

    /// Device bytes of the tables.
    fn held(&self) -> u64 {
        self.0.values().map(|table| table.bytes() as u64).sum()
    }
}

/// Mutable per-GPU state: buffers, twiddle tables and the pinned ring.
pub(super) struct GpuState {
    pub buffers: Buffers,
    pub twiddles: Twiddles,
    pub ring: Ring,
}

impl GpuState {
    /// Device bytes held between calls: the buffers and the cached twiddle tables.
    pub(super) fn held(&self) -> u64 {
        self.buffers.held() + self.twiddles_held()
    }

    /// Device bytes of the cached twiddle tables.
    pub(super) fn twiddles_held(&self) -> u64 {
        self.twiddles.held()
    }

    /// Bytes of the twiddle tables `keys` (`(log_n, inverse)`) that are not cached yet.
    pub(super) fn missing_twiddle_bytes(&self, keys: &[TwiddleKey]) -> u64 {
        keys.iter()
            .filter(|key| !self.twiddles.0.contains_key(key))
            .map(|&(log_n, _)| twiddle_bytes(log_n))
            .sum()
    }

    /// Frees every buffer and every cached twiddle table but `keep`.
    pub(super) fn release_all_but(&mut self, keep: &[TwiddleKey]) {
        self.buffers.release();
        self.twiddles.0.retain(|key, _| keep.contains(key));
    }
}

/// One GPU.
pub(super) struct Gpu {
    pub ordinal: usize,
    pub name: String,
    /// The architecture NVRTC compiles for (`sm_90` on Hopper).
    pub arch: String,
    pub ctx: Arc<CudaContext>,
    /// Where this committer's device buffers on the GPU are allocated and counted.
    pub alloc: Allocator,
    /// What every committer of the process holds on this GPU, and their turns.
    pub device: Arc<SharedDevice>,
    /// Kernels and the peer copies that feed them.
    pub compute: Stream,
    /// A second kernel stream for kernels that may overlap the compute stream's: every other
    /// row-hash chunk, so that the last wave of one chunk's blocks shares the GPU with the
    /// next chunk's first.
    pub side: Stream,
    /// Host transfers.
    pub copy: Stream,
    /// The health its committer's GPUs share.
    pub health: Arc<Health>,
    pub kernels: Kernels,
    /// The other GPUs whose memory this one's kernels may read (peer access enabled).
    peers: Vec<Arc<CudaContext>>,
    /// How the host vectors this GPU's downloads fill are reserved.
    pub host: HostOptions,
    _module: Module,
}

impl Gpu {
    /// Opens device `ordinal`, compiles (or reuses) the program `options` describe for its
    /// architecture and loads it; its driver wrappers share `health`.
    pub(super) fn open(
        ordinal: usize,
        options: &CudaOptions,
        health: &Arc<Health>,
    ) -> DriverResult<(Self, GpuState)> {
        let ctx = check(CudaContext::new(ordinal), "cuCtxRetain")?;
        let name = check(ctx.name(), "cuDeviceGetName")?;
        let (major, minor) = check(ctx.compute_capability(), "cuDeviceGetAttribute")?;
        let arch = format!("sm_{major}{minor}");
        let cubin = compile_for_arch(&arch, options)?;
        let module = Module::load(&ctx, &cubin)?;
        let kernels = Kernels::load(&module, options)?;
        let device = SharedDevice::of(ordinal);
        let gpu = Self {
            ordinal,
            name,
            arch,
            compute: Stream::new(&ctx, health)?,
            side: Stream::new(&ctx, health)?,
            copy: Stream::new(&ctx, health)?,
            health: health.clone(),
            kernels,
            peers: Vec::new(),
            host: options.host,
            _module: module,
            alloc: Allocator {
                ctx: ctx.clone(),
                gauge: Arc::new(Gauge::within(device.gauge.clone())),
                health: health.clone(),
            },
            device,
            ctx,
        };
        let state = GpuState {
            buffers: Buffers::default(),
            twiddles: Twiddles::default(),
            ring: Ring::new(&gpu.ctx, health)?,
        };
        Ok((gpu, state))
    }

    /// `slice` as a range this GPU's kernels may read: its own, or a peer's whose memory it
    /// reaches directly; `None` otherwise (a copy must move it).
    pub(super) fn readable<'a, T: DeviceElement>(
        &self,
        slice: DeviceSlice<'a, T>,
    ) -> Option<PeerSlice<'a, T>> {
        let reachable = Arc::ptr_eq(slice.ctx(), &self.ctx)
            || self.peers.iter().any(|peer| Arc::ptr_eq(peer, slice.ctx()));
        // SAFETY: the slice is this GPU's, or its GPU's memory is open to this one.
        reachable.then(|| unsafe { PeerSlice::readable(slice) })
    }

    /// Lets each of `gpus` reach the others' memory directly where the hardware allows (NVLink
    /// or PCIe peer-to-peer), and records the peers each one reaches ([`Self::readable`]);
    /// elsewhere copies stage through the host.
    pub(super) fn connect_peers(gpus: &mut [Gpu]) -> DriverResult<()> {
        let mut reached = Vec::new();
        for (a, gpu) in gpus.iter().enumerate() {
            for peer in gpus.iter().filter(|peer| peer.ordinal != gpu.ordinal) {
                if gpu.enable_peer_access(peer)? {
                    reached.push((a, peer.ctx.clone()));
                }
            }
        }
        for (a, peer) in reached {
            gpus[a].peers.push(peer);
        }
        Ok(())
    }

    /// Lets this GPU's kernels and copies reach `peer`'s memory directly when the hardware
    /// allows; whether it does.
    fn enable_peer_access(&self, peer: &Gpu) -> DriverResult<bool> {
        let mut can = 0;
        check(
            // SAFETY: `can` is a live integer to write, and both devices are handles of open
            // contexts.
            unsafe {
                sys::cuDeviceCanAccessPeer(&mut can, self.ctx.cu_device(), peer.ctx.cu_device())
                    .result()
            },
            "cuDeviceCanAccessPeer",
        )?;
        if can != 1 {
            return Ok(false);
        }
        bind(&self.ctx)?;
        // SAFETY: the context is bound and `peer`'s context is live; the call only changes what
        // this context may reach.
        match unsafe { sys::cuCtxEnablePeerAccess(peer.ctx.cu_ctx(), 0) } {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
                Ok(true)
            },
            other => check(other.result(), "cuCtxEnablePeerAccess").map(|()| true),
        }
    }

    /// Uploads `values` into a new device buffer of their length (synchronously: small tables
    /// only).
    pub(super) fn upload_table<T: DeviceElement>(
        &self,
        values: &[T],
    ) -> DriverResult<DeviceBuffer<T>> {
        let mut buffer = DeviceBuffer::new(&self.alloc, values.len())?;
        self.upload_into(buffer.as_slice_mut(), values)?;
        Ok(buffer)
    }

    /// Copies small host data into `dst` (of the same length, else [`crate::GpuError::Device`])
    /// on the compute stream and waits for it.
    pub(super) fn upload_into<T: DeviceElement>(
        &self,
        dst: DeviceSliceMut<'_, T>,
        values: &[T],
    ) -> DriverResult<()> {
        // SAFETY: `values` outlives the copy (we synchronize before returning).
        unsafe { self.enqueue_upload(&self.compute, dst, values)? };
        self.compute.synchronize()
    }

    /// Enqueues the copy of `values` into `dst` (of the same length, else
    /// [`crate::GpuError::Device`]) on `stream`, by DMA from where they lie.
    ///
    /// # Safety
    /// `values` must stay valid and unchanged until `stream` has passed the copy.
    unsafe fn enqueue_upload<T: DeviceElement>(
        &self,
        stream: &Stream,
        dst: DeviceSliceMut<'_, T>,
        values: &[T],
    ) -> DriverResult<()> {
        transfer::check_lengths(dst.len(), values.len())?;
        bind(&self.ctx)?;
        // SAFETY: `values` holds `dst.len()` elements, valid and unchanged until the copy ends
        // (the caller's promise).
        unsafe { stream.copy_htod(dst, values.as_ptr()) }
    }

    /// The words of `src`, once the compute stream's work is done (small results only: the
    /// copy does not go through the pinned ring).
    pub(super) fn download_table(&self, src: DeviceSlice<'_, u64>) -> DriverResult<Vec<u64>> {
        bind(&self.ctx)?;
        let mut out = vec![0u64; src.len()];
        if !out.is_empty() {
            // SAFETY: `out` holds `src.len()` words and outlives the copy (we synchronize below).
            unsafe { self.compute.copy_dtoh(out.as_mut_ptr(), src)? };
        }
        self.compute.synchronize()?;
        Ok(out)
    }

    /// A timing event recorded now on the compute stream.
    pub(super) fn mark(&self) -> DriverResult<Event> {
        let event = Event::timed(&self.ctx, &self.health)?;
        event.record(&self.compute)?;
        Ok(event)
    }

    /// An event recorded now on the compute stream: what other streams wait on.
    pub(super) fn completion(&self) -> DriverResult<Event> {
        self.completion_on(&self.compute)
    }

    /// An event recorded now on `stream`, one of this GPU's.
    pub(super) fn completion_on(&self, stream: &Stream) -> DriverResult<Event> {
        let event = self.event()?;
        event.record(stream)?;
        Ok(event)
    }

    /// A new synchronization event on this GPU.
    pub(super) fn event(&self) -> DriverResult<Event> {
        Event::new(&self.ctx, &self.health)
    }

    /// Waits, within the deadline and never struck by the fault injector, until every stream of
    /// this GPU is idle: after a failed call, so that none of its work still runs when its
    /// buffers are freed or reused.
    pub(super) fn drain(&self) -> DriverResult<()> {
        bind(&self.ctx)?;
        [&self.compute, &self.side, &self.copy].into_iter().try_for_each(Stream::drain)
    }

    /// This GPU's side of a host transfer: its copy stream and `ring`.
    pub(super) fn copy_lane<'a>(&'a self, ring: &'a mut Ring) -> Lane<'a> {
        Lane { ctx: &self.ctx, stream: &self.copy, ring }
    }

    /// Uploads `values` into `dst` (of the same length) on the copy stream through `ring` (see
    /// [`transfer::upload`]); kernels wait for it through [`Gpu::wait_for_uploads`].
    pub(super) fn upload<T: DeviceElement>(
        &self,
        ring: &mut Ring,
        dst: DeviceSliceMut<'_, T>,
        values: &[T],
    ) -> DriverResult<()> {
        transfer::upload(&mut self.copy_lane(ring), dst, values)
    }

    /// Enqueues the upload of `values` into `dst` (of the same length) on the copy stream, by DMA
    /// from where they lie, with no staging; kernels wait for it through
    /// [`Gpu::wait_for_uploads`].
    ///
    /// # Safety
    /// `values` must lie in memory registered with the driver and stay valid and unchanged until
    /// the copy stream has passed the copy.
    pub(super) unsafe fn upload_registered<T: DeviceElement>(
        &self,
        dst: DeviceSliceMut<'_, T>,
        values: &[T],
    ) -> DriverResult<()> {
        // SAFETY: the caller's promise; registered memory makes the copy a DMA alone
        unsafe { self.enqueue_upload(&self.copy, dst, values) }
    }

    /// Makes later work on the compute stream wait for every upload enqueued so far on the copy
    /// stream; returns the event waited on, which the caller keeps while it enqueues that work.
    pub(super) fn wait_for_uploads(&self) -> DriverResult<Event> {
        let uploaded = self.event()?;
        uploaded.record(&self.copy)?;
        self.compute.wait(&uploaded)?;
        Ok(uploaded)
    }
}
