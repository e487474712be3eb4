// The composition over the constraint-evaluation (CE) domain: one thread per CE step evaluates
// the generated `composition_row` over the step's frame, read from the trace LDE where the trace
// commitment left it (needs field.cuh). The program defines COMPOSITION_OUTPUTS,
// COMPOSITION_MAIN_WIDTH, COMPOSITION_X_SLOTS and COMPOSITION_TABLE_WORDS before this file, and
// the generated functions after it.
//
// columns: one device address per base column (the main columns, then the auxiliary columns'
// components): element t of coset k at column[k·n + t], the LDE's coset-major layout. CE step s
// is LDE row s·(lde_blowup / ce_blowup): element t = row / lde_blowup of coset k = row mod
// lde_blowup; the next row is element t + 1 (mod n) of the same coset.
//
// params: the u64 words of `CompositionRequest::parameter_words` (field elements in Montgomery
// form), whose header of offsets and counts says where each part is.

/// The values one CE step reads.
struct ce_frame {
    const u64* const* columns;
    u64 cur, nxt;
    u64 one, inv_exponent;
    const u64* constants;
    const u64* random;
    const u64* periodic;
    u64 xpow[COMPOSITION_X_SLOTS + 1];
    u64 table[COMPOSITION_TABLE_WORDS + 1];
};

#define CE_MAIN(c, next) gl_canonical(f.columns[c][(next) ? f.nxt : f.cur])
#define CE_AUX(w, next) gl_canonical(f.columns[COMPOSITION_MAIN_WIDTH + (w)][(next) ? f.nxt : f.cur])
#define CE_PERIODIC(c) f.periodic[c]
#define CE_RANDOM(w) f.random[w]
#define CE_CONST(slot) f.constants[slot]
#define CE_XPOW(slot) f.xpow[slot]
#define CE_TABLE(w) f.table[w]
#define CE_INV(a) gl_pow(a, f.inv_exponent, f.one)

__device__ void composition_row(const ce_frame& f, u64* out);

/// out[i·ce_size + s]: component i of the composition at CE step s, for every step below
/// ce_size (2^log_ce_blowup · 2^log_n); component after component, as the constraint
/// commitment interpolates them.
extern "C" __global__ void composition(u64* out, const u64* columns, const u64* params,
                                       u64 ce_size, u32 log_n, u32 log_lde_blowup,
                                       u32 log_ce_blowup) {
    const u64 s = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (s >= ce_size) return;
    const u64 n = 1ull << log_n;
    const u64 row = s << (log_lde_blowup - log_ce_blowup);
    const u64 t = row >> log_lde_blowup;
    const u64 k = row & ((1ull << log_lde_blowup) - 1);
    ce_frame f;
    f.columns = (const u64* const*)columns;
    f.cur = k * n + t;
    f.nxt = k * n + ((t + 1) & (n - 1));
    f.one = params[0];
    f.inv_exponent = params[1];
    f.constants = params + params[2];
    f.random = params + params[3];
    const u64 periodic_rows = params[5];
    f.periodic = params + params[4] + (periodic_rows ? (s % periodic_rows) * params[6] : 0);
    const u64* bases = params + params[7];
    for (int i = 0; i < COMPOSITION_X_SLOTS; i++) {
        f.xpow[i] = gl_mul(bases[2 * i], gl_pow(bases[2 * i + 1], s, f.one));
    }
    const u64* descriptors = params + params[8];
    u32 word = 0;
    for (u64 i = 0; i < params[9]; i++) {
        const u64* d = descriptors + 4 * i;
        const u64 width = d[1], entries = d[2];
        const u64 entry = (s % entries + entries - d[3] % entries) % entries;
        for (u64 j = 0; j < width && word < COMPOSITION_TABLE_WORDS + 1; j++) {
            f.table[word++] = params[d[0] + entry * width + j];
        }
    }
    u64 values[COMPOSITION_OUTPUTS];
    composition_row(f, values);
#pragma unroll
    for (int i = 0; i < COMPOSITION_OUTPUTS; i++) out[i * ce_size + s] = values[i];
}
