// Extension fields of Goldilocks as Winterfell defines them, with winter_math's formulas
// operation for operation (so the words match, not only the elements): the quadratic extension
// F[x] / (x^2 - x + 2) (`QuadExtension`) and the cubic F[x] / (x^3 - x - 1) (`CubeExtension`, also
// RPX's extension rounds). An element of degree D is D words, lowest power first. Needs field.cuh.

// CUBIC EXTENSION: F[x] / (x^3 - x - 1)
// ================================================================================================

__device__ __forceinline__ void ext3_mul(u64 r[3], const u64 a[3], const u64 b[3]) {
    const u64 a0b0 = gl_mul(a[0], b[0]);
    const u64 a1b1 = gl_mul(a[1], b[1]);
    const u64 a2b2 = gl_mul(a[2], b[2]);
    const u64 s01 = gl_mul(gl_add(a[0], a[1]), gl_add(b[0], b[1]));
    const u64 s02 = gl_mul(gl_add(a[0], a[2]), gl_add(b[0], b[2]));
    const u64 s12 = gl_mul(gl_add(a[1], a[2]), gl_add(b[1], b[2]));
    const u64 d = gl_sub(a0b0, a1b1);
    r[0] = gl_sub(gl_add(s12, d), a2b2);
    r[1] = gl_sub(gl_sub(gl_add(s01, s12), gl_double(a1b1)), a0b0);
    r[2] = gl_sub(s02, d);
}

__device__ __forceinline__ void ext3_sqr(u64 r[3], const u64 a[3]) {
    const u64 a2_sq = gl_sqr(a[2]);
    const u64 a1_a2 = gl_mul(a[1], a[2]);
    const u64 a0_a1 = gl_mul(a[0], a[1]);
    const u64 a0_a2 = gl_mul(a[0], a[2]);
    r[0] = gl_add(gl_sqr(a[0]), gl_double(a1_a2));
    const u64 t = gl_add(a0_a1, a1_a2);
    r[1] = gl_add(gl_double(t), a2_sq);
    r[2] = gl_add(gl_add(gl_double(a0_a2), gl_sqr(a[1])), a2_sq);
}

// ANY DEGREE
// ================================================================================================

/// a·b in the extension of degree D (1: the base field).
template <int D>
__device__ __forceinline__ void ext_mul(u64* c, const u64* a, const u64* b) {
    if (D == 1) {
        c[0] = gl_mul(a[0], b[0]);
    } else if (D == 2) {
        const u64 a0b0 = gl_mul(a[0], b[0]);
        const u64 a1b1 = gl_mul(a[1], b[1]);
        c[0] = gl_sub(a0b0, gl_double(a1b1));
        c[1] = gl_sub(gl_mul(gl_add(a[0], a[1]), gl_add(b[0], b[1])), a0b0);
    } else {
        ext3_mul(c, a, b);
    }
}
