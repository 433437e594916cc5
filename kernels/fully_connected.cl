// FULLY_CONNECTED reference kernel: out[M,N] = act(in[M,K] . W[N,K]^T + bias[N]).
// One work-item per output element; the tiled GEMM lives in gemm.cl.
//
// fully_connected(in, weights, bias, out, M, N, K, act_min, act_max)
//   NDRange: global (N, M).
__kernel void fully_connected(__global const T* in, __global const T* weights,
                              __global const float* bias, __global T* out, int M, int N, int K,
                              float act_min, float act_max) {
  const int n = get_global_id(0), m = get_global_id(1);
  if (n >= N || m >= M) return;
  const long a = (long)m * K, b = (long)n * K;
  float acc = bias[n];
  for (int k = 0; k < K; ++k) acc += LOADF(in, a + k) * LOADF(weights, b + k);
  STOREF(ACTIVATE(acc, act_min, act_max), out, (long)m * N + n);
}
