// A column scale of A for the GEMM tiles (included by gemm_tiles.cl, after the tile moves,
// before gemm_accumulate).
//
// K_SCALE (fusion/gate.cc): A's column k is read times kscale[k], a squeeze-and-excitation gate
// [K] that the partition computes (T, as the activations): the fetched B tile's column k is
// scaled instead, the same product. gemm_accumulate then takes kscale last (K_SCALE_PASS).
#ifdef K_SCALE
#define K_SCALE_PARAM , __global const T *restrict kscale
#define K_SCALE_PASS , kscale
// The registers of a tile fetched from columns [k0, k0 + TILE_K) (fetch_tile_nt's layout), each
// times kscale of its column; columns at or past kend hold zeros and stay.
static inline void scale_tile_k(float* r, int rows, int k0, int kend, bool vec, int lid, int map,
                                __global const T* restrict kscale) {
  if (vec) {
#pragma unroll
    for (int i = 0; i < NV_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      const int gk = k0 + 4 * tile_k4(e, rows, map);
      if (e < rows * TILE_K / 4 && gk < kend) {
        const float4 s = LOADF4(kscale, gk >> 2);
        r[4 * i] *= s.x;
        r[4 * i + 1] *= s.y;
        r[4 * i + 2] *= s.z;
        r[4 * i + 3] *= s.w;
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < NS_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      const int gk = k0 + e % TILE_K;
      if (e < rows * TILE_K && gk < kend) r[i] *= LOADF(kscale, gk);
    }
  }
}
#define SCALE_B_TILE(rb, k0, kend, vec, lid) \
  scale_tile_k(rb, TILE_N, k0, kend, vec, lid, GEMM_TMAP, kscale)
#else
#define K_SCALE_PARAM
#define K_SCALE_PASS
#define SCALE_B_TILE(rb, k0, kend, vec, lid)
#endif
