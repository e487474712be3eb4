//! The shared parity harness: every backend runs it against Winterfell.
//!
//! Random shapes (rows 2^1–2^12, columns 1–160, blowup 2/4/8/16, base/quadratic/cubic,
//! partitions 1/2/4, every hash function the backend implements, trace and composition inputs)
//! with random non-zero field
//! elements; polynomials and LDE rows are compared as field elements, and the leaves, every
//! Merkle node and the root against Winterfell's own `interpolate_columns`,
//! `RowMatrix::evaluate_polys_over`, `commit_to_rows`, `build_merkle_nodes`, `DefaultTraceLde`
//! and `DefaultConstraintCommitment`. Any difference panics with the case that produced it.

#![allow(dead_code)]

pub mod device;

use miden_crypto::{
    hash::{
        blake::{Blake3_192, Blake3_256},
        poseidon2::Poseidon2,
        rpo::Rpo256,
        rpx::Rpx256,
    },
    Felt,
};
use miden_gpu::{
    commit_composition, commit_trace_segment,
    deep::{combine_on_host, CombineRequest, DeepSegment, EvaluateRequest},
    fri::FriRequest,
    Backend, CommitRequest, Commitment, CpuCommitter, Digest, GpuCommitter, GpuError, GpuHasher,
    HashFunction, Keep, LdeRows, PolyInput, ResidentPolys, RowHashing, SegmentCommitment,
};
use rand::{rngs::StdRng, Rng, SeedableRng};
use winter_air::{PartitionOptions, TraceInfo};
use winter_crypto::{build_merkle_nodes, MerkleTree};
use winter_math::{
    fft,
    fields::{CubeExtension, QuadExtension},
    polynom, FieldElement, StarkField,
};
use winter_prover::{
    matrix::{ColMatrix, RowMatrix},
    CompositionPolyTrace, ConstraintCommitment, DefaultConstraintCommitment, DefaultTraceLde,
    StarkDomain, TraceLde,
};

/// Largest number of LDE base elements one random case may have (keeps software GPUs fast).
const MAX_LDE_ELEMENTS: usize = 1 << 22;

/// The hash functions the GPU backends have kernels for.
pub const GPU_HASHES: [HashFunction; 5] = HashFunction::ALL;

// RANDOM INPUTS
// ================================================================================================

/// A uniformly random non-zero field element.
pub fn random_felt(rng: &mut impl Rng) -> Felt {
    loop {
        let value = Felt::new(rng.random::<u64>());
        if value != Felt::ZERO {
            return value;
        }
    }
}

/// Operand pairs of raw `Felt` words (Montgomery form, non-canonical ones included) for the
/// field-arithmetic tests of the GPU kernels, 2^16 pairs: every pair of edge words, then pairs of
/// words just below 2^64 (products whose top 32 bits are all ones, where a reduction's carries
/// reach furthest), then uniformly random words.
pub fn field_test_words(seed: u64) -> (Vec<u64>, Vec<u64>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let edges = [
        0u64,
        1,
        2,
        0xFFFF_FFFF,
        1 << 32,
        0xFFFF_FFFF_0000_0000,
        0xFFFF_FFFF_0000_0001,
        u64::MAX - 1,
        u64::MAX,
    ];
    let mut a: Vec<u64> = (0..1 << 16).map(|_| rng.random()).collect();
    let mut b: Vec<u64> = (0..1 << 16).map(|_| rng.random()).collect();
    for (i, &x) in edges.iter().enumerate() {
        for (j, &y) in edges.iter().enumerate() {
            a[i * edges.len() + j] = x;
            b[i * edges.len() + j] = y;
        }
    }
    // u64::MAX - u for u below 2^32 of every bit length
    let near_top = |rng: &mut StdRng, i: usize| u64::MAX - (rng.random::<u64>() >> (32 + i % 32));
    for i in edges.len() * edges.len()..1 << 13 {
        a[i] = near_top(&mut rng, i);
        b[i] = if i % 4 == 0 { a[i] } else { near_top(&mut rng, i / 7) };
    }
    (a, b)
}

/// Compares a field-arithmetic kernel's output words, `ops.len()` per operand pair in the order
/// of `ops`, with `want(x, y)` computed by `Felt` (`x = a[i]`, `y = b[i]` as raw words), word for
/// word; prints the first three differences of each operation and panics if there is any.
pub fn assert_field_words<const N: usize>(
    label: &str,
    ops: [&str; N],
    (a, b): (&[u64], &[u64]),
    out: &[u64],
    want: impl Fn(Felt, Felt) -> [Felt; N],
) {
    let mut failures = [0usize; N];
    for i in 0..a.len() {
        let want = want(Felt::from_mont(a[i]), Felt::from_mont(b[i])).map(|v| v.inner());
        for k in 0..N {
            let got = out[N * i + k];
            if got != want[k] {
                failures[k] += 1;
                if failures[k] <= 3 {
                    eprintln!(
                        "{label} {} of {:#018x}, {:#018x}: got {got:#018x}, want {:#018x}",
                        ops[k], a[i], b[i], want[k]
                    );
                }
            }
        }
    }
    assert_eq!(failures, [0; N], "{label} mismatches ({ops:?}) of {}", a.len());
}

/// `n` random elements of `E` with every base coefficient non-zero.
pub fn random_elements<E: FieldElement<BaseField = Felt>>(rng: &mut impl Rng, n: usize) -> Vec<E> {
    let base: Vec<Felt> = (0..n * E::EXTENSION_DEGREE).map(|_| random_felt(rng)).collect();
    E::slice_from_base_elements(&base).to_vec()
}

// CASES
// ================================================================================================

/// One commitment shape.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// log2 of the trace length.
    pub log_rows: u32,
    /// Columns, in extension elements.
    pub cols: usize,
    /// LDE blowup.
    pub blowup: usize,
    /// Extension degree of the segment: 1, 2 or 3.
    pub extension: usize,
    /// `PartitionOptions::num_partitions`.
    pub partitions: usize,
    /// Row hash.
    pub hash: HashFunction,
    /// Composition-polynomial input instead of trace columns.
    pub composition: bool,
}

/// `count` random cases over `hashes`; the first ones cover every combination of field, hash
/// and input kind.
pub fn random_cases(seed: u64, count: usize, hashes: &[HashFunction]) -> Vec<Case> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cases = Vec::with_capacity(count);
    for i in 0..count {
        let extension = [1, 2, 3][i % 3];
        let hash = hashes[(i / 3) % hashes.len()];
        let composition = (i / (3 * hashes.len())) % 2 == 1;
        let log_rows = rng.random_range(1..=12u32);
        let blowup: usize = [2, 4, 8, 16][rng.random_range(0..4)];
        let max_cols = if composition { 16 } else { 160 };
        let budget = MAX_LDE_ELEMENTS >> (log_rows + blowup.ilog2());
        let cols = rng.random_range(1..=max_cols).min((budget / extension).max(1));
        let partitions = [1, 2, 4][rng.random_range(0..3)];
        cases.push(Case { log_rows, cols, blowup, extension, partitions, hash, composition });
    }
    cases
}

/// Runs `count` random cases over `hashes` (or `MIDEN_GPU_PARITY_CASES` cases, for slow runs
/// such as compute-sanitizer's) plus the per-stage checks on `committer`; panics on any
/// difference.
pub fn run_parity_suite(
    committer: &dyn GpuCommitter,
    seed: u64,
    count: usize,
    hashes: &[HashFunction],
) {
    let count =
        std::env::var("MIDEN_GPU_PARITY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(count);
    for (i, case) in random_cases(seed, count, hashes).iter().enumerate() {
        eprintln!("[{}] case {i}/{count}: {case:?}", committer.backend());
        check_case(committer, case, seed.wrapping_add(i as u64));
    }
    check_hash_rows(committer, seed, hashes);
    check_inexact_rows(committer, hashes);
    check_build_tree(committer, seed, hashes);
    check_deep(committer, seed, 12);
}

/// Checks one case against Winterfell.
pub fn check_case(committer: &dyn GpuCommitter, case: &Case, seed: u64) {
    match case.extension {
        1 => check_field::<Felt>(committer, case, seed),
        2 => check_field::<QuadExtension<Felt>>(committer, case, seed),
        3 => check_field::<CubeExtension<Felt>>(committer, case, seed),
        k => panic!("unsupported extension degree {k}"),
    }
}

fn check_field<E: FieldElement<BaseField = Felt>>(
    committer: &dyn GpuCommitter,
    case: &Case,
    seed: u64,
) {
    match case.hash {
        HashFunction::Rpo256 => check_typed::<E, Rpo256>(committer, case, seed),
        HashFunction::Rpx256 => check_typed::<E, Rpx256>(committer, case, seed),
        HashFunction::Poseidon2 => check_typed::<E, Poseidon2>(committer, case, seed),
        HashFunction::Blake3_192 => check_typed::<E, Blake3_192>(committer, case, seed),
        HashFunction::Blake3_256 => check_typed::<E, Blake3_256>(committer, case, seed),
    }
}

/// Winterfell's Merkle nodes over `leaves` with hasher `H`, as digests.
fn reference_nodes<H: GpuHasher>(leaves: &[Digest]) -> Vec<Digest> {
    let leaves: Vec<H::Digest> = leaves.iter().map(|&d| H::from_digest(d)).collect();
    build_merkle_nodes::<H>(&leaves).iter().map(H::to_digest).collect()
}

/// Runs `work` (Winterfell's row matrices of an LDE of `lde_rows` rows) on as many threads as
/// winter-prover 0.13 handles: it transposes a row matrix in `2 · next_pow2(threads)` batches of
/// `rows / batches` rows, so on more threads than half the rows (and 1024 words or more) it
/// leaves every row uninitialized.
pub fn on_winterfell_threads<T: Send>(lde_rows: usize, work: impl FnOnce() -> T + Send) -> T {
    let threads = rayon::current_num_threads().min((lde_rows / 2).max(1));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("rayon pool");
    pool.install(work)
}

fn check_typed<E, H>(committer: &dyn GpuCommitter, case: &Case, seed: u64)
where
    E: FieldElement<BaseField = Felt>,
    H: GpuHasher,
{
    let mut rng = StdRng::seed_from_u64(seed);
    let n = 1usize << case.log_rows;
    let partitions = PartitionOptions::new(case.partitions, 8);
    let domain =
        StarkDomain::from_twiddles(fft::get_twiddles::<Felt>(n), case.blowup, Felt::GENERATOR);

    let (got, polys, reference_root) = if case.composition {
        let m = n * case.cols.next_power_of_two().max(2);
        let evaluations = random_elements::<E>(&mut rng, m);
        let got = commit_composition(
            committer,
            &evaluations,
            n,
            case.cols,
            case.blowup,
            partitions,
            case.hash,
        )
        .unwrap_or_else(|e| panic!("{case:?}: commit_composition failed: {e}"));
        let (commitment, poly) = on_winterfell_threads(domain.lde_domain_size(), || {
            DefaultConstraintCommitment::<E, H, MerkleTree<H>>::new(
                CompositionPolyTrace::new(evaluations.clone()),
                case.cols,
                &domain,
                partitions,
            )
        });
        (got, poly.data().clone(), Some(commitment.commitment()))
    } else {
        let trace =
            ColMatrix::new((0..case.cols).map(|_| random_elements::<E>(&mut rng, n)).collect());
        let got = commit_trace_segment(committer, &trace, case.blowup, partitions, case.hash)
            .unwrap_or_else(|e| panic!("{case:?}: commit_trace_segment failed: {e}"));
        let root =
            (E::EXTENSION_DEGREE == 1 && n >= TraceInfo::MIN_TRACE_LENGTH && case.cols <= 255)
                .then(|| {
                    let base = ColMatrix::new(
                        trace.columns().map(|c| E::slice_as_base_elements(c).to_vec()).collect(),
                    );
                    let info = TraceInfo::new(case.cols, n);
                    on_winterfell_threads(domain.lde_domain_size(), || {
                        let (lde, _) = DefaultTraceLde::<Felt, H, MerkleTree<H>>::new(
                            &info, &base, &domain, partitions,
                        );
                        lde.get_main_trace_commitment()
                    })
                });
        (got, trace.interpolate_columns(), root)
    };

    let (lde, tree) = on_winterfell_threads(domain.lde_domain_size(), || {
        let lde = RowMatrix::evaluate_polys_over::<8>(&polys, &domain);
        let tree: MerkleTree<H> = lde.commit_to_rows::<H, MerkleTree<H>>(partitions);
        (lde, tree)
    });
    compare(case, &got, &polys, &lde, &tree);
    if let Some(root) = reference_root {
        assert!(
            H::from_digest(got.root()) == root,
            "{case:?}: root differs from Winterfell's commitment"
        );
    }
}

fn compare<E, H>(
    case: &Case,
    got: &SegmentCommitment<E>,
    polys: &ColMatrix<E>,
    lde: &RowMatrix<E>,
    tree: &MerkleTree<H>,
) where
    E: FieldElement<BaseField = Felt>,
    H: GpuHasher,
{
    assert_eq!(got.polys.len(), polys.num_cols(), "{case:?}: number of polynomials");
    for (j, (g, w)) in got.polys.iter().zip(polys.columns()).enumerate() {
        if let Some(i) = (0..w.len()).find(|&i| g.get(i) != Some(&w[i])) {
            panic!("{case:?}: polynomial {j} coefficient {i} differs");
        }
        assert_eq!(g.len(), w.len(), "{case:?}: polynomial {j} length");
    }
    assert_eq!(got.lde.num_rows(), lde.num_rows(), "{case:?}: LDE rows");
    assert_eq!(got.lde.num_cols(), lde.num_cols(), "{case:?}: LDE columns");
    let rows = got.lde.base_rows();
    assert_eq!(rows.row_width, lde.data().len() / lde.num_rows(), "{case:?}: row width");
    for i in 0..lde.num_rows() {
        if got.lde.row(i) != lde.row(i) {
            panic!("{case:?}: LDE row {i} differs");
        }
        let padding = &rows.data[i * rows.row_width + rows.num_cols..(i + 1) * rows.row_width];
        assert!(padding.iter().all(|&x| x == Felt::ZERO), "{case:?}: row {i} padding not zero");
    }
    let leaves = tree.leaves();
    assert_eq!(got.leaves.len(), leaves.len(), "{case:?}: number of leaves");
    if let Some(i) = (0..leaves.len()).find(|&i| H::from_digest(got.leaves[i]) != leaves[i]) {
        panic!("{case:?}: leaf {i} differs");
    }
    let nodes = build_merkle_nodes::<H>(leaves);
    assert_eq!(got.nodes.len(), nodes.len(), "{case:?}: number of nodes");
    if let Some(i) = (1..nodes.len()).find(|&i| H::from_digest(got.nodes[i]) != nodes[i]) {
        panic!("{case:?}: Merkle node {i} differs");
    }
    assert!(H::from_digest(got.root()) == *tree.root(), "{case:?}: root differs");
}

// PER-STAGE CHECKS
// ================================================================================================

/// Row hashing alone, on random row-major matrices of many widths, against miden-crypto.
pub fn check_hash_rows(committer: &dyn GpuCommitter, seed: u64, hashes: &[HashFunction]) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    for &hash in hashes {
        for num_cols in
            [1usize, 3, 4, 7, 8, 9, 15, 16, 17, 24, 33, 73, 80, 100, 128, 129, 300, 2100]
        {
            let row_width = num_cols.div_ceil(8) * 8;
            let num_rows = 1 << rng.random_range(1..=10);
            let mut data: Vec<Felt> =
                (0..num_rows * row_width).map(|_| random_felt(&mut rng)).collect();
            for (i, x) in data.iter_mut().enumerate() {
                if i % row_width >= num_cols {
                    *x = Felt::ZERO;
                }
            }
            let lde = LdeRows { data: data.into(), row_width, num_cols };
            for row_hashing in [
                RowHashing::WholeRow,
                RowHashing::Partitioned(1),
                RowHashing::Partitioned(8),
                RowHashing::Partitioned(num_cols.div_ceil(2).max(1)),
            ] {
                let got = committer
                    .hash_rows(&lde, row_hashing, hash)
                    .unwrap_or_else(|e| panic!("hash_rows {num_cols} cols: {e}"));
                assert_eq!(got.len(), num_rows);
                for (i, digest) in got.iter().enumerate() {
                    let row = lde.row(i);
                    let want = match row_hashing {
                        RowHashing::WholeRow => hash.hash_elements(row),
                        RowHashing::Partitioned(s) => {
                            let d: Vec<Digest> =
                                row.chunks(s).map(|c| hash.hash_elements(c)).collect();
                            hash.merge_many(&d)
                        },
                    };
                    assert_eq!(
                        *digest, want,
                        "{hash} {row_hashing:?}: row {i} of {num_cols} columns differs"
                    );
                }
            }
        }
    }
}

/// Rows on which winter_math's arithmetic is not exact modulo p, which the hashes must
/// reproduce all the same: an RPX row (met in a 2^20-row commitment) whose second extension
/// round doubles a product into a non-canonical value and adds it as a right operand, and rows
/// crafted to make Poseidon2's first external layer do the same (`t3 = 2d + t0` non-canonical,
/// then `t4 = 4 t1 + t3`). Values are raw Montgomery words.
pub fn inexact_rows() -> Vec<Vec<Felt>> {
    const P: u64 = 0xFFFF_FFFF_0000_0001;
    let rpx = [
        12185639043619714438,
        825060363199942451,
        1443786039254735233,
        6517267777961137212,
        9917852987151313250,
        3006317033293477143,
        15611318344973789584,
        11359000893216326917,
    ]
    .map(Felt::new);
    let mut rows = vec![rpx.to_vec()];
    for x in [1u64, 2, 12_345, (1 << 31) - 7] {
        // a + b = p - x, and 2d = p + 1 + 2x: t3 = 2d + (a + b) = p + 1 + x
        let block = [P - 1 - x, 1, 0x1234_5678_9ABC_DEF0 + x, P / 2 + 1 + x];
        let mut row: Vec<Felt> = block.iter().chain(&block).map(|&w| Felt::from_mont(w)).collect();
        rows.push(row.clone());
        row.extend_from_slice(&rpx);
        rows.push(row);
    }
    rows
}

/// [`inexact_rows`] on every hash, whole and partitioned, against miden-crypto.
pub fn check_inexact_rows(committer: &dyn GpuCommitter, hashes: &[HashFunction]) {
    for (r, row) in inexact_rows().iter().enumerate() {
        let row_width = row.len().div_ceil(8) * 8;
        let mut data = row.clone();
        data.resize(row_width, Felt::ZERO);
        // two rows: kernels that hash several rows per thread or per block see both positions
        data.extend_from_within(..);
        let lde = LdeRows { data: data.into(), row_width, num_cols: row.len() };
        for &hash in hashes {
            for row_hashing in [RowHashing::WholeRow, RowHashing::Partitioned(8)] {
                let got = committer
                    .hash_rows(&lde, row_hashing, hash)
                    .unwrap_or_else(|e| panic!("hash_rows of inexact row {r}: {e}"));
                let want = match row_hashing {
                    RowHashing::WholeRow => hash.hash_elements(row),
                    _ => hash.merge_many(
                        &row.chunks(8).map(|c| hash.hash_elements(c)).collect::<Vec<_>>(),
                    ),
                };
                assert_eq!(got, [want, want], "{hash} {row_hashing:?}: inexact row {r} differs");
            }
        }
    }
}

/// Merkle tree alone, on random leaves, against Winterfell's `build_merkle_nodes`.
pub fn check_build_tree(committer: &dyn GpuCommitter, seed: u64, hashes: &[HashFunction]) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x7EE);
    for &hash in hashes {
        for log_leaves in [1, 2, 3, 5, 8, 11, 14] {
            let leaves: Vec<Digest> =
                (0..1usize << log_leaves).map(|_| random_digest(&mut rng, hash)).collect();
            let got = committer
                .build_tree(&leaves, hash)
                .unwrap_or_else(|e| panic!("build_tree 2^{log_leaves}: {e}"));
            let want = match hash {
                HashFunction::Rpo256 => reference_nodes::<Rpo256>(&leaves),
                HashFunction::Rpx256 => reference_nodes::<Rpx256>(&leaves),
                HashFunction::Poseidon2 => reference_nodes::<Poseidon2>(&leaves),
                HashFunction::Blake3_192 => reference_nodes::<Blake3_192>(&leaves),
                HashFunction::Blake3_256 => reference_nodes::<Blake3_256>(&leaves),
            };
            assert_eq!(got.len(), want.len(), "{hash}: node count for 2^{log_leaves} leaves");
            if let Some(i) = (1..want.len()).find(|&i| got[i] != want[i]) {
                panic!("{hash}: Merkle node {i} of 2^{log_leaves} leaves differs");
            }
        }
    }
}

// FRI LAYERS
// ================================================================================================

/// One FRI commit phase shape.
#[derive(Debug, Clone, Copy)]
pub struct FriCase {
    /// log2 of the DEEP polynomial's length.
    pub log_len: u32,
    pub blowup: usize,
    pub folding: usize,
    pub layers: usize,
    /// Extension degree: 1, 2 or 3.
    pub extension: usize,
    pub hash: HashFunction,
}

/// `count` random FRI shapes, cycling through every extension degree, folding factor, blowup
/// (2–32) and hash, with polynomials of 2–2^`max_log_len` coefficients (some shorter than the
/// folding factor) and 1 to the most layers the domain allows.
pub fn random_fri_cases(seed: u64, count: usize, max_log_len: u32) -> Vec<FriCase> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..count)
        .map(|i| {
            let extension = [1, 2, 3][i % 3];
            let folding: usize = [2, 4, 8, 16][i % 4];
            let blowup: usize = [2, 4, 8, 16, 32][i % 5];
            let hash = HashFunction::ALL[(i / 2) % HashFunction::ALL.len()];
            // The first fold needs folding ≤ domain / 2.
            let min_log = (folding.ilog2() + 1).saturating_sub(blowup.ilog2()).max(1);
            let log_len = rng.random_range(min_log..=max_log_len.max(min_log));
            let half_domain = (1usize << log_len) * blowup / 2;
            let max_layers = (half_domain.ilog2() / folding.ilog2()) as usize;
            let layers = rng.random_range(1..=max_layers);
            FriCase { log_len, blowup, folding, layers, extension, hash }
        })
        .collect()
}

/// The FRI commit phase of random non-zero DEEP polynomials on `committer` against
/// `CpuCommitter` (winter-fri's own functions), with the same deterministic channel (alpha from
/// the hash of the root): every layer's columns, leaves and nodes, and the remainder.
pub fn check_fri(committer: &dyn GpuCommitter, cases: &[FriCase], seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for (i, case) in cases.iter().enumerate() {
        eprintln!("[{}] FRI case {i}/{}: {case:?}", committer.backend(), cases.len());
        let len = 1usize << case.log_len;
        let components: Vec<Vec<Felt>> = (0..case.extension)
            .map(|_| (0..len).map(|_| random_felt(&mut rng)).collect())
            .collect();
        let slices: Vec<&[Felt]> = components.iter().map(Vec::as_slice).collect();
        let request = FriRequest {
            components: &slices,
            blowup: case.blowup,
            folding_factor: case.folding,
            num_layers: case.layers,
            hash: case.hash,
            keep_layers: false,
        };
        let channel = |root: Digest| {
            let words = root.words().map(Felt::new);
            case.hash.hash_elements(&words).to_felts()[..case.extension].to_vec()
        };
        let got = committer
            .commit_fri(&request, &mut { channel })
            .unwrap_or_else(|e| panic!("{case:?}: {e}"));
        let want = CpuCommitter::new().commit_fri(&request, &mut { channel }).expect("CPU FRI");
        assert_eq!(got.layers.len(), want.layers.len(), "{case:?}: number of layers");
        for (l, (got, want)) in got.layers.iter().zip(&want.layers).enumerate() {
            assert_eq!(got.num_rows, want.num_rows, "{case:?}: rows of layer {l}");
            if let Some(x) = first_difference(&got.columns, &want.columns) {
                panic!("{case:?}: layer {l}, column element {x} differs");
            }
            if let Some(x) = first_difference(&got.leaves, &want.leaves) {
                panic!("{case:?}: layer {l}, leaf {x} differs");
            }
            if let Some(x) = first_difference(&got.nodes, &want.nodes) {
                panic!("{case:?}: layer {l}, node {x} differs");
            }
        }
        if let Some(x) = first_difference(&got.remainder, &want.remainder) {
            panic!("{case:?}: remainder element {x} differs");
        }
        // the layers kept on the device, opened at random positions (and at both ends)
        let keep = FriRequest { keep_layers: true, ..request };
        let kept = committer
            .commit_fri(&keep, &mut { channel })
            .unwrap_or_else(|e| panic!("{case:?}, layers kept: {e}"));
        assert_eq!(kept.remainder, want.remainder, "{case:?}, layers kept: remainder");
        for (l, layer) in want.layers.iter().enumerate() {
            let rows = layer.num_rows;
            let mut positions: Vec<usize> =
                (0..rng.random_range(1..=20)).map(|_| rng.random_range(0..rows)).collect();
            positions.extend([0, rows - 1]);
            positions.sort_unstable();
            positions.dedup();
            let got = kept.open(l, &positions).unwrap_or_else(|e| panic!("{case:?}: open: {e}"));
            assert_eq!(got, layer.open(&positions), "{case:?}: layer {l} opened differently");
        }
        if let Some(kept) = &kept.kept {
            assert!(kept.open(case.layers, &[0]).is_err(), "{case:?}: a missing layer opened");
            let rows = want.layers[0].num_rows;
            assert!(kept.open(0, &[rows]).is_err(), "{case:?}: a position past the rows opened");
        }
    }
}

// DEEP COMBINATION
// ================================================================================================

/// `count` random DEEP compositions over polynomials the committer kept from its commitments
/// (a main segment of base columns, an optional auxiliary segment and a composition polynomial
/// committed from its evaluations, in the base field and both extensions): the evaluations at
/// two random points against winter_math's `polynom::eval`, and the combination against
/// [`combine_on_host`], both over the CPU backend's polynomials; then malformed requests. Each
/// commitment that keeps its polynomials has the CPU's root and returns no host copy of them; a
/// backend that keeps none (the CPU) must say so with `None` and return them.
pub fn check_deep(committer: &dyn GpuCommitter, seed: u64, count: usize) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xDEE9);
    for i in 0..count {
        let d = [1, 2, 3][i % 3];
        let log_len = rng.random_range(1..=11u32);
        let n = 1usize << log_len;
        let main_cols = rng.random_range(1..=40);
        let aux_cols = if i % 2 == 0 { rng.random_range(1..=4) } else { 0 };
        let quotient_cols = rng.random_range(1..=4).min(1 << (11 - log_len)).max(1);
        let label = format!(
            "[{}] combination {i}: 2^{log_len}, main {main_cols}, aux {aux_cols}, \
             composition {quotient_cols}, degree {d}",
            committer.backend()
        );
        eprintln!("{label}");
        let random_columns = |rng: &mut StdRng, cols: usize, len: usize| -> Vec<Vec<Felt>> {
            (0..cols).map(|_| (0..len).map(|_| random_felt(rng)).collect()).collect()
        };
        let main = random_columns(&mut rng, main_cols, n);
        let aux = random_columns(&mut rng, aux_cols * d, n);
        // composition: quotient_cols·n evaluations over a domain of quotient_cols·n (at least 2n)
        let m = (quotient_cols * n).next_power_of_two().max(2 * n);
        let composition = random_columns(&mut rng, d, m);
        let (main_s, aux_s, comp_s) = (as_slices(&main), as_slices(&aux), as_slices(&composition));
        let mut inputs = vec![(PolyInput::Trace { columns: &main_s }, 1)];
        if aux_cols > 0 {
            inputs.push((PolyInput::Trace { columns: &aux_s }, d));
        }
        inputs.push((
            PolyInput::Composition {
                components: &comp_s,
                column_len: n,
                num_columns: quotient_cols,
            },
            d,
        ));
        let blowup = [2, 4, 8][i % 3];
        let request = |input| CommitRequest {
            input,
            blowup,
            row_hashing: RowHashing::WholeRow,
            hash: HashFunction::Rpo256,
        };
        let mut kept = Vec::new();
        let mut host_polys = Vec::new();
        for &(input, degree) in &inputs {
            let got = committer
                .commit_keeping(&request(input), Keep { polys: true, rows: true, tree: true })
                .unwrap_or_else(|e| panic!("{label}: commit: {e}"));
            let want = CpuCommitter::new().commit(&request(input)).expect("CPU commitment");
            assert_eq!(got.root(), want.root(), "{label}: a commitment keeping its polynomials");
            if got.resident.is_some() {
                assert!(got.polys.is_empty(), "{label}: kept polynomials were also returned");
            } else {
                assert_eq!(got.polys, want.polys, "{label}: returned polynomials");
            }
            check_kept_rows(&got, &want, &mut rng, &label);
            check_kept_tree(&got, &want, &mut rng, &label);
            host_polys.push((want.polys, degree));
            kept.push(got.resident);
        }
        let Some(kept) = kept.into_iter().collect::<Option<Vec<_>>>() else {
            assert_eq!(committer.backend(), Backend::Cpu, "{label}: a GPU backend kept nothing");
            return;
        };
        check_deep_on(committer, &kept, &host_polys, d, &mut rng, &label);
    }
    // the CPU backend keeps nothing: combining its commitments is unsupported
    let columns = [vec![Felt::ONE; 4]];
    let slices: Vec<&[Felt]> = columns.iter().map(Vec::as_slice).collect();
    let cpu = CpuCommitter::new()
        .commit_keeping(
            &CommitRequest {
                input: PolyInput::Trace { columns: &slices },
                blowup: 2,
                row_hashing: RowHashing::WholeRow,
                hash: HashFunction::Rpo256,
            },
            Keep { polys: true, rows: true, tree: true },
        )
        .expect("CPU commitment");
    assert!(cpu.resident.is_none() && cpu.kept_rows.is_none() && cpu.kept_tree.is_none());
}

/// The rows of `got`, a commitment asked to keep its rows: where the backend kept them, none
/// came back and reads at random positions (the first and last rows among them, repeats
/// allowed) equal `want`'s rows, while a position past the LDE is a typed error; where it did
/// not, they came back equal to `want`'s.
fn check_kept_rows(got: &Commitment, want: &Commitment, rng: &mut StdRng, label: &str) {
    let Some(kept) = &got.kept_rows else {
        assert_eq!(got.lde, want.lde, "{label}: returned rows");
        return;
    };
    assert!(got.lde.data.is_empty(), "{label}: kept rows were also returned");
    assert_eq!((got.lde.row_width, got.lde.num_cols), (want.lde.row_width, want.lde.num_cols));
    let rows = want.lde.num_rows();
    let mut positions: Vec<usize> = (0..27).map(|_| rng.random_range(0..rows)).collect();
    positions.extend([0, rows - 1, positions[0]]);
    let read = kept.read(&positions).unwrap_or_else(|e| panic!("{label}: read rows: {e}"));
    for (&p, row) in positions.iter().zip(&read) {
        assert_eq!(row.as_slice(), want.lde.row(p), "{label}: kept row {p}");
    }
    assert!(
        matches!(kept.read(&[1, rows]), Err(GpuError::RowOutOfRange { row, .. }) if row == rows),
        "{label}: a row past the LDE was read"
    );
}

/// The tree of `got`, a commitment asked to keep its tree: where the backend kept it, no leaf
/// came back, its nodes are node 0 and the root, and reads of random leaves and nodes (the first
/// and last among them, repeats allowed), and of every node at once, equal `want`'s, while a leaf
/// past the tree or node 0 is a typed error; where it did not, the leaves and nodes came back
/// equal to `want`'s.
pub fn check_kept_tree(got: &Commitment, want: &Commitment, rng: &mut StdRng, label: &str) {
    let Some(kept) = &got.kept_tree else {
        assert!(got.leaves == want.leaves && got.nodes == want.nodes, "{label}: returned tree");
        return;
    };
    assert!(got.leaves.is_empty(), "{label}: the leaves of a kept tree were also returned");
    assert_eq!(&got.nodes[..], &[Digest::ZERO, want.root()], "{label}: a kept tree's nodes");
    let n = want.leaves.len();
    assert_eq!(kept.num_leaves(), n, "{label}: leaves of the kept tree");
    let mut leaves: Vec<usize> = (0..23).map(|_| rng.random_range(0..n)).collect();
    leaves.extend([0, n - 1, leaves[0]]);
    let mut nodes: Vec<usize> = (0..23).map(|_| rng.random_range(1..n)).collect();
    nodes.extend([1, n - 1, nodes[0]]);
    let (got_leaves, got_nodes) =
        kept.read(&leaves, &nodes).unwrap_or_else(|e| panic!("{label}: read the tree: {e}"));
    let want_leaves: Vec<Digest> = leaves.iter().map(|&i| want.leaves[i]).collect();
    let want_nodes: Vec<Digest> = nodes.iter().map(|&i| want.nodes[i]).collect();
    assert!(got_leaves == want_leaves, "{label}: kept leaves at {leaves:?}");
    assert!(got_nodes == want_nodes, "{label}: kept nodes at {nodes:?}");
    let every: Vec<usize> = (1..n).collect();
    let (none, all) = kept.read(&[], &every).unwrap_or_else(|e| panic!("{label}: all nodes: {e}"));
    assert!(none.is_empty() && all == want.nodes[1..], "{label}: every kept node");
    for (leaves, nodes, bad) in [(vec![1, n], vec![], n), (vec![], vec![2, 0], 0)] {
        assert!(
            matches!(kept.read(&leaves, &nodes), Err(GpuError::RowOutOfRange { row, .. }) if row == bad),
            "{label}: a read of index {bad} past the tree"
        );
    }
}

/// The DEEP combination (random coefficients) and the evaluations (two random points of degree
/// `d`) of the `kept` segments on `committer`, against the host's over `host_polys` (each
/// segment's polynomials and degree); malformed requests are typed errors.
pub fn check_deep_on(
    committer: &dyn GpuCommitter,
    kept: &[ResidentPolys],
    host_polys: &[(Vec<Vec<Felt>>, usize)],
    d: usize,
    rng: &mut StdRng,
    label: &str,
) {
    let n = host_polys[0].0[0].len();
    let k: Vec<Felt> = (0..host_polys.iter().map(|(p, deg)| p.len() / deg).sum::<usize>() * d)
        .map(|_| random_felt(rng))
        .collect();
    let segments: Vec<DeepSegment<'_>> = kept
        .iter()
        .zip(host_polys)
        .map(|(polys, &(_, degree))| DeepSegment { polys, degree })
        .collect();
    let request = CombineRequest { segments: &segments, ext_degree: d, coefficients: &k };
    let got = committer.combine_polys(&request).unwrap_or_else(|e| panic!("{label}: combine: {e}"));
    let want = match d {
        1 => host_combination::<Felt>(host_polys, &k, n),
        2 => host_combination::<QuadExtension<Felt>>(host_polys, &k, n),
        _ => host_combination::<CubeExtension<Felt>>(host_polys, &k, n),
    };
    if let Some(x) = first_difference(&got, &want) {
        panic!("{label}: element {} (component {}) differs", x / d, x % d);
    }
    let points: Vec<Felt> = (0..2 * d).map(|_| random_felt(rng)).collect();
    let request_at = EvaluateRequest { segments: &segments, ext_degree: d, points: &points };
    let got =
        committer.evaluate_polys(&request_at).unwrap_or_else(|e| panic!("{label}: evaluate: {e}"));
    let want = match d {
        1 => host_evaluations::<Felt>(host_polys, &points),
        2 => host_evaluations::<QuadExtension<Felt>>(host_polys, &points),
        _ => host_evaluations::<CubeExtension<Felt>>(host_polys, &points),
    };
    if let Some(x) = first_difference(&got, &want) {
        let (column, point) = (x / d / 2, x / d % 2);
        panic!("{label}: column {column} at point {point} differs (component {})", x % d);
    }
    let one_point = EvaluateRequest { points: &points[d..], ..request_at };
    assert!(matches!(committer.evaluate_polys(&one_point), Err(GpuError::InvalidDeep(_))));
    // malformed: a coefficient short, a segment degree the columns do not divide into
    let short = CombineRequest { coefficients: &k[1..], ..request };
    assert!(matches!(committer.combine_polys(&short), Err(GpuError::InvalidDeep(_))));
    let main_cols = host_polys[0].0.len();
    if d > 1 && !main_cols.is_multiple_of(d) {
        let odd = [DeepSegment { polys: &kept[0], degree: d }];
        let odd = CombineRequest { segments: &odd, ext_degree: d, coefficients: &k };
        assert!(matches!(committer.combine_polys(&odd), Err(GpuError::InvalidDeep(_))));
    }
}

/// Every column at both points by `polynom::eval` (main columns in the base field, the others
/// grouped into columns of their degree): for column `c` and point `p`, at `(c·2 + p)·degree`.
pub fn host_evaluations<E: FieldElement<BaseField = Felt>>(
    segments: &[(Vec<Vec<Felt>>, usize)],
    points: &[Felt],
) -> Vec<Felt> {
    let points = E::slice_from_base_elements(points);
    let (main, ext) = segments.split_first().expect("a main segment");
    let n = main.0[0].len();
    let mut values: Vec<E> = Vec::new();
    for poly in &main.0 {
        values.extend(points.iter().map(|&x| polynom::eval(poly, x)));
    }
    for group in ext.iter().flat_map(|(polys, _)| polys.chunks(E::EXTENSION_DEGREE)) {
        let flat: Vec<Felt> = (0..n).flat_map(|i| group.iter().map(move |c| c[i])).collect();
        let poly = E::slice_from_base_elements(&flat);
        values.extend(points.iter().map(|&x| polynom::eval(poly, x)));
    }
    E::slice_as_base_elements(&values).to_vec()
}

fn as_slices(columns: &[Vec<Felt>]) -> Vec<&[Felt]> {
    columns.iter().map(Vec::as_slice).collect()
}

/// [`combine_on_host`] over base-column polynomials grouped into columns of their degree.
pub fn host_combination<E: FieldElement<BaseField = Felt>>(
    segments: &[(Vec<Vec<Felt>>, usize)],
    coefficients: &[Felt],
    n: usize,
) -> Vec<Felt> {
    let k = E::slice_from_base_elements(coefficients);
    let (main, ext) = segments.split_first().expect("a main segment");
    let base: Vec<&[Felt]> = main.0.iter().map(Vec::as_slice).collect();
    let ext_columns: Vec<Vec<E>> = ext
        .iter()
        .flat_map(|(polys, _)| polys.chunks(E::EXTENSION_DEGREE))
        .map(|group| {
            let flat: Vec<Felt> = (0..n).flat_map(|i| group.iter().map(move |c| c[i])).collect();
            E::slice_from_base_elements(&flat).to_vec()
        })
        .collect();
    let ext_slices: Vec<&[E]> = ext_columns.iter().map(Vec::as_slice).collect();
    let (k_base, k_ext) = k.split_at(base.len());
    E::slice_as_base_elements(&combine_on_host(&base, k_base, &ext_slices, k_ext, n)).to_vec()
}

/// The first index where two slices differ (an element one of them lacks counts).
pub fn first_difference<T: PartialEq>(got: &[T], want: &[T]) -> Option<usize> {
    (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i))
}

/// A random digest of `hash`: four non-zero field elements, or random bytes (the first 24 for
/// BLAKE3-192).
pub fn random_digest(rng: &mut impl Rng, hash: HashFunction) -> Digest {
    if hash.is_algebraic() {
        return Digest::from_felts(core::array::from_fn(|_| random_felt(rng)));
    }
    let bytes: [u8; 32] = rng.random();
    Digest::from_bytes(&bytes[..hash.digest_bytes()])
}

// PROOFS
// ================================================================================================

#[path = "../../examples/fib/mod.rs"]
pub mod fib;

/// Whether Winterfell runs with its debug assertions in this build, which check the constraint
/// degrees on the trace (and panic on a random or corrupted one): in the `dev` and `test`
/// profiles, whose artifacts are in `target/debug/`. The `checked` profile (Cargo.toml) turns on
/// only this crate's assertions, and `cfg!(debug_assertions)` tells this crate's alone.
pub fn winterfell_checks_degrees() -> bool {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test binary>
    exe.parent().and_then(|deps| deps.parent()).is_some_and(|profile| profile.ends_with("debug"))
}

/// The options of the Fibonacci proofs of the prover, fault and shared-device tests: 27
/// queries, blowup 8, no grinding, quadratic extension, FRI folding 4 down to degree 31.
pub fn fib_proof_options() -> winter_air::ProofOptions {
    use winter_air::{BatchingMethod, FieldExtension, ProofOptions};
    ProofOptions::new(
        27,
        8,
        0,
        FieldExtension::Quadratic,
        4,
        31,
        BatchingMethod::Linear,
        BatchingMethod::Linear,
    )
}

/// Proves Fibonacci traces with the plain Winterfell prover and with `GpuProver` on `committer`
/// for every field extension and each of `hashes` (BLAKE3 with winter-crypto's hashers), with
/// and without partitions; asserts byte-identical proofs that verify, and that a proof with one
/// flipped byte is rejected.
pub fn check_proofs(committer: std::sync::Arc<dyn GpuCommitter>, hashes: &[HashFunction]) {
    use winter_air::FieldExtension;
    use winter_air::{BatchingMethod, ProofOptions};
    for field in [FieldExtension::None, FieldExtension::Quadratic, FieldExtension::Cubic] {
        for partitions in [1, 3] {
            let options = ProofOptions::new(
                27,
                8,
                0,
                field,
                4,
                31,
                BatchingMethod::Linear,
                BatchingMethod::Linear,
            )
            .with_partitions(partitions, 8);
            for &hash in hashes {
                check_proof_with(hash, committer.clone(), options.clone());
            }
        }
    }
    // FRI shapes: (blowup, folding factor, remainder max degree, field)
    for (blowup, folding, remainder, field) in [
        (2, 2, 0, FieldExtension::Quadratic),
        (4, 8, 15, FieldExtension::Cubic),
        (16, 16, 7, FieldExtension::None),
        (32, 4, 63, FieldExtension::Quadratic),
        (8, 2, 3, FieldExtension::Cubic),
    ] {
        let options = ProofOptions::new(
            20,
            blowup,
            0,
            field,
            folding,
            remainder,
            BatchingMethod::Linear,
            BatchingMethod::Linear,
        );
        check_proof::<Rpo256>(committer.clone(), options, 10);
    }
    // a domain no larger than the remainder's (2^8 steps, blowup 8, degree 255): no FRI layer
    let options = ProofOptions::new(
        20,
        8,
        0,
        FieldExtension::Quadratic,
        4,
        255,
        BatchingMethod::Linear,
        BatchingMethod::Linear,
    );
    check_proof::<Rpo256>(committer.clone(), options, 8);
}

/// [`check_proof`] with the hasher type of `hash` (BLAKE3 through winter-crypto's hashers).
fn check_proof_with(
    hash: HashFunction,
    c: std::sync::Arc<dyn GpuCommitter>,
    options: winter_air::ProofOptions,
) {
    use winter_crypto::hashers;
    match hash {
        HashFunction::Rpo256 => check_proof::<Rpo256>(c, options, 10),
        HashFunction::Rpx256 => check_proof::<Rpx256>(c, options, 10),
        HashFunction::Poseidon2 => check_proof::<Poseidon2>(c, options, 10),
        HashFunction::Blake3_192 => check_proof::<hashers::Blake3_192<Felt>>(c, options, 10),
        HashFunction::Blake3_256 => check_proof::<hashers::Blake3_256<Felt>>(c, options, 10),
    }
}

fn check_proof<H: GpuHasher>(
    committer: std::sync::Arc<dyn GpuCommitter>,
    options: winter_air::ProofOptions,
    log_steps: u32,
) {
    use winter_air::proof::Proof;
    use winter_crypto::DefaultRandomCoin;
    use winter_prover::Prover;
    use winter_verifier::AcceptableOptions;

    let label = format!(
        "{} {:?} blowup {} folding {} partitions {:?}",
        H::FUNCTION,
        options.field_extension(),
        options.blowup_factor(),
        options.to_fri_options().folding_factor(),
        options.partition_options()
    );
    let cpu = fib::FibProver::<H>::new(options.clone());
    let gpu =
        miden_gpu::GpuProver::with_committer(fib::FibProver::<H>::new(options.clone()), committer)
            .with_cpu_fallback(false);

    let trace = fib::FibTrace::new(3, 1 << log_steps);
    let inputs = trace.inputs();
    // Winterfell's concurrent grinding keeps the first nonce any rayon thread finds (even with
    // a grinding factor of 0), so both proofs run on one thread: the nonce is then the same
    // and the proofs must be equal byte for byte.
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("rayon pool");
    let (expected, actual) = one_thread.install(|| {
        let expected = cpu.prove(trace).expect("CPU proof").to_bytes();
        let actual =
            gpu.prove(fib::FibTrace::new(3, 1 << log_steps)).expect("GPU proof").to_bytes();
        (expected, actual)
    });
    assert!(expected == actual, "{label}: GpuProver proof differs from Winterfell's");

    let acceptable = AcceptableOptions::OptionSet(vec![options]);
    let verify = |bytes: &[u8]| -> bool {
        Proof::from_bytes(bytes).is_ok_and(|proof| {
            winter_verifier::verify::<fib::FibAir, H, DefaultRandomCoin<H>, MerkleTree<H>>(
                proof,
                inputs,
                &acceptable,
            )
            .is_ok()
        })
    };
    assert!(verify(&actual), "{label}: GPU proof does not verify");
    let mut rng = StdRng::seed_from_u64(actual.len() as u64);
    for _ in 0..4 {
        let mut tampered = actual.clone();
        let at = rng.random_range(0..tampered.len());
        tampered[at] ^= 1 << rng.random_range(0..8);
        assert!(!verify(&tampered), "{label}: proof with byte {at} flipped was accepted");
    }
}

// PROOF OF WORK
// ================================================================================================

/// Whether miden-crypto's coin of `hash` with sponge state `state` accepts `nonce`.
fn coin_accepts(hash: HashFunction, state: [Felt; 12], nonce: u64, factor: u32) -> bool {
    use miden_crypto::rand::{RpoRandomCoin, RpxRandomCoin};
    use winter_crypto::RandomCoin;
    let zeros = match hash {
        HashFunction::Rpo256 => {
            RpoRandomCoin::from_parts(state, Rpo256::RATE_RANGE.start).check_leading_zeros(nonce)
        },
        _ => RpxRandomCoin::from_parts(state, Rpx256::RATE_RANGE.start).check_leading_zeros(nonce),
    };
    zeros >= factor
}

/// The proof-of-work search on `committer` against miden-crypto's coins tried nonce by nonce
/// from 1: `count` random sponge states per hash (raw words, so non-canonical ones too; every
/// third with a non-canonical word where the nonce is added), factors in `factors`; then the
/// requests a backend must refuse.
pub fn check_grind(
    committer: &dyn GpuCommitter,
    seed: u64,
    count: usize,
    factors: std::ops::RangeInclusive<u32>,
) {
    use miden_gpu::grind::{GrindRequest, GRIND_HASHES};
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..count {
        for hash in GRIND_HASHES {
            let mut state: [Felt; 12] = std::array::from_fn(|_| Felt::from_mont(rng.random()));
            if i % 3 == 0 {
                let above_p = Felt::MODULUS + rng.random_range(0..u64::from(u32::MAX));
                state[4] = Felt::from_mont(above_p);
            }
            let factor = rng.random_range(factors.clone());
            let want = (1..).find(|&n| coin_accepts(hash, state, n, factor)).expect("a nonce");
            let request = GrindRequest { hash, state, grinding_factor: factor };
            let got = committer.grind(&request).unwrap_or_else(|e| panic!("{hash}: {e}"));
            assert_eq!(got, want, "{hash}, factor {factor}, case {i}");
        }
    }
    let state = std::array::from_fn(|_| random_felt(&mut rng));
    let blake = GrindRequest { hash: HashFunction::Blake3_256, state, grinding_factor: 4 };
    assert!(matches!(committer.grind(&blake), Err(GpuError::UnsupportedHasher(_))));
    let huge = GrindRequest { hash: HashFunction::Rpo256, state, grinding_factor: 65 };
    assert!(matches!(committer.grind(&huge), Err(GpuError::InvalidGrinding(_))));
}

// WIDE, SHORT LDES
// ================================================================================================

/// How `got` differs from `want` (polynomials, row width, LDE elements, the first differing leaf
/// and node), as one line per kind of difference; empty where they agree.
pub fn commitment_differences(got: &Commitment, want: &Commitment) -> Vec<String> {
    let mut out = Vec::new();
    let bad_polys = got.polys.iter().zip(&want.polys).filter(|(g, w)| g != w).count();
    if got.polys.len() != want.polys.len() || bad_polys > 0 {
        out.push(format!("{bad_polys} of {} polynomials", want.polys.len()));
    }
    if got.lde.row_width != want.lde.row_width {
        out.push(format!("row width {} against {}", got.lde.row_width, want.lde.row_width));
    }
    let (w, rw) = (&want.lde.data, want.lde.row_width);
    let bad: Vec<usize> =
        (0..w.len().min(got.lde.data.len())).filter(|&i| got.lde.data[i] != w[i]).collect();
    if got.lde.data.len() != w.len() || !bad.is_empty() {
        let rows: std::collections::BTreeSet<usize> = bad.iter().map(|i| i / rw).collect();
        let cols: std::collections::BTreeSet<usize> = bad.iter().map(|i| i % rw).collect();
        out.push(format!(
            "{} LDE elements in rows {:?}.. and columns {:?}..{:?}",
            bad.len(),
            rows.iter().take(4).collect::<Vec<_>>(),
            cols.first(),
            cols.last()
        ));
    }
    if let Some(i) = first_difference(&got.leaves, &want.leaves) {
        out.push(format!("leaf {i}"));
    }
    if let Some(i) = first_difference(got.nodes.get(1..).unwrap_or(&[]), &want.nodes[1..]) {
        out.push(format!("node {}", i + 1));
    }
    out
}

/// Commitments of 200 to 330 base columns over LDEs of 16 to 128 rows (the shapes where rows are
/// wider than the LDE is long), each against the CPU's; the differences found, labelled.
pub fn wide_short_lde_differences(committer: &dyn GpuCommitter, seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut found = Vec::new();
    for (log_rows, blowup) in [(1, 16), (2, 8), (3, 4), (4, 2), (3, 8), (5, 4), (2, 4)] {
        for cols in [200, 247, 249, 250, 256, 257, 324, 330] {
            let columns: Vec<Vec<Felt>> = (0..cols)
                .map(|_| (0..1usize << log_rows).map(|_| random_felt(&mut rng)).collect())
                .collect();
            let refs: Vec<&[Felt]> = columns.iter().map(|c| c.as_slice()).collect();
            let request = CommitRequest {
                input: PolyInput::Trace { columns: &refs },
                blowup,
                row_hashing: RowHashing::WholeRow,
                hash: HashFunction::Rpo256,
            };
            let want = CpuCommitter::new().commit(&request).expect("CPU commitment");
            let label = format!("2^{log_rows} rows x {cols} columns, blowup {blowup}");
            match committer.commit(&request) {
                Ok(got) => {
                    let differences = commitment_differences(&got, &want);
                    if !differences.is_empty() {
                        found.push(format!("{label}: {}", differences.join("; ")));
                    }
                },
                Err(error) => found.push(format!("{label}: {error}")),
            }
        }
    }
    found
}

/// Extension-field segments of the same kind (the shapes the fuzz found): each through
/// [`check_case`], the failures' messages collected.
pub fn wide_short_case_failures(committer: &dyn GpuCommitter, seed: u64) -> Vec<String> {
    let cases = [
        (4, 125, 2, 2, 1, HashFunction::Rpo256),
        (3, 83, 4, 3, 1, HashFunction::Rpo256),
        (1, 83, 16, 3, 1, HashFunction::Rpo256),
        (2, 125, 8, 2, 1, HashFunction::Rpo256),
        (1, 108, 16, 3, 1, HashFunction::Rpx256),
        (4, 160, 2, 2, 4, HashFunction::Poseidon2),
        (3, 60, 8, 3, 1, HashFunction::Blake3_256),
    ];
    let mut found = Vec::new();
    for (i, (log_rows, cols, blowup, extension, partitions, hash)) in cases.into_iter().enumerate()
    {
        let case = Case { log_rows, cols, blowup, extension, partitions, hash, composition: false };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_case(committer, &case, seed + i as u64)
        }));
        if let Err(panic) = outcome {
            let text = panic.downcast_ref::<String>().cloned().unwrap_or_default();
            found.push(text);
        }
    }
    found
}
