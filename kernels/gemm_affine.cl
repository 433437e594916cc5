// Per-channel MUL / ADD nodes applied to A where the GEMM family loads it (included by
// gemm_tiles.cl, after the tile moves): the implicit GEMM's im2col taps
// (conv2d_implicit_gemm.cl's fetch_im2col) and the plain GEMM's row-major tiles (affine_tile_k,
// gemm.cl), so the nodes run no kernel of their own and their output is never written.
//
// A_AFFINE (fusion/affine.cc): the input is the source of per-channel MUL / ADD nodes that the
// convolution reads, applied where it loads an input element (a padded tap stays zero, as
// the convolution pads their output): x -> clamp(clamp(x * scale[c], lo1, hi1) + shift[c], lo2,
// hi2), a NaN kept (the nodes' fused activations). -DA_SCALE / -DA_SHIFT: the MUL / the ADD is
// there (without, 1 and 0). Its buffers: T a_scale [C], a_shift [C] (the other when one is
// absent, never read), or [1] with -DA_SCALE_ONE / -DA_SHIFT_ONE (a scalar for every channel);
// its clamps a_lo1, a_hi1, a_lo2, a_hi2.
#ifdef A_AFFINE
#ifdef A_SCALE_ONE
#define A_S4(c) ((float4)(LOADF(a_scale, 0)))
#define A_S1(c) LOADF(a_scale, 0)
#elif defined(A_SCALE)
#define A_S4(c) LOADF4(a_scale, (c) >> 2)
#define A_S1(c) LOADF(a_scale, (c))
#else
#define A_S4(c) ((float4)(1.0f))
#define A_S1(c) 1.0f
#endif
#ifdef A_SHIFT_ONE
#define A_B4(c) ((float4)(LOADF(a_shift, 0)))
#define A_B1(c) LOADF(a_shift, 0)
#elif defined(A_SHIFT)
#define A_B4(c) LOADF4(a_shift, (c) >> 2)
#define A_B1(c) LOADF(a_shift, (c))
#else
#define A_B4(c) ((float4)(0.0f))
#define A_B1(c) 0.0f
#endif
// The work-item's channel (four from c with vec) is the same for all its elements of a tile:
// its vectors load once per tile.
#define AFFINE_SETUP(c, vec)                                   \
  const float4 a_s = (vec) ? A_S4(c) : (float4)(A_S1(c));      \
  const float4 a_b = (vec) ? A_B4(c) : (float4)(A_B1(c));
#define AFFINE_AT(e, sc, sh) \
  CLAMP_KEEP_NAN(CLAMP_KEEP_NAN((e) * (sc), a_lo1, a_hi1) + (sh), a_lo2, a_hi2)
#define AFFINE1(e) AFFINE_AT((e), a_s.x, a_b.x)
#define AFFINE4(v)                                                                            \
  (v) = (float4)(AFFINE_AT((v).x, a_s.x, a_b.x), AFFINE_AT((v).y, a_s.y, a_b.y),              \
                 AFFINE_AT((v).z, a_s.z, a_b.z), AFFINE_AT((v).w, a_s.w, a_b.w))
#define AFFINE_PARAM                                                                   \
  , __global const T *restrict a_scale, __global const T *restrict a_shift, float a_lo1, \
      float a_hi1, float a_lo2, float a_hi2
#define AFFINE_PASS , a_scale, a_shift, a_lo1, a_hi1, a_lo2, a_hi2
#else
#define AFFINE_SETUP(c, vec)
#define AFFINE1(e) (e)
#define AFFINE4(v)
#define AFFINE_PARAM
#define AFFINE_PASS
#endif

#ifdef A_AFFINE
// The registers of an A tile fetched from columns [k0, k0 + TILE_K) (fetch_tile_nt's layout),
// each through the nodes of its column (channel); columns at or past kend hold zeros and stay,
// so a split's or the matrix's tail adds nothing. Rows past the end are never stored.
static inline void affine_tile_k(float* r, int rows, int k0, int kend, bool vec, int lid,
                                 int map AFFINE_PARAM) {
  if (vec) {
#pragma unroll
    for (int i = 0; i < NV_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      const int gk = k0 + 4 * tile_k4(e, rows, map);
      if (e < rows * TILE_K / 4 && gk < kend) {
        AFFINE_SETUP(gk, true)
        float4 v = (float4)(r[4 * i], r[4 * i + 1], r[4 * i + 2], r[4 * i + 3]);
        AFFINE4(v);
        r[4 * i] = v.x;
        r[4 * i + 1] = v.y;
        r[4 * i + 2] = v.z;
        r[4 * i + 3] = v.w;
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < NS_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      const int gk = k0 + e % TILE_K;
      if (e < rows * TILE_K && gk < kend) {
        AFFINE_SETUP(gk, false)
        r[i] = AFFINE1(r[i]);
      }
    }
  }
}
#define AFFINE_A_TILE(ra, k0, kend, vec, lid) \
  affine_tile_k(ra, TILE_M, k0, kend, vec, lid, GEMM_TMAP AFFINE_PASS)
#else
#define AFFINE_A_TILE(ra, k0, kend, vec, lid)
#endif
