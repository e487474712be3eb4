//! Bad input through the public API is answered with a typed error, never a panic.

use std::sync::Arc;

use miden_crypto::hash::rpo::Rpo256;
use miden_gpu::{
    commit_composition,
    deep::{CombineRequest, EvaluateRequest},
    fri::{FriLayers, FriRequest, FriShape},
    Backend, BackendOptions, CommitRequest, CpuCommitter, DeepError, Digest, Felt, FriError,
    GpuCommitter, GpuError, GpuTraceLde, HashFunction, LdeRows, PolyInput, RowHashing,
};
use winter_air::{PartitionOptions, TraceInfo};
use winter_math::{fft, fields::QuadExtension, FieldElement, StarkField};
use winter_prover::{matrix::ColMatrix, StarkDomain};

fn column(n: usize) -> Vec<Felt> {
    (1..=n as u64).map(|i| Felt::new(i.wrapping_mul(0x9E37_79B9_7F4A_7C15))).collect()
}

fn commit(columns: &[&[Felt]], blowup: usize) -> Result<miden_gpu::Commitment, GpuError> {
    CpuCommitter::new().commit(&CommitRequest {
        input: PolyInput::Trace { columns },
        blowup,
        row_hashing: RowHashing::WholeRow,
        hash: HashFunction::Rpo256,
    })
}

#[test]
fn trace_length_not_a_power_of_two() {
    for n in [0, 1, 3, 6, 100] {
        let c = column(n);
        assert_eq!(commit(&[&c], 2).unwrap_err(), GpuError::TraceLengthNotPowerOfTwo(n));
    }
}

#[test]
fn zero_columns() {
    assert_eq!(commit(&[], 2).unwrap_err(), GpuError::ZeroColumns);
    let components: [&[Felt]; 0] = [];
    let err = commit_composition::<Felt>(
        &CpuCommitter::new(),
        &[],
        8,
        1,
        2,
        PartitionOptions::default(),
        HashFunction::Rpx256,
    );
    assert_eq!(err.unwrap_err(), GpuError::TraceLengthNotPowerOfTwo(0));
    let err = CpuCommitter::new().commit(&CommitRequest {
        input: PolyInput::Composition { components: &components, column_len: 8, num_columns: 1 },
        blowup: 2,
        row_hashing: RowHashing::WholeRow,
        hash: HashFunction::Rpo256,
    });
    assert_eq!(err.unwrap_err(), GpuError::ZeroColumns);
}

#[test]
fn columns_of_unequal_length() {
    let (a, b) = (column(8), column(4));
    assert_eq!(
        commit(&[&a, &a, &b], 2).unwrap_err(),
        GpuError::ColumnLengthMismatch { column: 2, expected: 8, actual: 4 }
    );
}

#[test]
fn blowup_zero_one_or_not_a_power_of_two() {
    let c = column(8);
    for blowup in [0, 1, 3, 6, 12] {
        assert_eq!(commit(&[&c], blowup).unwrap_err(), GpuError::InvalidBlowup(blowup));
    }
}

#[test]
fn lde_domain_beyond_two_adicity() {
    let c = column(4);
    assert_eq!(commit(&[&c], 1 << 31).unwrap_err(), GpuError::DomainTooLarge(33));
}

#[test]
fn composition_that_does_not_split() {
    let evaluations: Vec<QuadExtension<Felt>> =
        column(32).chunks(2).map(|c| QuadExtension::new(c[0], c[1])).collect();
    let err = commit_composition(
        &CpuCommitter::new(),
        &evaluations,
        8,
        3,
        4,
        PartitionOptions::default(),
        HashFunction::Rpo256,
    );
    assert_eq!(
        err.unwrap_err(),
        GpuError::InvalidComposition { evaluations: 16, columns: 3, column_len: 8 }
    );
}

#[test]
fn zero_partition_size_and_bad_stage_inputs() {
    let c = column(8);
    let err = CpuCommitter::new().commit(&CommitRequest {
        input: PolyInput::Trace { columns: &[&c] },
        blowup: 2,
        row_hashing: RowHashing::Partitioned(0),
        hash: HashFunction::Rpo256,
    });
    assert_eq!(err.unwrap_err(), GpuError::InvalidPartition);
    let leaves = vec![Digest::from_felts([Felt::ONE; 4]); 3];
    assert_eq!(
        CpuCommitter::new().build_tree(&leaves, HashFunction::Rpo256).unwrap_err(),
        GpuError::LeafCountNotPowerOfTwo(3)
    );
    let rows = LdeRows { data: column(12).into(), row_width: 8, num_cols: 5 };
    assert_eq!(
        CpuCommitter::new().hash_rows(&rows, RowHashing::WholeRow, HashFunction::Rpx256),
        Err(GpuError::LdeRowLayout { elements: 12, row_width: 8, num_cols: 5 })
    );
}

#[test]
fn aux_segment_with_wrong_row_count() {
    let main = ColMatrix::new(vec![column(16), column(16)]);
    let info = TraceInfo::new_multi_segment(2, 1, 1, 16, vec![]);
    let domain = StarkDomain::from_twiddles(fft::get_twiddles::<Felt>(16), 4, Felt::GENERATOR);
    let (mut lde, _) = GpuTraceLde::<QuadExtension<Felt>, Rpo256>::try_new(
        &info,
        &main,
        &domain,
        PartitionOptions::default(),
        Arc::new(CpuCommitter::new()),
    )
    .unwrap();
    let aux = ColMatrix::new(vec![vec![QuadExtension::<Felt>::ONE; 8]]);
    assert_eq!(
        lde.try_set_aux_trace(&aux, &domain).unwrap_err(),
        GpuError::AuxRowMismatch { main: 16, aux: 8 }
    );
}

#[test]
fn unsupported_hasher() {
    for name in ["blake3", "sha3", "keccak", ""] {
        assert_eq!(
            name.parse::<HashFunction>().unwrap_err(),
            GpuError::UnsupportedHasher(name.into())
        );
    }
    assert_eq!("RPX256".parse::<HashFunction>().unwrap(), HashFunction::Rpx256);
    for hash in HashFunction::ALL {
        assert_eq!(hash.to_string().parse::<HashFunction>().unwrap(), hash);
    }
}

#[test]
fn unknown_backend_name_and_environment_value() {
    assert_eq!("metal".parse::<Backend>().unwrap_err(), GpuError::UnknownBackend("metal".into()));
    assert_eq!(" CUDA ".parse::<Backend>().unwrap(), Backend::Cuda);
    // The only test that touches the variable, so no other test races with it.
    std::env::set_var(miden_gpu::BACKEND_ENV, "opencl");
    assert_eq!(BackendOptions::from_env().unwrap_err(), GpuError::UnknownBackend("opencl".into()));
    std::env::set_var(miden_gpu::BACKEND_ENV, "cpu");
    assert_eq!(BackendOptions::from_env().unwrap().backend, Backend::Cpu);
    std::env::remove_var(miden_gpu::BACKEND_ENV);
    assert_eq!(BackendOptions::from_env().unwrap().backend, Backend::Auto);
}

#[test]
fn explicit_backend_unavailable_is_an_error_not_a_fallback() {
    assert_eq!(Backend::Cpu.create().unwrap().backend(), Backend::Cpu);
    #[cfg(not(feature = "cuda"))]
    assert!(matches!(
        Backend::Cuda.create().err(),
        Some(GpuError::BackendUnavailable { backend: Backend::Cuda, .. })
    ));
    // Auto always yields a committer (the CPU at worst).
    assert!(Backend::Auto.create().is_ok());
}

#[test]
fn lde_larger_than_host_memory() {
    // 2^16 rows x 100 columns is 52 MB of input, but its LDE at blowup 2^16 is 3.5 TB.
    let c = column(1 << 16);
    let columns: Vec<&[Felt]> = vec![&c; 100];
    match commit(&columns, 1 << 16) {
        Err(GpuError::OutOfMemory { memory: "host", needed, .. }) => {
            assert_eq!(needed, (1u64 << 32) * 104 * 8)
        },
        other => panic!("expected OutOfMemory, got {:?}", other.map(|_| ())),
    }
}

// SIZES THAT OVERFLOW
// ================================================================================================
// Every size is computed with checked arithmetic: dimensions whose product or power wraps a
// `usize` are typed errors naming them, never a panic and never a wrapped size that passes.

#[test]
fn lde_domain_whose_product_wraps_is_too_large() {
    // 4 · 2^62 = 2^64 wraps to 0, whose log2 would panic
    let c = column(4);
    assert_eq!(commit(&[&c], 1 << 62).unwrap_err(), GpuError::DomainTooLarge(64));
    assert_eq!(commit(&[&c], 1 << 63).unwrap_err(), GpuError::DomainTooLarge(65));
}

#[test]
fn composition_with_huge_column_count_or_length() {
    let c = column(16);
    let components: [&[Felt]; 2] = [&c, &c];
    // 2^62 columns of 4 (2^64 coefficients, wrapping to 0), 2 columns of 2^63, usize::MAX columns
    for (num_columns, column_len) in [(1 << 62, 4), (2, 1 << 63), (usize::MAX, 2), (1 << 61, 8)] {
        let err = CpuCommitter::new().commit(&CommitRequest {
            input: PolyInput::Composition { components: &components, column_len, num_columns },
            blowup: 2,
            row_hashing: RowHashing::WholeRow,
            hash: HashFunction::Rpo256,
        });
        let err = err.unwrap_err();
        assert_eq!(
            err,
            GpuError::InvalidComposition { evaluations: 16, columns: num_columns, column_len }
        );
        assert!(err.to_string().contains(&num_columns.to_string()), "{err}");
    }
}

#[test]
fn lde_rows_of_any_width_are_checked_not_divided_by() {
    let rows = LdeRows { data: column(16).into(), row_width: 0, num_cols: 0 };
    assert_eq!(rows.num_rows(), 0);
    let hash_rows = |rows: &LdeRows| {
        CpuCommitter::new().hash_rows(rows, RowHashing::WholeRow, HashFunction::Rpo256)
    };
    assert_eq!(hash_rows(&rows).unwrap_err(), GpuError::ZeroColumns);
    for row_width in [0, 3, usize::MAX] {
        let rows = LdeRows { data: column(16).into(), row_width, num_cols: 4 };
        assert_eq!(
            hash_rows(&rows),
            Err(GpuError::LdeRowLayout { elements: 16, row_width, num_cols: 4 }),
            "row width {row_width}"
        );
    }
    let rows = LdeRows { data: column(16).into(), row_width: 8, num_cols: 8 };
    assert_eq!(hash_rows(&rows).unwrap().len(), 2);
    assert!(matches!(
        CpuCommitter::new().hash_rows(&rows, RowHashing::Partitioned(usize::MAX), HashFunction::Rpo256),
        Ok(leaves) if leaves.len() == 2
    ));
}

/// Runs the FRI commit phase of `request` on the CPU backend, answering every root with
/// `alpha = 1`.
fn commit_fri(request: &FriRequest<'_>) -> Result<FriLayers, GpuError> {
    CpuCommitter::new().commit_fri(request, &mut |_| vec![Felt::ONE])
}

fn fri_request<'a>(
    components: &'a [&'a [Felt]],
    blowup: usize,
    num_layers: usize,
) -> FriRequest<'a> {
    FriRequest {
        components,
        blowup,
        folding_factor: 2,
        num_layers,
        hash: HashFunction::Rpo256,
        keep_layers: false,
    }
}

#[test]
fn fri_with_huge_layer_counts_or_domains() {
    let c = column(8);
    let components: [&[Felt]; 1] = [&c];
    // 2^32 + 1 layers truncated to 32 bits would be one layer, which fits
    for num_layers in [(1 << 32) + 1, 1 << 32, usize::MAX, 64, 5] {
        let err = commit_fri(&fri_request(&components, 2, num_layers)).unwrap_err();
        assert!(
            matches!(&err, GpuError::InvalidFri(FriError::LayerCount { layers, .. }) if *layers == num_layers),
            "{num_layers} layers: {err}"
        );
    }
    assert_eq!(commit_fri(&fri_request(&components, 2, 3)).unwrap().remainder.len(), 2);
    // 8 · 2^62 = 2^65 wraps to 0
    assert_eq!(
        commit_fri(&fri_request(&components, 1 << 62, 1)).unwrap_err(),
        GpuError::DomainTooLarge(65)
    );
}

#[test]
fn fri_layer_rows_past_the_domain_are_none() {
    let shape = FriShape { ext_degree: 2, poly_len: 8, domain_len: 32 };
    assert_eq!(shape.layer_rows(0, 4), 8);
    assert_eq!(shape.layer_rows(1, 4), 2);
    assert_eq!(shape.layer_rows(2, 4), 0);
    for layer in [40, 1 << 32, usize::MAX] {
        assert_eq!(shape.layer_rows(layer, 16), 0, "layer {layer}");
    }
    assert_eq!(shape.layer_rows(0, 0), 0);
}

#[test]
fn deep_requests_with_huge_extension_degrees() {
    for ext_degree in [0, 4, 1 << 63, usize::MAX] {
        let evaluate = EvaluateRequest { segments: &[], ext_degree, points: &[] };
        let combine = CombineRequest { segments: &[], ext_degree, coefficients: &[] };
        for err in [evaluate.validate(Backend::Cpu), combine.validate(Backend::Cpu)] {
            assert_eq!(
                err,
                Err(GpuError::InvalidDeep(DeepError::ExtensionDegree(ext_degree))),
                "extension degree {ext_degree}"
            );
        }
    }
}
