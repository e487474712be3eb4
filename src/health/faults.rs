//! Fault injection: a [`GpuCommitter`] wrapper that fails chosen calls, so tests can show that a
//! GPU failure mid-proof ends in a typed error or a CPU fallback, never a wrong proof or a hang.

use std::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering},
    Arc,
};

use miden_crypto::Felt;
use winter_math::FieldElement;

use crate::{
    backend::Backend,
    committer::{
        composition::{CompositionRequest, KeptEvaluations},
        deep::{CombineRequest, EvaluateRequest},
        fri::{FoldingChannel, FriLayers, FriRequest, KeptLayers, LayerOpening},
        grind::GrindRequest,
        CommitRequest, Commitment, GpuCommitter, Keep, KeptRows, KeptTree, LdeRows, PolyInput,
        RowHashing,
    },
    error::{GpuError, Result},
    hash::{Digest, HashFunction},
    host::DeviceHold,
};

/// The failures a backend can meet, as the typed error each one produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The GPU or its driver is gone.
    DeviceMissing,
    /// A device allocation failed.
    Allocation,
    /// A kernel launch or execution failed.
    KernelFailure,
    /// The device was lost while work was in flight.
    DeviceLost,
}

impl Fault {
    /// Every kind of fault.
    pub const ALL: [Fault; 4] =
        [Self::DeviceMissing, Self::Allocation, Self::KernelFailure, Self::DeviceLost];

    /// The error a backend reports for this fault.
    pub fn error(self, backend: Backend) -> GpuError {
        match self {
            Self::DeviceMissing => GpuError::BackendUnavailable {
                backend,
                reason: "device disappeared (injected fault)".into(),
            },
            Self::Allocation => {
                GpuError::OutOfMemory { memory: "device", needed: 1 << 40, available: 0 }
            },
            Self::KernelFailure => {
                GpuError::internal(backend, "kernel launch", "failed (injected fault)")
            },
            Self::DeviceLost => {
                GpuError::internal(backend, "commit", "device lost mid-commit (injected fault)")
            },
        }
    }
}

/// Wraps a committer and fails its `fail_on`-th call (0-based, counting every trait call that
/// computes, and the openings of FRI layers and the reads of LDE rows and Merkle trees kept on the
/// device as one call each) with `fault`; all other calls go to the wrapped committer. A failing FRI commit
/// phase fails after its first layer's root went to the channel.
pub struct FaultyCommitter {
    inner: Arc<dyn GpuCommitter>,
    counter: Arc<CallCounter>,
}

/// The calls made so far and the one that fails.
#[derive(Debug)]
struct CallCounter {
    backend: Backend,
    fault: Fault,
    fail_on: usize,
    calls: AtomicUsize,
}

impl CallCounter {
    fn check(&self) -> Result<()> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == self.fail_on {
            return Err(self.fault.error(self.backend));
        }
        Ok(())
    }
}

impl FaultyCommitter {
    /// A committer that fails call number `fail_on` with `fault`.
    pub fn new(inner: Arc<dyn GpuCommitter>, fault: Fault, fail_on: usize) -> Self {
        let counter =
            CallCounter { backend: inner.backend(), fault, fail_on, calls: AtomicUsize::new(0) };
        Self { inner, counter: Arc::new(counter) }
    }

    /// How many computing calls were made so far.
    pub fn calls(&self) -> usize {
        self.counter.calls.load(Ordering::SeqCst)
    }

    fn check(&self) -> Result<()> {
        self.counter.check()
    }
}

/// The uses of something a [`FaultyCommitter`] left on the device (FRI layers, LDE rows, trees): the
/// first counts as one call (and fails if it is the chosen one, as do the uses after it).
#[derive(Debug)]
struct KeptUses {
    counter: Arc<CallCounter>,
    counted: AtomicBool,
    failed: AtomicBool,
}

impl KeptUses {
    fn new(counter: Arc<CallCounter>) -> Self {
        Self { counter, counted: AtomicBool::new(false), failed: AtomicBool::new(false) }
    }

    fn check(&self) -> Result<()> {
        if !self.counted.swap(true, Ordering::SeqCst) && self.counter.check().is_err() {
            self.failed.store(true, Ordering::SeqCst);
        }
        match self.failed.load(Ordering::SeqCst) {
            true => Err(self.counter.fault.error(self.counter.backend)),
            false => Ok(()),
        }
    }
}

/// Kept FRI layers opened through [`KeptUses`].
struct FaultyKeptLayers {
    inner: Box<dyn KeptLayers>,
    uses: KeptUses,
}

impl KeptLayers for FaultyKeptLayers {
    fn open(&self, layer: usize, positions: &[usize]) -> Result<LayerOpening> {
        self.uses.check()?;
        self.inner.open(layer, positions)
    }
}

/// Kept LDE rows read through [`KeptUses`].
#[derive(Debug)]
struct FaultyKeptRows {
    inner: Arc<dyn KeptRows>,
    uses: KeptUses,
}

impl KeptRows for FaultyKeptRows {
    fn read(&self, positions: &[usize]) -> Result<Vec<Vec<Felt>>> {
        self.uses.check()?;
        self.inner.read(positions)
    }
}

/// A kept Merkle tree read through [`KeptUses`].
#[derive(Debug)]
struct FaultyKeptTree {
    inner: Arc<dyn KeptTree>,
    uses: KeptUses,
}

impl KeptTree for FaultyKeptTree {
    fn num_leaves(&self) -> usize {
        self.inner.num_leaves()
    }

    fn read(&self, leaves: &[usize], nodes: &[usize]) -> Result<(Vec<Digest>, Vec<Digest>)> {
        self.uses.check()?;
        self.inner.read(leaves, nodes)
    }
}

/// Kept composition evaluations read through [`KeptUses`].
#[derive(Debug)]
struct FaultyKeptEvaluations {
    inner: Arc<dyn KeptEvaluations>,
    uses: KeptUses,
}

impl KeptEvaluations for FaultyKeptEvaluations {
    fn components(&self) -> usize {
        self.inner.components()
    }

    fn ce_size(&self) -> usize {
        self.inner.ce_size()
    }

    fn read(&self) -> Result<Vec<Felt>> {
        self.uses.check()?;
        self.inner.read()
    }
}

/// `request` with the kept evaluations a [`FaultyCommitter`] wrapped unwrapped for its inner
/// committer, after the check of their use (others as they are).
fn unwrapped_input<'a>(request: &CommitRequest<'a>) -> Result<CommitRequest<'a>> {
    let PolyInput::KeptComposition { evaluations, column_len, num_columns } = request.input else {
        return Ok(*request);
    };
    let Some(faulty) = (evaluations as &dyn std::any::Any).downcast_ref::<FaultyKeptEvaluations>()
    else {
        return Ok(*request);
    };
    faulty.uses.check()?;
    let evaluations = faulty.inner.as_ref();
    let input = PolyInput::KeptComposition { evaluations, column_len, num_columns };
    Ok(CommitRequest { input, ..*request })
}

/// The rows a [`FaultyCommitter`] wrapped, for its inner committer (others as they are).
fn unwrapped(rows: &dyn KeptRows) -> &dyn KeptRows {
    match (rows as &dyn std::any::Any).downcast_ref::<FaultyKeptRows>() {
        Some(faulty) => faulty.inner.as_ref(),
        None => rows,
    }
}

impl GpuCommitter for FaultyCommitter {
    fn backend(&self) -> Backend {
        self.inner.backend()
    }

    fn device_name(&self) -> String {
        let (fault, call) = (self.counter.fault, self.counter.fail_on);
        format!("{} (fault {fault:?} on call {call})", self.inner.device_name())
    }

    fn commit(&self, request: &CommitRequest<'_>) -> Result<Commitment> {
        self.check()?;
        self.inner.commit(&unwrapped_input(request)?)
    }

    fn commit_keeping(&self, request: &CommitRequest<'_>, keep: Keep) -> Result<Commitment> {
        self.check()?;
        let mut commitment = self.inner.commit_keeping(&unwrapped_input(request)?, keep)?;
        commitment.kept_rows = commitment.kept_rows.take().map(|inner| {
            let uses = KeptUses::new(self.counter.clone());
            Arc::new(FaultyKeptRows { inner, uses }) as Arc<dyn KeptRows>
        });
        commitment.kept_tree = commitment.kept_tree.take().map(|inner| {
            let uses = KeptUses::new(self.counter.clone());
            Arc::new(FaultyKeptTree { inner, uses }) as Arc<dyn KeptTree>
        });
        Ok(commitment)
    }

    fn evaluate_polys(&self, request: &EvaluateRequest<'_>) -> Result<Vec<Felt>> {
        self.check()?;
        self.inner.evaluate_polys(request)
    }

    fn evaluates_compositions(&self) -> bool {
        self.inner.evaluates_compositions()
    }

    fn evaluate_composition(
        &self,
        request: &CompositionRequest<'_>,
    ) -> Result<Arc<dyn KeptEvaluations>> {
        self.check()?;
        let request = CompositionRequest {
            main: unwrapped(request.main),
            aux: request.aux.map(unwrapped),
            ..request.clone()
        };
        let inner = self.inner.evaluate_composition(&request)?;
        let uses = KeptUses::new(self.counter.clone());
        Ok(Arc::new(FaultyKeptEvaluations { inner, uses }))
    }

    fn combine_polys(&self, request: &CombineRequest<'_>) -> Result<Vec<Felt>> {
        self.check()?;
        self.inner.combine_polys(request)
    }

    fn hash_rows(
        &self,
        lde: &LdeRows,
        row_hashing: RowHashing,
        hash: HashFunction,
    ) -> Result<Vec<Digest>> {
        self.check()?;
        self.inner.hash_rows(lde, row_hashing, hash)
    }

    fn build_tree(&self, leaves: &[Digest], hash: HashFunction) -> Result<Vec<Digest>> {
        self.check()?;
        self.inner.build_tree(leaves, hash)
    }

    fn grind(&self, request: &GrindRequest) -> Result<u64> {
        self.check()?;
        self.inner.grind(request)
    }

    fn commit_fri(
        &self,
        request: &FriRequest<'_>,
        channel: &mut FoldingChannel<'_>,
    ) -> Result<FriLayers> {
        // A fault here strikes mid-phase, after the first layer's root reached the channel: the
        // caller has to replay that layer's challenge when it recomputes.
        let Err(error) = self.check() else {
            let mut layers = self.inner.commit_fri(request, channel)?;
            layers.kept = layers.kept.take().map(|inner| {
                let uses = KeptUses::new(self.counter.clone());
                Box::new(FaultyKeptLayers { inner, uses }) as Box<dyn KeptLayers>
            });
            return Ok(layers);
        };
        let mut roots_sent = 0;
        let _ = self.inner.commit_fri(request, &mut |root| {
            roots_sent += 1;
            match roots_sent {
                1 => channel(root),
                _ => vec![Felt::ONE; request.components.len()],
            }
        });
        Err(error)
    }

    fn hold_devices(&self) -> DeviceHold<'_> {
        self.inner.hold_devices()
    }
}

// WRONG RESULTS
// ================================================================================================

/// Wraps a committer and returns every commitment with a wrong Merkle root (its first element
/// plus one, nothing else recomputed) as a success: a device bug the backend cannot see, which
/// only the proof's self-check can catch. Every other call goes to the wrapped committer.
pub struct WrongRootCommitter {
    inner: Arc<dyn GpuCommitter>,
}

impl WrongRootCommitter {
    /// A committer whose commitments are `inner`'s with a wrong root.
    pub fn new(inner: Arc<dyn GpuCommitter>) -> Self {
        Self { inner }
    }

    fn corrupt(mut commitment: Commitment) -> Commitment {
        if let Some(root) = commitment.nodes.get_mut(1) {
            let mut felts = root.to_felts();
            felts[0] += Felt::ONE;
            *root = Digest::from_felts(felts);
        }
        commitment
    }
}

impl GpuCommitter for WrongRootCommitter {
    fn backend(&self) -> Backend {
        self.inner.backend()
    }

    fn device_name(&self) -> String {
        format!("{} with wrong roots", self.inner.device_name())
    }

    fn commit(&self, request: &CommitRequest<'_>) -> Result<Commitment> {
        self.inner.commit(request).map(Self::corrupt)
    }

    fn commit_keeping(&self, request: &CommitRequest<'_>, keep: Keep) -> Result<Commitment> {
        self.inner.commit_keeping(request, keep).map(Self::corrupt)
    }

    fn evaluate_polys(&self, request: &EvaluateRequest<'_>) -> Result<Vec<Felt>> {
        self.inner.evaluate_polys(request)
    }

    fn evaluates_compositions(&self) -> bool {
        self.inner.evaluates_compositions()
    }

    fn evaluate_composition(
        &self,
        request: &CompositionRequest<'_>,
    ) -> Result<Arc<dyn KeptEvaluations>> {
        self.inner.evaluate_composition(request)
    }

    fn combine_polys(&self, request: &CombineRequest<'_>) -> Result<Vec<Felt>> {
        self.inner.combine_polys(request)
    }

    fn hash_rows(
        &self,
        lde: &LdeRows,
        row_hashing: RowHashing,
        hash: HashFunction,
    ) -> Result<Vec<Digest>> {
        self.inner.hash_rows(lde, row_hashing, hash)
    }

    fn build_tree(&self, leaves: &[Digest], hash: HashFunction) -> Result<Vec<Digest>> {
        self.inner.build_tree(leaves, hash)
    }

    fn commit_fri(
        &self,
        request: &FriRequest<'_>,
        channel: &mut FoldingChannel<'_>,
    ) -> Result<FriLayers> {
        self.inner.commit_fri(request, channel)
    }

    fn grind(&self, request: &GrindRequest) -> Result<u64> {
        self.inner.grind(request)
    }

    fn hold_devices(&self) -> DeviceHold<'_> {
        self.inner.hold_devices()
    }
}
