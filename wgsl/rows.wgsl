// Transposition of evaluations into Winterfell's RowMatrix layout: column c of a block of
// columns, in bit-reversed order (the output of ntt.wgsl), becomes element col0 + c of each
// row of a row-major chunk:
//   dst[dst_offset + r * row_width + col0 + c] = src[src_offset + c * len + bitrev(row0 + r)].
// Padding elements of the rows are never written (the host clears them once).

struct RowsParams {
    /// Elements written by this dispatch (rows * columns).
    count: u32,
    /// Columns in the source block.
    num_cols: u32,
    /// Element index of column 0 in `src`.
    src_offset: u32,
    /// log2 of the source column length.
    log_len: u32,
    /// First row (position in natural order) taken from the columns.
    row0: u32,
    /// Elements per destination row.
    row_width: u32,
    /// Position of column 0 within a destination row.
    col0: u32,
    /// Element index of the first destination row.
    dst_offset: u32,
}

@group(0) @binding(0) var<uniform> rows_params: RowsParams;
@group(0) @binding(1) var<storage, read> rows_src: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> rows_dst: array<vec2<u32>>;

@compute @workgroup_size(256)
fn to_rows(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let x = flat_id(gid, groups);
    if (x >= rows_params.count) {
        return;
    }
    let r = x / rows_params.num_cols;
    let c = x % rows_params.num_cols;
    let src = rows_params.src_offset + (c << rows_params.log_len)
        + bit_reverse(rows_params.row0 + r, rows_params.log_len);
    rows_dst[rows_params.dst_offset + r * rows_params.row_width + rows_params.col0 + c] =
        rows_src[src];
}
