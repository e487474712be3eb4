//! [`ResidentPolys`]: polynomials a backend keeps in its device memory after a commitment.

use std::{any::Any, fmt, sync::Arc};

use crate::backend::Backend;

/// The polynomials of a commitment left in a backend's device memory, so that later steps of a
/// proof (the DEEP composition) read them where they are instead of uploading them again. The
/// memory is freed when the last clone is dropped.
#[derive(Clone)]
pub struct ResidentPolys {
    backend: Backend,
    num_cols: usize,
    poly_len: usize,
    storage: Arc<dyn Any + Send + Sync>,
}

impl ResidentPolys {
    /// Wraps a backend's storage of `num_cols` base columns of `poly_len` coefficients.
    pub fn new(
        backend: Backend,
        num_cols: usize,
        poly_len: usize,
        storage: impl Any + Send + Sync,
    ) -> Self {
        Self { backend, num_cols, poly_len, storage: Arc::new(storage) }
    }

    /// The backend that holds them.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Number of base columns.
    pub fn num_cols(&self) -> usize {
        self.num_cols
    }

    /// Coefficients per column.
    pub fn poly_len(&self) -> usize {
        self.poly_len
    }

    /// The backend's storage, if it is of type `T`.
    pub fn storage<T: Any>(&self) -> Option<&T> {
        self.storage.downcast_ref()
    }
}

impl fmt::Debug for ResidentPolys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResidentPolys")
            .field("backend", &self.backend)
            .field("num_cols", &self.num_cols)
            .field("poly_len", &self.poly_len)
            .finish_non_exhaustive()
    }
}
