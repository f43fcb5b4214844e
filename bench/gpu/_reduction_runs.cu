// The kernels of bench/gpu/_reduction_runs.py (its docstring says what each is); compiled with carray.cuh
// in front and the defines BLOCK, KIND, MODE, IDX32, VEC, UNROLL before it.
#if IDX32
typedef unsigned int off_t_;
#else
typedef long long off_t_;
#endif

__device__ __forceinline__ float lg_block_sum(float s) {
  __shared__ float sh[32];
  __syncthreads();  // sh may still be read from a previous call
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < BLOCK / 32 ? sh[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  }
  return s;  // in thread 0
}

#if KIND == 0
struct lg_udiv { unsigned int d, m, l; };
__device__ __forceinline__ lg_udiv lg_udiv_make(unsigned int d) {
  lg_udiv r;
  r.d = d;
  r.l = d > 1 ? 32 - __clz(d - 1) : 0;
  r.m = (unsigned int)(((1ULL << 32) * ((1ULL << r.l) - d)) / d + 1);
  return r;
}
__device__ __forceinline__ unsigned int lg_udiv_q(const lg_udiv& v, unsigned int n) {
  unsigned long long t = __umulhi(v.m, n);
  return (unsigned int)((t + n) >> v.l);
}
// the template's index work for element J of output c: J*C + c divided by C and L, then the 3-D offset
__device__ __forceinline__ off_t_ lg_div_off(int J, int C, int c, int L, long long sN, long long sC,
                                             const lg_udiv& dC, const lg_udiv& dL) {
  unsigned int j = (unsigned int)J * C + c, q = lg_udiv_q(dC, j), r = j - q * C;
  unsigned int n = lg_udiv_q(dL, q), l = q - n * L;
  return (off_t_)n * (off_t_)sN + (off_t_)l + (off_t_)r * (off_t_)sC;
}
#endif

extern "C" __global__ void lg_parts(CArray<float, 1> _in, CArray<float, 1> _out, CArray<float, 1> _part,
                                    CArray<unsigned int, 1> _count, int N, int C, int L, long long sN,
                                    long long sC, int nsplit) {
  const float* __restrict__ p = &_in[0];
  const int c = blockIdx.x / nsplit, slice = blockIdx.x % nsplit, tid = threadIdx.x;
  float acc[UNROLL];
  for (int u = 0; u < UNROLL; ++u) acc[u] = 0.0f;
#if KIND == 0
  // the template's order: reduced flat index J = n*L + l (sL = 1: the runs are contiguous)
  const int total = N * L, step = BLOCK * nsplit;
  int J = tid + slice * BLOCK;
#if MODE == 0
  lg_udiv dC = lg_udiv_make(C), dL = lg_udiv_make(L);
#define LG_AT(JJ) lg_div_off(JJ, C, c, L, sN, sC, dC, dL)
#define LG_ADVANCE
#else
  // the odometer: J advances by step = kq*L + kr, so n by kq and l by kr, plus one carry at most
  int l = J % L;
  off_t_ off = (off_t_)(J / L) * (off_t_)sN + (off_t_)c * (off_t_)sC + (off_t_)l;
  const int kq = step / L, kr = step % L;
  const off_t_ jump = (off_t_)kq * (off_t_)sN + (off_t_)kr, carry = (off_t_)sN - (off_t_)L;
#define LG_AT(JJ) off
#define LG_ADVANCE { l += kr; off += jump; const bool c_ = l >= L; l = c_ ? l - L : l; off = c_ ? off + carry : off; }
#endif
  // offsets first, then the UNROLL loads together, then the adds: no branch between a load and the next
  for (; J + (UNROLL - 1) * step < total; J += UNROLL * step) {
    off_t_ o[UNROLL];
    float v[UNROLL];
    #pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      o[u] = LG_AT(J + u * step);
      LG_ADVANCE
    }
    #pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = p[o[u]];
    #pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc[u] += v[u];
  }
  for (; J < total; J += step) {
    acc[0] += p[LG_AT(J)];
    LG_ADVANCE
  }
#else
  // runs: tiles of whole runs, one division a tile
  const int TILE = BLOCK * VEC * UNROLL;
  const int per_run = (L + TILE - 1) / TILE, tiles = N * per_run;
  for (int t = slice; t < tiles; t += nsplit) {
    const int n = t / per_run, start = (t - n * per_run) * TILE;
    const off_t_ base = (off_t_)n * (off_t_)sN + (off_t_)c * (off_t_)sC + (off_t_)start;
    const int left = L - start;
#if VEC == 4
    const float4* __restrict__ q = reinterpret_cast<const float4*>(p + base);
    if (left >= TILE) {
      float4 v[UNROLL];
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u) v[u] = q[u * BLOCK + tid];
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u) acc[u] += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    } else {
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        if ((u * BLOCK + tid) * 4 < left) {
          float4 w = q[u * BLOCK + tid];
          acc[u] += (w.x + w.y) + (w.z + w.w);
        }
      }
    }
#else
    const float* __restrict__ q = p + base;
    if (left >= TILE) {
      float v[UNROLL];
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u) v[u] = q[u * BLOCK + tid];
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u) acc[u] += v[u];
    } else {
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        if (u * BLOCK + tid < left) acc[u] += q[u * BLOCK + tid];
    }
#endif
  }
#endif
  float s = 0.0f;
  for (int u = 0; u < UNROLL; ++u) s += acc[u];
  s = lg_block_sum(s);
  if (nsplit == 1) {
    if (tid == 0) _out[c] = s;
    return;
  }
  __shared__ int last;
  float* part = &_part[0];
  unsigned int* count = &_count[0];
  if (tid == 0) {
    part[c * nsplit + slice] = s;
    __threadfence();
    last = atomicAdd(&count[c], 1u) == (unsigned int)(nsplit - 1);
  }
  __syncthreads();
  if (last) {
    __threadfence();
    float t = 0.0f;
    for (int k = tid; k < nsplit; k += BLOCK) t += ((volatile float*)part)[c * nsplit + k];
    t = lg_block_sum(t);
    if (tid == 0) {
      _out[c] = t;
      count[c] = 0u;
    }
  }
}
