// Powers of a field element by table look-up: a table for base x holds x^i for i < 2^16 and
// then x^(2^16 i) for i < 2^16, so x^e = lo[e mod 2^16] * hi[e / 2^16] for any u32 e.
// The host builds the tables from winter-math's roots of unity and generator. Needs field.wgsl.

@group(0) @binding(3) var<storage, read> powers: array<vec2<u32>>;

/// x^e for the table that starts at element `table` of `powers`.
fn pow_lookup(table: u32, e: u32) -> vec2<u32> {
    return gl_mul(powers[table + (e & 0xffffu)], powers[table + 0x10000u + (e >> 16u)]);
}
