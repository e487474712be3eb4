// Cubic extension of the Goldilocks field, F_p[x] / (x^3 - x - 1), as in Winterfell's
// `CubeExtension<BaseElement>`. Used inside RPX and by FRI folding. Needs field.wgsl.

/// `c0 + c1 x + c2 x^2`.
struct Ext3 {
    c0: vec2<u32>,
    c1: vec2<u32>,
    c2: vec2<u32>,
}

/// Product with 6 base multiplications (Winterfell's formula).
fn ext3_mul(a: Ext3, b: Ext3) -> Ext3 {
    let a0b0 = gl_mul(a.c0, b.c0);
    let a1b1 = gl_mul(a.c1, b.c1);
    let a2b2 = gl_mul(a.c2, b.c2);
    let a01b01 = gl_mul(gl_add(a.c0, a.c1), gl_add(b.c0, b.c1));
    let a02b02 = gl_mul(gl_add(a.c0, a.c2), gl_add(b.c0, b.c2));
    let a12b12 = gl_mul(gl_add(a.c1, a.c2), gl_add(b.c1, b.c2));
    let a0b0_minus_a1b1 = gl_sub(a0b0, a1b1);
    let c0 = gl_sub(gl_add(a12b12, a0b0_minus_a1b1), a2b2);
    let c1 = gl_sub(gl_sub(gl_add(a01b01, a12b12), gl_double(a1b1)), a0b0);
    let c2 = gl_sub(a02b02, a0b0_minus_a1b1);
    return Ext3(c0, c1, c2);
}

fn ext3_square(a: Ext3) -> Ext3 {
    let a2_sq = gl_square(a.c2);
    let a1_a2 = gl_mul(a.c1, a.c2);
    let c0 = gl_add(gl_square(a.c0), gl_double(a1_a2));
    let c1 = gl_add(gl_double(gl_add(gl_mul(a.c0, a.c1), a1_a2)), a2_sq);
    let c2 = gl_add(gl_add(gl_double(gl_mul(a.c0, a.c2)), gl_square(a.c1)), a2_sq);
    return Ext3(c0, c1, c2);
}

/// `a^7`, the RPX extension-round S-box.
fn ext3_exp7(a: Ext3) -> Ext3 {
    let a2 = ext3_square(a);
    let a4 = ext3_square(a2);
    return ext3_mul(ext3_mul(a2, a), a4);
}
