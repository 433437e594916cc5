// gemm_int8.cl's gate (-DGATE_A, plain A only; src_cpp/fusion/gate.cc): A is an int8 MUL's
// output that is never written, its operand x [M][K] (`a`) times a vector of K channels, `gate`
// (GATE_ARG, one more argument after `res`), each byte as the MUL's own kernel computes it:
// (x + prm[43]) * (gate[k] + prm[44]) rescaled by prm[45], prm[46] (ties away from zero), + prm[47],
// clamped to [prm[48], prm[49]] (binary_int8.cl's mul_int8). Needs quant.cl.
#ifdef GATE_A
#if defined(IM2COL) || defined(DW_A)
#error "gemm_int8.cl: GATE_A reads a plain A"
#endif
#define GATE_ARG , __global const char* restrict gate

typedef struct {
  int x_offset, gate_offset, multiplier, shift, zero, lo, hi;
} GateParams;

// Read once per work-item, not at every load of A.
static inline GateParams gate_params(__global const int* prm) {
  GateParams p = {prm[43], prm[44], prm[45], prm[46], prm[47], prm[48], prm[49]};
  return p;
}

// Byte j of the packed four `v` gated by channel byte gk.
static inline int gate_byte(int v, int j, int gk, GateParams p) {
  const int x = (int)(char)(v >> (8 * j));
  const int q = quant_multiply((x + p.x_offset) * (gk + p.gate_offset), p.multiplier, p.shift,
                               false) + p.zero;
  return clamp(q, p.lo, p.hi);
}

// The four bytes of A at k, k + 1, k + 2, k + 3 (those past K stay as they are: B is zero
// there). With VEC_A (K % 4 == 0) the four gate bytes are one aligned int.
static inline int gate4(int v, __global const char* gate, int k, int K, GateParams p) {
#ifdef VEC_A
  const int g = ((__global const int*)gate)[k >> 2];
  return pack4(gate_byte(v, 0, (char)g, p), gate_byte(v, 1, (char)(g >> 8), p),
               gate_byte(v, 2, (char)(g >> 16), p), gate_byte(v, 3, (char)(g >> 24), p));
#else
  return pack4(gate_byte(v, 0, gate[k], p), k + 1 < K ? gate_byte(v, 1, gate[k + 1], p) : v >> 8,
               k + 2 < K ? gate_byte(v, 2, gate[k + 2], p) : v >> 16,
               k + 3 < K ? gate_byte(v, 3, gate[k + 3], p) : v >> 24);
#endif
}
#else
#define GATE_ARG
#endif
