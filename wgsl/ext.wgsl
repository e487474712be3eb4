// Elements of Winterfell's extensions of every degree, for the FRI and DEEP kernels: the base
// field (degree 1), `QuadExtension` F_p[x] / (x^2 - x + 2) and `CubeExtension` F_p[x] / (x^3 - x - 1),
// with winter_math's formulas. Needs field.wgsl and ext3.wgsl.

// Elements of every degree are held as `Ext3` with the components past the degree zero.

const EXT_ZERO: vec2<u32> = vec2<u32>(0u, 0u);

fn ext_add(a: Ext3, b: Ext3) -> Ext3 {
    return Ext3(gl_add(a.c0, b.c0), gl_add(a.c1, b.c1), gl_add(a.c2, b.c2));
}

/// `a * s` for a base element `s` (winter_math's `mul_base`).
fn ext_scale(a: Ext3, s: vec2<u32>) -> Ext3 {
    return Ext3(gl_mul(a.c0, s), gl_mul(a.c1, s), gl_mul(a.c2, s));
}

/// `a * b` in the extension of degree `degree`.
fn ext_mul(a: Ext3, b: Ext3, degree: u32) -> Ext3 {
    if (degree == 1u) {
        return Ext3(gl_mul(a.c0, b.c0), EXT_ZERO, EXT_ZERO);
    }
    if (degree == 2u) {
        let a0b0 = gl_mul(a.c0, b.c0);
        let a1b1 = gl_mul(a.c1, b.c1);
        let sum = gl_mul(gl_add(a.c0, a.c1), gl_add(b.c0, b.c1));
        return Ext3(gl_sub(a0b0, gl_double(a1b1)), gl_sub(sum, a0b0), EXT_ZERO);
    }
    return ext3_mul(a, b);
}
