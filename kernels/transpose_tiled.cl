// Batched 2-D transpose through local memory: out[b][c][r] = in[b][r][c]. Any swap of two axes
// reduces to this after collapsing the axes around them (NHWC -> NCHW is [N][H*W][C] ->
// [N][C][H*W]). Needs common.cl.
//
// transpose_batched_2d(in, out, batch, rows, cols)
//   __global const T* in [batch][rows][cols]; __global T* out [batch][cols][rows];
//   int batch, rows, cols
//   NDRange: 1-D. local = TILE_DIM * WG_ROWS (reqd_work_group_size),
//            global = batch * ceil(rows / TILE_DIM) * ceil(cols / TILE_DIM) * TILE_DIM * WG_ROWS
//            exactly (no work-item may be beyond it: there is no early return before the barrier).
//   A group moves one TILE_DIM x TILE_DIM tile: reads its rows coalesced along cols, writes rows of
//   the transposed tile coalesced along rows; a work-item moves TILE_DIM / WG_ROWS elements.
//   Defines: TILE_DIM (32), WG_ROWS (4, must divide TILE_DIM).
//   With very few columns (e.g. C = 3) most of each tile is empty (~0.7 TB/s on an H200 for
//   C = 4, vs ~3 TB/s for C = 64); a per-element copy kernel would win there.

#ifndef TILE_DIM
#define TILE_DIM 32
#endif
#ifndef WG_ROWS
#define WG_ROWS 4
#endif
#if TILE_DIM % WG_ROWS
#error "transpose_tiled.cl: WG_ROWS must divide TILE_DIM"
#endif

__kernel __attribute__((reqd_work_group_size(TILE_DIM * WG_ROWS, 1, 1))) void transpose_batched_2d(
    __global const T* restrict in, __global T* restrict out, int batch, int rows, int cols OVERFLOW_PARAM) {
  // +1 column: the column-wise reads below then hit TILE_DIM different banks.
  __local float tile[TILE_DIM][TILE_DIM + 1];

  const int tiles_c = (cols + TILE_DIM - 1) / TILE_DIM;
  const int tiles_r = (rows + TILE_DIM - 1) / TILE_DIM;
  const int g = get_group_id(0);
  const int c0 = (g % tiles_c) * TILE_DIM;
  const int r0 = ((g / tiles_c) % tiles_r) * TILE_DIM;
  const int b = g / (tiles_c * tiles_r);  // < batch: the global size is exact (no early return
                                          // before the barrier: PoCL mishandles that)
  const int lid = get_local_id(0);
  const int tx = lid % TILE_DIM;
  const int ty = lid / TILE_DIM;
  const int base = b * rows * cols;

  for (int i = ty; i < TILE_DIM; i += WG_ROWS) {
    const int r = r0 + i;
    const int c = c0 + tx;
    if (r < rows && c < cols) tile[i][tx] = LOADF(in, base + r * cols + c);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = ty; i < TILE_DIM; i += WG_ROWS) {
    const int c = c0 + i;
    const int r = r0 + tx;
    if (c < cols && r < rows) STOREF(tile[tx][i], out, base + c * rows + r);
  }
}
