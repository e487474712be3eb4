//! LDE rows kept on the GPUs after a commitment, read at the query positions alone.
//!
//! A commitment that keeps its rows skips their row-major copies and downloads; each GPU keeps
//! its `lde` buffer instead (its share of the columns, column-major, each column coset by coset:
//! element `t` of coset `k` of local column `c` at `(c·blowup + k)·n + t`). A read gathers the
//! queried rows' words there (`gather_words`) and downloads them alone.

use std::sync::Arc;

use miden_crypto::Felt;

use super::{fri::gather_to_host, gpu::Gpu, recovery::recover, resident::ResidentShare};
use crate::{
    committer::KeptRows,
    error::{GpuError, Result},
    hash::canonical_mont,
};

/// A commitment's LDE rows on the GPUs of one committer.
pub(super) struct CudaKeptRows {
    pub gpus: Arc<Vec<Gpu>>,
    /// Each GPU's columns with its `lde` buffer, in column order.
    pub shares: Vec<ResidentShare>,
    /// Polynomial length `n`.
    pub poly_len: usize,
    /// log2 of the blowup: row `p` is element `p >> log_blowup` of coset `p % blowup`.
    pub log_blowup: u32,
}

impl std::fmt::Debug for CudaKeptRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cols: usize = self.shares.iter().map(|s| s.cols.len()).sum();
        f.debug_struct("CudaKeptRows")
            .field("rows", &(self.poly_len << self.log_blowup))
            .field("cols", &cols)
            .finish_non_exhaustive()
    }
}

impl KeptRows for CudaKeptRows {
    /// [`CudaKeptRows::gather`], refused at once where the GPUs are lost; after an error the GPUs
    /// are drained as after a failed call of the committer.
    fn read(&self, positions: &[usize]) -> Result<Vec<Vec<Felt>>> {
        let health = &self.gpus[0].health;
        health.usable()?;
        let lde_len = self.poly_len << self.log_blowup;
        if let Some(&p) = positions.iter().find(|&&p| p >= lde_len) {
            return Err(GpuError::RowOutOfRange { row: p, rows: lde_len });
        }
        let _span = tracing::info_span!("cuda.read_rows", rows = positions.len()).entered();
        let mut rows: Vec<Vec<Felt>> = positions.iter().map(|_| Vec::new()).collect();
        for share in &self.shares {
            let gpu = &self.gpus[share.gpu];
            // the gathered words are allocated within the GPU's budget, as a call's are
            let _turn = gpu.device.turn();
            let words = self.gather(gpu, share, positions);
            let words = match words {
                Ok(words) => words,
                Err(error) => {
                    recover(std::slice::from_ref(gpu), health, &error);
                    return Err(error);
                },
            };
            for (row, words) in rows.iter_mut().zip(words.chunks(share.cols.len().max(1))) {
                // reduced below the modulus, as the row-major copies are
                row.extend(words.iter().map(|&w| Felt::from_mont(canonical_mont(w))));
            }
        }
        Ok(rows)
    }
}

impl CudaKeptRows {
    /// The words of `share`'s columns at every position, position after position.
    fn gather(&self, gpu: &Gpu, share: &ResidentShare, positions: &[usize]) -> Result<Vec<u64>> {
        let (n, blowup) = (self.poly_len, 1usize << self.log_blowup);
        let indices: Vec<u64> = positions
            .iter()
            .flat_map(|&p| {
                let (t, k) = (p >> self.log_blowup, p & (blowup - 1));
                (0..share.cols.len()).map(move |c| (((c * blowup + k) * n) + t) as u64)
            })
            .collect();
        gather_to_host(gpu, &[(share.buffer.as_slice().as_words(), indices)])
    }
}
