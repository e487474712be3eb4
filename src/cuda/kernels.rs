//! Every kernel launch of the backend, typed: one function per kernel signature of `cuda/*.cu`,
//! whose parameters are the kernel's in order (device ranges as [`DeviceSlice`] for `const T*`
//! and [`DeviceSliceMut`] for `T*`, scalars as `u32`/`u64`), and which packs them and launches.
//! No other module builds kernel arguments.
//!
//! Each signature is also a marker type (in [`sig`]) that the kernels loaded with it carry
//! ([`Kernel<S>`]), listing the kernels that have it ([`Signature::KERNELS`]) and its parameters
//! (`Signature::PARAMS`, derived from the same list as the function's). These lists are the one
//! place kernels are named: [`KERNELS`] is generated from them, and the module load takes each
//! signature's kernels from its list, in order (the kernels of several hash functions or
//! extension degrees are listed in the order the load expects). A unit test parses the
//! `extern "C" __global__` definitions in `cuda/*.cu` and checks every kernel's parameters
//! against its signature's, so a drift between the Rust and CUDA sides fails without a GPU.
//!
//! The launches stay `unsafe`: the types fix what each argument is, but the kernels index the
//! ranges with the scalars, and a range must stay allocated until its kernel completes.

use core::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{sys, CudaContext};
use miden_crypto::Felt;

#[cfg(test)]
use super::launch::Param;
use super::{
    buffer::{DeviceElement, DeviceSlice, DeviceSliceMut, PeerSlice},
    driver::{refused, DriverResult, Stream},
    launch::{Kernel, Signature},
};
use crate::hash::Digest;

// ARGUMENTS
// ================================================================================================

/// A Rust value that crosses the kernel boundary as one parameter.
pub(super) trait KernelArg {
    /// The CUDA parameter it is.
    #[cfg(test)]
    const PARAM: Param;
    /// What the kernel receives (a device address or the scalar).
    type Raw: Copy;
    /// The value to pass to a kernel launched on `ctx`'s GPU; [`GpuError::Device`] for a range
    /// of another GPU.
    fn into_raw(self, ctx: &Arc<CudaContext>) -> DriverResult<Self::Raw>;
}

impl KernelArg for u32 {
    #[cfg(test)]
    const PARAM: Param = Param::U32;
    type Raw = u32;
    fn into_raw(self, _: &Arc<CudaContext>) -> DriverResult<u32> {
        Ok(self)
    }
}

impl KernelArg for u64 {
    #[cfg(test)]
    const PARAM: Param = Param::U64;
    type Raw = u64;
    fn into_raw(self, _: &Arc<CudaContext>) -> DriverResult<u64> {
        Ok(self)
    }
}

/// `ptr`, if `owner` (the context of the GPU holding it) is `ctx`.
fn on_gpu(
    ptr: sys::CUdeviceptr,
    owner: &Arc<CudaContext>,
    ctx: &Arc<CudaContext>,
) -> DriverResult<sys::CUdeviceptr> {
    if Arc::ptr_eq(owner, ctx) {
        Ok(ptr)
    } else {
        Err(refused("cuLaunchKernel", "a kernel argument lies on another GPU than the launch"))
    }
}

impl<T: DeviceElement> KernelArg for DeviceSlice<'_, T> {
    #[cfg(test)]
    const PARAM: Param = Param::ConstPtr(T::CUDA_WORD);
    type Raw = sys::CUdeviceptr;
    fn into_raw(self, ctx: &Arc<CudaContext>) -> DriverResult<sys::CUdeviceptr> {
        on_gpu(self.device_ptr(), self.ctx(), ctx)
    }
}

impl<T: DeviceElement> KernelArg for DeviceSliceMut<'_, T> {
    #[cfg(test)]
    const PARAM: Param = Param::MutPtr(T::CUDA_WORD);
    type Raw = sys::CUdeviceptr;
    fn into_raw(self, ctx: &Arc<CudaContext>) -> DriverResult<sys::CUdeviceptr> {
        on_gpu(self.device_ptr(), self.ctx(), ctx)
    }
}

/// A range of this GPU or of a peer it may read (see [`PeerSlice`]).
impl<T: DeviceElement> KernelArg for PeerSlice<'_, T> {
    #[cfg(test)]
    const PARAM: Param = Param::ConstPtr(T::CUDA_WORD);
    type Raw = sys::CUdeviceptr;
    fn into_raw(self, _: &Arc<CudaContext>) -> DriverResult<sys::CUdeviceptr> {
        Ok(self.device_ptr())
    }
}

/// An optional output: null where absent.
impl<T: DeviceElement> KernelArg for Option<DeviceSliceMut<'_, T>> {
    #[cfg(test)]
    const PARAM: Param = Param::MutPtr(T::CUDA_WORD);
    type Raw = sys::CUdeviceptr;
    fn into_raw(self, ctx: &Arc<CudaContext>) -> DriverResult<sys::CUdeviceptr> {
        self.map_or(Ok(0), |slice| slice.into_raw(ctx))
    }
}

/// The launch shape: `blocks` blocks of `threads_per_block` threads.
#[derive(Debug, Clone, Copy)]
pub(super) struct Grid {
    pub blocks: u32,
    pub threads_per_block: u32,
}

// SIGNATURES AND LAUNCHES
// ================================================================================================

/// Defines, per signature, its marker type in [`sig`] with its [`Signature`], and its launch
/// function, from one list of parameters; and [`KERNELS`], every signature's kernels in order.
macro_rules! kernel_signatures {
    ($(
        $(#[doc = $doc:literal])*
        $marker:ident => fn $launch:ident [$($kernel:literal),+ $(,)?]
            ($($param:ident: $ty:ty),* $(,)?);
    )*) => {
        /// The kernel signatures, as marker types for [`Kernel`].
        pub(super) mod sig {
            $(
                $(#[doc = $doc])*
                pub(in crate::cuda) enum $marker {}
            )*
        }

        $(
            impl Signature for sig::$marker {
                const KERNELS: &'static [&'static str] = &[$($kernel),+];
                #[cfg(test)]
                const PARAMS: &'static [Param] = &[$(<$ty as KernelArg>::PARAM),*];
            }

            $(#[doc = $doc])*
            ///
            /// Launches `kernel` on `stream` over `grid`, with the kernel's parameters in order.
            ///
            /// # Safety
            /// The scalars must keep every access of the kernel within the ranges passed (as the
            /// kernel's comment in `cuda/` describes them), and the ranges must stay allocated
            /// until the kernel completes.
            #[allow(clippy::too_many_arguments)]
            pub(super) unsafe fn $launch(
                kernel: &Kernel<sig::$marker>,
                stream: &Stream,
                grid: Grid,
                $($param: $ty),*
            ) -> DriverResult<()> {
                $(let mut $param = KernelArg::into_raw($param, stream.ctx())?;)*
                let mut args = [$((&mut $param) as *mut _ as *mut c_void),*];
                // SAFETY: `args` are the kernel's parameters in order, of its types (checked
                // against `cuda/` by this module's test); the ranges are the caller's promise.
                unsafe { kernel.launch(stream, grid.blocks, grid.threads_per_block, &mut args) }
            }
        )*

        // the signatures' lists are the one place kernels are named: this list is theirs, and the
        // module load takes each signature's kernels from its own
        /// Every kernel the backend launches, by its `extern "C"` name, signature after
        /// signature.
        pub const KERNELS: [&str; [$($($kernel,)+)*].len()] = [$($($kernel,)+)*];

        /// Every signature: its marker's name, its kernels and its parameters.
        #[cfg(test)]
        const SIGNATURES: &[(&str, &[&str], &[Param])] = &[$((
            stringify!($marker),
            <sig::$marker as Signature>::KERNELS,
            <sig::$marker as Signature>::PARAMS,
        )),*];
    };
}

kernel_signatures! {
    /// `ntt_pass` (ntt.cu): one fused pass of butterfly stages over every segment of `data`, in
    /// place.
    NttPass => fn ntt_pass["ntt_pass"](
        data: DeviceSliceMut<'_, Felt>,
        twiddles: DeviceSlice<'_, Felt>,
        log_n: u32,
        b0: u32,
        t_bits: u32,
        c_bits: u32,
        dif: u32,
    );

    /// `scale_coefficients` (ntt.cu): natural-order polynomials from the bit-reversed
    /// coefficients of their source columns.
    ScaleCoefficients => fn scale_coefficients["scale_coefficients"](
        out: DeviceSliceMut<'_, Felt>,
        input: DeviceSlice<'_, Felt>,
        col_src: DeviceSlice<'_, u32>,
        pow_tables: DeviceSlice<'_, u64>,
        log_n: u32,
        s_bits: u32,
        src_len: u64,
        src_stride: u32,
        total: u64,
    );

    /// `coset_ntt_first_pass` (ntt.cu): the first DIT pass of the coset evaluations, scaling the
    /// coefficients by the powers of each coset's base as it loads them.
    CosetNttFirstPass => fn coset_ntt_first_pass["coset_ntt_first_pass"](
        out: DeviceSliceMut<'_, Felt>,
        input: DeviceSlice<'_, Felt>,
        col_src: DeviceSlice<'_, u32>,
        pow_tables: DeviceSlice<'_, u64>,
        twiddles: DeviceSlice<'_, Felt>,
        log_n: u32,
        t_bits: u32,
        log_slots: u32,
        s_bits: u32,
        src_len: u64,
        src_stride: u32,
    );

    /// `hash_rows_*` (hash.cu): the leaves of rows read from column-major `src`, and with
    /// `rows_out` the rows row-major. Listed in the order of `HASHES`, each whole rows then
    /// partitioned.
    HashRows => fn hash_rows[
        "hash_rows_rpo",
        "hash_rows_rpo_partitioned",
        "hash_rows_rpx",
        "hash_rows_rpx_partitioned",
        "hash_rows_poseidon2",
        "hash_rows_poseidon2_partitioned",
        "hash_rows_blake3_192",
        "hash_rows_blake3_192_partitioned",
        "hash_rows_blake3_256",
        "hash_rows_blake3_256_partitioned",
    ](
        src: DeviceSlice<'_, Felt>,
        k_stride: u64,
        t_stride: u64,
        c_stride: u64,
        num_cols: u32,
        part: u32,
        log_blowup: u32,
        k0: u32,
        log_cosets: u32,
        t0: u64,
        t_count: u64,
        leaves: DeviceSliceMut<'_, Digest>,
        rows_out: Option<DeviceSliceMut<'_, Felt>>,
        t_base: u64,
        row_width: u32,
    );

    /// `merkle_level_*` (hash.cu): `count` parents, each the hash of two adjacent children.
    /// Listed in the order of `HASHES`.
    MerkleLevel => fn merkle_level[
        "merkle_level_rpo",
        "merkle_level_rpx",
        "merkle_level_poseidon2",
        "merkle_level_blake3_192",
        "merkle_level_blake3_256",
    ](
        children: DeviceSlice<'_, Digest>,
        parents: DeviceSliceMut<'_, Digest>,
        count: u64,
    );

    /// `merkle_top_*` (hash.cu): the top `levels` levels of a tree in one block, from `parents`
    /// nodes of the level of `count` (from node `first` on, whose children are `children`) up,
    /// each level halving all three, into `nodes` (the node array below `2·count`). Listed in
    /// the order of `HASHES`.
    MerkleTop => fn merkle_top[
        "merkle_top_rpo",
        "merkle_top_rpx",
        "merkle_top_poseidon2",
        "merkle_top_blake3_192",
        "merkle_top_blake3_256",
    ](
        children: DeviceSlice<'_, Digest>,
        nodes: DeviceSliceMut<'_, Digest>,
        count: u64,
        first: u64,
        parents: u64,
        levels: u32,
    );

    /// `fri_spread` (fri.cu): the coefficients of each component, bit-reversed and zero-padded
    /// to the domain.
    FriSpread => fn fri_spread["fri_spread"](
        out: DeviceSliceMut<'_, Felt>,
        coeffs: DeviceSlice<'_, Felt>,
        poly_len: u64,
        log_domain: u32,
        total: u64,
    );

    /// `fri_to_slots` (fri.cu): the evaluations in the layer's column layout, canonical.
    FriToSlots => fn fri_to_slots["fri_to_slots"](
        out: DeviceSliceMut<'_, Felt>,
        input: DeviceSlice<'_, Felt>,
        log_domain: u32,
        rows: u64,
        degree: u32,
        total: u64,
    );

    /// `fri_fold_*` (fri.cu): one FRI layer folded into the next. Listed by extension degree,
    /// 1 to 3.
    FriFold => fn fri_fold["fri_fold_base", "fri_fold_quadratic", "fri_fold_cubic"](
        out: DeviceSliceMut<'_, Felt>,
        input: DeviceSlice<'_, Felt>,
        rows: u64,
        folding: u32,
        consts: DeviceSlice<'_, u64>,
        next_rows: u64,
    );

    /// `copy_rows` (ntt.cu): `rows` rows of `width` words from `src` (this GPU's or a peer's),
    /// row `r` at `r · src_pitch`, into `dst` at `r · dst_pitch`.
    CopyRows => fn copy_rows["copy_rows"](
        dst: DeviceSliceMut<'_, Felt>,
        src: PeerSlice<'_, Felt>,
        dst_pitch: u64,
        src_pitch: u64,
        width: u64,
        rows: u64,
    );

    /// `grind_*` (hash.cu): the nonces `start .. start + count` on a sponge coin's `state`; the
    /// smallest accepted one into `found` where it is smaller. Listed RPO, then RPX.
    Grind => fn grind["grind_rpo", "grind_rpx"](
        found: DeviceSliceMut<'_, u64>,
        state: DeviceSlice<'_, u64>,
        start: u64,
        count: u64,
        factor: u32,
    );

    /// `gather_words` (fri.cu): `count` words of `src` at `indices`, in order.
    GatherWords => fn gather_words["gather_words"](
        out: DeviceSliceMut<'_, u64>,
        src: DeviceSlice<'_, u64>,
        indices: DeviceSlice<'_, u64>,
        count: u64,
    );

    /// `deep_combine_*` (deep.cu): adds the columns of `polys`, weighted by `coeffs`, into `acc`
    /// (or writes them there with `init`). Listed by extension degree, 1 to 3.
    DeepCombine => fn deep_combine[
        "deep_combine_base",
        "deep_combine_quadratic",
        "deep_combine_cubic",
    ](
        acc: DeviceSliceMut<'_, Felt>,
        polys: DeviceSlice<'_, Felt>,
        coeffs: DeviceSlice<'_, u64>,
        poly_len: u64,
        num_cols: u32,
        col_degree: u32,
        init: u32,
    );

    /// `deep_evaluate_*` (deep.cu): each block's share of the columns' values at two points.
    /// Listed by extension degree, 1 to 3.
    DeepEvaluate => fn deep_evaluate[
        "deep_evaluate_base",
        "deep_evaluate_quadratic",
        "deep_evaluate_cubic",
    ](
        out: DeviceSliceMut<'_, Felt>,
        polys: DeviceSlice<'_, Felt>,
        points: DeviceSlice<'_, u64>,
        poly_len: u64,
        num_cols: u32,
        col_degree: u32,
        block_len: u32,
    );

    /// `composition` (composition.cu): the recorded composition at every CE step, over the
    /// trace LDE columns the column table names.
    Composition => fn composition["composition"](
        out: DeviceSliceMut<'_, Felt>,
        columns: DeviceSlice<'_, u64>,
        params: DeviceSlice<'_, u64>,
        ce_size: u64,
        log_n: u32,
        log_lde_blowup: u32,
        log_ce_blowup: u32,
    );
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::{
        cuda::program::{HASHES, KERNEL_FILES},
        hash::HashFunction,
    };

    /// A kernel definition found in the CUDA sources: its name and parameters (or why one could
    /// not be read).
    type Definition = (String, Result<Vec<Param>, String>);

    /// Every `extern "C" __global__` definition in `source`: those written out, and those a
    /// macro defines, once per use of the macro (with the kernel named by its argument).
    fn definitions(source: &str) -> Vec<Definition> {
        let text = strip_comments(&source.replace("\\\n", " "));
        let mut macros: HashMap<String, (Vec<String>, String)> = HashMap::new();
        let mut found = Vec::new();
        for line in text.lines().map(str::trim) {
            if let Some(define) = line.strip_prefix("#define") {
                let define = define.trim_start();
                let Some(open) = define.find('(') else { continue };
                let name = &define[..open];
                if name.contains(char::is_whitespace) || !define.contains("__global__") {
                    continue;
                }
                let close = open + define[open..].find(')').expect("macro parameters close");
                let params = define[open + 1..close].split(',').map(|p| p.trim().to_string());
                macros
                    .insert(name.to_string(), (params.collect(), define[close + 1..].to_string()));
            }
        }
        let mut rest = text.as_str();
        while let Some(at) = rest.find("extern \"C\" __global__") {
            let (name, params, end) = signature(&rest[at..]);
            let line_start = rest[..at].rfind('\n').map_or(0, |i| i + 1);
            if !rest[line_start..at].trim_start().starts_with("#define") {
                found.push((name, params));
            }
            rest = &rest[at + end..];
        }
        for line in text.lines().map(str::trim).filter(|l| !l.starts_with('#')) {
            let Some(open) = line.find('(') else { continue };
            let Some((macro_params, body)) = macros.get(line[..open].trim()) else { continue };
            let close = line.rfind(')').expect("macro use closes");
            let args: Vec<&str> = line[open + 1..close].split(',').map(str::trim).collect();
            let at = body.find("extern \"C\" __global__").expect("a kernel in the macro");
            let (name, params, _) = signature(&body[at..]);
            let index = macro_params.iter().position(|p| *p == name);
            let name = index.map_or(name, |i| args[i].to_string());
            found.push((name, params));
        }
        found
    }

    /// `text` without `//` and `/* */` comments.
    fn strip_comments(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        loop {
            let line = rest.find("//");
            let block = rest.find("/*");
            match (line, block) {
                (Some(l), b) if b.is_none_or(|b| l < b) => {
                    out.push_str(&rest[..l]);
                    rest = rest[l..].find('\n').map_or("", |e| &rest[l + e..]);
                },
                (_, Some(b)) => {
                    out.push_str(&rest[..b]);
                    rest = rest[b..].find("*/").map_or("", |e| &rest[b + e + 2..]);
                },
                _ => {
                    out.push_str(rest);
                    return out;
                },
            }
        }
    }

    /// The name and parameters of the kernel whose definition starts `text`
    /// (`extern "C" __global__ void [__launch_bounds__(..)] name(params)`), and the length read.
    fn signature(text: &str) -> (String, Result<Vec<Param>, String>, usize) {
        let after = &text["extern \"C\" __global__".len()..];
        let after = after.trim_start().strip_prefix("void").expect("kernels return void");
        let mut after = after.trim_start();
        if let Some(bounds) = after.strip_prefix("__launch_bounds__") {
            after = &bounds[bounds.find(')').expect("launch bounds close") + 1..];
        }
        let open = after.find('(').expect("kernel parameters");
        let close = open + after[open..].find(')').expect("kernel parameters close");
        let name = after[..open].trim().to_string();
        let params = after[open + 1..close].split(',').map(param).collect();
        (name, params, text.len() - after.len() + close)
    }

    /// One parameter declaration, such as `const u64* src` or `u32 log_n`.
    fn param(declaration: &str) -> Result<Param, String> {
        let declaration = declaration.trim();
        let name_at = declaration
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .ok_or_else(|| format!("unnamed parameter `{declaration}`"))?;
        let ty: String = declaration[..=name_at].split_whitespace().collect::<Vec<_>>().join(" ");
        match ty.as_str() {
            "const u64*" => Ok(Param::ConstPtr("u64")),
            "const u32*" => Ok(Param::ConstPtr("u32")),
            "u64*" => Ok(Param::MutPtr("u64")),
            "u32*" => Ok(Param::MutPtr("u32")),
            "u64" => Ok(Param::U64),
            "u32" => Ok(Param::U32),
            _ => Err(format!("unexpected parameter type in `{declaration}`")),
        }
    }

    fn all_definitions() -> Vec<Definition> {
        KERNEL_FILES.iter().flat_map(|(_, source)| definitions(source)).collect()
    }

    #[test]
    fn every_kernel_has_the_parameters_of_its_launch_function() {
        let found = all_definitions();
        let mut checked = 0;
        for (marker, kernels, params) in SIGNATURES {
            for kernel in *kernels {
                let defined: Vec<_> = found.iter().filter(|(name, _)| name == kernel).collect();
                assert!(!defined.is_empty(), "{marker}: kernel `{kernel}` not found in cuda/");
                for (_, got) in defined {
                    let got = got.as_ref().unwrap_or_else(|e| panic!("`{kernel}`: {e}"));
                    assert_eq!(
                        got.len(),
                        params.len(),
                        "`{kernel}` takes {} parameters, `{marker}` launches it with {}",
                        got.len(),
                        params.len()
                    );
                    for (i, (cuda, rust)) in got.iter().zip(params.iter()).enumerate() {
                        assert_eq!(cuda, rust, "`{kernel}` parameter {i}: CUDA vs `{marker}`");
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked >= KERNELS.len(), "{checked} definitions checked");
    }

    #[test]
    fn every_kernel_has_exactly_one_signature() {
        for kernel in KERNELS {
            let count = KERNELS.iter().filter(|&&k| k == kernel).count();
            assert_eq!(count, 1, "`{kernel}` is listed {count} times");
        }
        for (name, _) in all_definitions() {
            assert!(KERNELS.contains(&name.as_str()), "`{name}` in cuda/ but in no signature");
        }
    }

    /// The load takes the kernels of several hash functions and extension degrees by their place
    /// in their signature's list: the lists follow its order.
    #[test]
    fn kernels_are_listed_in_the_order_the_load_takes_them() {
        let names = |kernels: &[&str]| kernels.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        let by_hash = |pattern: &dyn Fn(HashFunction) -> Vec<String>| {
            HASHES.into_iter().flat_map(pattern).collect::<Vec<_>>()
        };
        assert_eq!(
            names(<sig::HashRows as Signature>::KERNELS),
            by_hash(&|h| vec![
                format!("hash_rows_{}", h.ident()),
                format!("hash_rows_{}_partitioned", h.ident())
            ])
        );
        assert_eq!(
            names(<sig::MerkleLevel as Signature>::KERNELS),
            by_hash(&|h| vec![format!("merkle_level_{}", h.ident())])
        );
        assert_eq!(
            names(<sig::MerkleTop as Signature>::KERNELS),
            by_hash(&|h| vec![format!("merkle_top_{}", h.ident())])
        );
        assert_eq!(<sig::Grind as Signature>::KERNELS, ["grind_rpo", "grind_rpx"]);
        for (base, kernels) in [
            ("fri_fold", <sig::FriFold as Signature>::KERNELS),
            ("deep_combine", <sig::DeepCombine as Signature>::KERNELS),
            ("deep_evaluate", <sig::DeepEvaluate as Signature>::KERNELS),
        ] {
            let by_degree = ["base", "quadratic", "cubic"].map(|d| format!("{base}_{d}"));
            assert_eq!(names(kernels), by_degree, "{base}");
        }
    }

    #[test]
    fn the_parser_reads_macros_launch_bounds_and_drift() {
        let source = [
            "// a comment: extern \"C\" __global__ void ignored(u32 x)",
            "extern \"C\" __global__ void __launch_bounds__(256)",
            "    plain(u64* out, const u32* in,",
            "          u32 n) {}",
            "#define KERNEL(NAME, D) \\",
            "    extern \"C\" __global__ void NAME(const u64* a, \\",
            "                                    u64 n) { body<D>(a, n); }",
            "KERNEL(made_one, 1)",
            "KERNEL(made_two, 2)",
            "extern \"C\" __global__ void odd(float x) {}",
        ]
        .join("\n");
        let found = definitions(&source);
        let get = |name: &str| found.iter().find(|(n, _)| n == name).map(|(_, p)| p.clone());
        assert_eq!(
            get("plain"),
            Some(Ok(vec![Param::MutPtr("u64"), Param::ConstPtr("u32"), Param::U32]))
        );
        for name in ["made_one", "made_two"] {
            assert_eq!(get(name), Some(Ok(vec![Param::ConstPtr("u64"), Param::U64])));
        }
        assert!(get("odd").is_some_and(|p| p.is_err()), "an unknown type is reported");
        assert_eq!(get("ignored"), None);
        assert_eq!(found.len(), 4);
    }
}
