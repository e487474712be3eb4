//! Constant tables uploaded to the device: the Rescue and Poseidon2 constants (from
//! miden-crypto), NTT
//! twiddles (from winter-math's roots of unity) and power tables for coset scaling. None is
//! typed in by hand; each is built from the crates' own values when first needed and cached.

use std::collections::HashMap;

use miden_crypto::{
    hash::{poseidon2::Poseidon2, rpo::Rpo256, rpx::Rpx256},
    Felt,
};
use winter_math::{get_power_series, FieldElement, StarkField};

use super::{context::refused, pipelines::Pipelines};
use crate::{error::Result, hash::HashFunction, host::stage_twiddles};

/// Rounds and width the WGSL `HashConstants` struct is laid out for.
const ROUNDS: usize = 7;
const WIDTH: usize = 12;

/// Entries per half of a power table (`powers.wgsl`: x^i and x^(2^16 i), i < 2^16).
const POWER_HALF: usize = 1 << 16;

/// The bytes of field elements in their Montgomery form, as the host stores them.
pub(super) fn felt_bytes(elements: &[Felt]) -> &[u8] {
    Felt::elements_as_bytes(elements)
}

// RESCUE CONSTANTS
// ================================================================================================

/// The uniform block of `rescue.wgsl` for one hash function, bound as group 1.
fn rescue_block(
    ark1: &[[Felt; WIDTH]],
    ark2: &[[Felt; WIDTH]],
    mds: &[[Felt; WIDTH]],
) -> Result<Vec<u8>> {
    if ark1.len() != ROUNDS || ark2.len() != ROUNDS || mds.len() != WIDTH {
        let condition = format!(
            "Rescue tables have {}/{} rounds and {} MDS rows; the kernels expect {ROUNDS} and \
             {WIDTH}",
            ark1.len(),
            ark2.len(),
            mds.len()
        );
        return Err(refused("kernel constants", condition));
    }
    let mut bytes = Vec::new();
    for row in ark1.iter().chain(ark2) {
        bytes.extend_from_slice(felt_bytes(row));
    }
    // The quad kernels (rescue_quad.wgsl) use row e of the matrix for output 3q + e of every
    // lane q: they need MDS[i][j] = MDS[0][(j - i) mod 12].
    let circulant =
        (0..WIDTH).all(|i| (0..WIDTH).all(|j| mds[i][j] == mds[0][(j + WIDTH - i) % WIDTH]));
    if !circulant {
        return Err(refused(
            "kernel constants",
            "the MDS matrix is not circulant, as the kernels expect",
        ));
    }
    for row in mds {
        let coefficients: Vec<u64> = row.iter().map(|x| x.as_int()).collect();
        // apply_mds accumulates 16-bit digits times coefficients in 32 bits.
        if coefficients.iter().sum::<u64>() >= 1 << 16 {
            return Err(refused("kernel constants", "MDS coefficients too large for the kernels"));
        }
        for c in coefficients {
            bytes.extend_from_slice(&(c as u32).to_le_bytes());
        }
    }
    Ok(bytes)
}

// POSEIDON2 CONSTANTS
// ================================================================================================

/// The uniform block of `poseidon2.wgsl`: `ARK_EXT_INITIAL`, `ARK_EXT_TERMINAL`, `ARK_INT`,
/// `MAT_DIAG` in Montgomery form, padded to whole 16-byte vectors.
fn poseidon2_block() -> Result<Vec<u8>> {
    if Poseidon2::STATE_WIDTH != WIDTH {
        return Err(refused(
            "kernel constants",
            format!("Poseidon2 has width {}; the kernels expect {WIDTH}", Poseidon2::STATE_WIDTH),
        ));
    }
    let mut elements: Vec<Felt> = Poseidon2::ARK_EXT_INITIAL
        .iter()
        .chain(&Poseidon2::ARK_EXT_TERMINAL)
        .flatten()
        .chain(&Poseidon2::ARK_INT)
        .chain(&Poseidon2::MAT_DIAG)
        .copied()
        .collect();
    elements.resize(elements.len().next_multiple_of(2), Felt::ZERO);
    Ok(felt_bytes(&elements).to_vec())
}

// BIND GROUPS
// ================================================================================================

/// The constants of each algebraic hash function, each as a bind group for group 1.
pub(super) struct HashConstants {
    groups: HashMap<HashFunction, ::wgpu::BindGroup>,
}

impl HashConstants {
    /// Uploads `Rpo256::{ARK1, ARK2, MDS}`, `Rpx256::{ARK1, ARK2, MDS}` and Poseidon2's tables.
    pub fn new(
        device: &::wgpu::Device,
        queue: &::wgpu::Queue,
        pipelines: &Pipelines,
    ) -> Result<Self> {
        let blocks = [
            (HashFunction::Rpo256, rescue_block(&Rpo256::ARK1, &Rpo256::ARK2, &Rpo256::MDS)?),
            (HashFunction::Rpx256, rescue_block(&Rpx256::ARK1, &Rpx256::ARK2, &Rpx256::MDS)?),
            (HashFunction::Poseidon2, poseidon2_block()?),
        ];
        let groups = blocks
            .into_iter()
            .map(|(hash, bytes)| {
                let buffer = device.create_buffer(&::wgpu::BufferDescriptor {
                    label: Some("hash constants"),
                    size: bytes.len() as u64,
                    usage: ::wgpu::BufferUsages::UNIFORM | ::wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                queue.write_buffer(&buffer, 0, &bytes);
                let group = device.create_bind_group(&::wgpu::BindGroupDescriptor {
                    label: Some("hash constants"),
                    layout: &pipelines.constants_layout,
                    entries: &[::wgpu::BindGroupEntry {
                        binding: 0,
                        resource: buffer.as_entire_binding(),
                    }],
                });
                (hash, group)
            })
            .collect();
        Ok(Self { groups })
    }

    /// The bind group of `hash`'s constants.
    pub fn group(&self, hash: HashFunction) -> &::wgpu::BindGroup {
        &self.groups[&hash]
    }
}

// TWIDDLES AND POWER TABLES
// ================================================================================================

/// Which power tables a buffer from [`Tables::powers`] holds, and where.
#[derive(Debug, Clone, Copy)]
pub(super) struct PowerTables {
    /// Element offset of the table of `GENERATOR`.
    pub generator: u32,
    /// Element offset of the table of the LDE domain's root of unity.
    pub root: u32,
    /// Element offset of the table of `GENERATOR^-1`.
    pub generator_inv: u32,
}

/// Twiddle and power tables, made on first use and kept for later calls.
#[derive(Default)]
pub(super) struct Tables {
    twiddles: HashMap<(u32, bool), ::wgpu::Buffer>,
    powers: HashMap<u32, ::wgpu::Buffer>,
}

impl Tables {
    /// The twiddles of a size-2^log_n transform, stage by stage (see [`stage_twiddles`]).
    pub fn twiddles(
        &mut self,
        device: &::wgpu::Device,
        queue: &::wgpu::Queue,
        log_n: u32,
        inverse: bool,
    ) -> ::wgpu::Buffer {
        self.twiddles
            .entry((log_n, inverse))
            .or_insert_with(|| {
                upload_table(device, queue, "twiddles", &stage_twiddles(log_n, inverse))
            })
            .clone()
    }

    /// The power tables of `GENERATOR`, the root of unity of order 2^log_domain and
    /// `GENERATOR^-1`, in one buffer (see `powers.wgsl`).
    pub fn powers(
        &mut self,
        device: &::wgpu::Device,
        queue: &::wgpu::Queue,
        log_domain: u32,
    ) -> (::wgpu::Buffer, PowerTables) {
        let layout = PowerTables {
            generator: 0,
            root: 2 * POWER_HALF as u32,
            generator_inv: 4 * POWER_HALF as u32,
        };
        let buffer = self
            .powers
            .entry(log_domain)
            .or_insert_with(|| {
                let bases =
                    [Felt::GENERATOR, Felt::get_root_of_unity(log_domain), Felt::GENERATOR.inv()];
                let table: Vec<Felt> = bases.iter().flat_map(|&x| power_table(x)).collect();
                upload_table(device, queue, "powers", &table)
            })
            .clone();
        (buffer, layout)
    }
}

/// x^i for i < 2^16, then x^(2^16 i) for i < 2^16.
fn power_table(x: Felt) -> Vec<Felt> {
    let mut table = get_power_series(x, POWER_HALF);
    table.extend(get_power_series(x.exp(POWER_HALF as u64), POWER_HALF));
    table
}

/// A read-only storage buffer holding `elements` (within one binding).
pub(super) fn upload_table(
    device: &::wgpu::Device,
    queue: &::wgpu::Queue,
    label: &str,
    elements: &[Felt],
) -> ::wgpu::Buffer {
    let bytes = felt_bytes(elements);
    let buffer = device.create_buffer(&::wgpu::BufferDescriptor {
        label: Some(label),
        size: bytes.len() as u64,
        usage: ::wgpu::BufferUsages::STORAGE | ::wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    queue.write_buffer(&buffer, 0, bytes);
    buffer
}
