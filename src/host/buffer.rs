//! [`HostBuffer`]: the host memory a large result lives in, either a vector or a block a backend
//! lends from memory it keeps registered for DMA, so that a warm backend writes its results
//! straight into memory that is already faulted in and page-locked.

use std::{fmt, ops, ptr::NonNull};

/// A block of host memory lent by a backend: handed back to its owner when dropped.
///
/// # Safety
/// [`Self::as_ptr`] must point to [`Self::bytes`] bytes that stay valid and are used by no one
/// else until the block is dropped.
pub(crate) unsafe trait LentBlock: Send + Sync {
    /// The first byte.
    fn as_ptr(&self) -> NonNull<u8>;
    /// Bytes in the block.
    fn bytes(&self) -> usize;
}

/// `len` values of `T` in host memory: a vector, or a block a backend lent (and takes back when
/// the buffer drops). It reads and writes as a slice; [`Self::into_vec`] gives a vector.
pub struct HostBuffer<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
    owner: Owner,
}

enum Owner {
    /// A vector's allocation of this many elements.
    Vec { capacity: usize },
    /// A backend's block, handed back when this drops.
    Lent { _block: Box<dyn LentBlock> },
}

// SAFETY: the buffer owns its memory exclusively, as a `Vec<T>` does, and a lent block is
// `Send` (`LentBlock: Send`).
unsafe impl<T: Copy + Send> Send for HostBuffer<T> {}
// SAFETY: a shared buffer only gives out `&[T]`, as a shared `Vec<T>` does, and a lent block is
// `Sync` (`LentBlock: Sync`).
unsafe impl<T: Copy + Sync> Sync for HostBuffer<T> {}

impl<T: Copy> HostBuffer<T> {
    /// The first `len` values of `block` as a buffer.
    ///
    /// # Safety
    /// The block must be aligned for `T`, hold at least `len` values and its first `len` values
    /// must be initialized values of `T`.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code, reason = "only the CUDA backend lends"))]
    pub(crate) unsafe fn lent(block: Box<dyn LentBlock>, len: usize) -> Self {
        debug_assert!(len * size_of::<T>() <= block.bytes());
        debug_assert!(block.as_ptr().as_ptr().cast::<T>().is_aligned());
        Self { ptr: block.as_ptr().cast(), len, owner: Owner::Lent { _block: block } }
    }

    /// Whether the values live in a block a backend lent.
    pub fn is_lent(&self) -> bool {
        matches!(self.owner, Owner::Lent { .. })
    }

    /// The values as a vector: the same allocation where they are in one, a copy otherwise.
    pub fn into_vec(self) -> Vec<T> {
        match self.owner {
            Owner::Vec { capacity } => {
                let this = std::mem::ManuallyDrop::new(self);
                // SAFETY: taken apart from the vector of `From<Vec<T>>`, which is not dropped.
                unsafe { Vec::from_raw_parts(this.ptr.as_ptr(), this.len, capacity) }
            },
            Owner::Lent { .. } => self.to_vec(),
        }
    }
}

impl<T: Copy> From<Vec<T>> for HostBuffer<T> {
    fn from(vec: Vec<T>) -> Self {
        let mut vec = std::mem::ManuallyDrop::new(vec);
        let (len, capacity) = (vec.len(), vec.capacity());
        // SAFETY: a vector's pointer is never null (dangling where it has not allocated).
        let ptr = unsafe { NonNull::new_unchecked(vec.as_mut_ptr()) };
        Self { ptr, len, owner: Owner::Vec { capacity } }
    }
}

impl<T: Copy> Drop for HostBuffer<T> {
    fn drop(&mut self) {
        if let Owner::Vec { capacity } = self.owner {
            // SAFETY: the parts of the vector this buffer was made from.
            drop(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), self.len, capacity) });
        }
        // a lent block goes back to its owner as the `Owner` drops
    }
}

impl<T: Copy> ops::Deref for HostBuffer<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialized values, owned by this buffer.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> ops::DerefMut for HostBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Clone for HostBuffer<T> {
    /// A copy in a vector (a lent block stays with its one owner).
    fn clone(&self) -> Self {
        self.to_vec().into()
    }
}

impl<T: Copy + fmt::Debug> fmt::Debug for HostBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: Copy + PartialEq> PartialEq for HostBuffer<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Copy + Eq> Eq for HostBuffer<T> {}

impl<T: Copy> Default for HostBuffer<T> {
    fn default() -> Self {
        Vec::new().into()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    };

    use super::*;

    /// A block on the heap that counts its returns.
    struct CountingBlock {
        words: Box<[u64]>,
        returned: Arc<AtomicUsize>,
    }

    // SAFETY: the boxed words are this block's alone.
    unsafe impl LentBlock for CountingBlock {
        fn as_ptr(&self) -> NonNull<u8> {
            NonNull::from(&self.words[0]).cast()
        }
        fn bytes(&self) -> usize {
            self.words.len() * 8
        }
    }

    impl Drop for CountingBlock {
        fn drop(&mut self) {
            self.returned.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_vector_round_trips_without_a_copy() {
        let vec: Vec<u64> = (0..1000).map(|i| i * 7 + 3).collect();
        let want = vec.clone();
        let ptr = vec.as_ptr();
        let mut buffer = HostBuffer::from(vec);
        assert!(!buffer.is_lent());
        assert_eq!(&*buffer, &want[..]);
        buffer[5] = 1;
        let back = buffer.into_vec();
        assert_eq!(back.as_ptr(), ptr, "the same allocation");
        assert_eq!(back[5], 1);
        assert_eq!(back[6], want[6]);
    }

    #[test]
    fn a_lent_block_is_read_as_a_slice_and_returned_once() {
        let returned = Arc::new(AtomicUsize::new(0));
        let words: Box<[u64]> = (0..64).map(|i| i * 11 + 1).collect();
        let block = CountingBlock { words, returned: returned.clone() };
        // SAFETY: 64 initialized words; 40 of them are the buffer.
        let buffer: HostBuffer<u64> = unsafe { HostBuffer::lent(Box::new(block), 40) };
        assert!(buffer.is_lent());
        assert_eq!(buffer.len(), 40);
        assert_eq!(buffer[39], 39 * 11 + 1);
        let copy = buffer.clone();
        assert!(!copy.is_lent());
        assert_eq!(copy, buffer);
        assert_eq!(buffer.into_vec(), copy.into_vec());
        assert_eq!(returned.load(Ordering::SeqCst), 1);
    }
}
