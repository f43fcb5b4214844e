// Runs LMS's caching allocator (c10_cuda of PyTorch 1.5.0 + LMS, built by lgpatch against CUDA 13) on a real GPU:
// allocate, fill, free and cache through c10::cuda::CUDACachingAllocator with LMS enabled, and print the allocator's
// own statistics. A compile/link/run proof of the L2 libraries, not a model: tensor swapping itself needs ATen.
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

namespace A = c10::cuda::CUDACachingAllocator;

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device 0: %s, compute capability %d.%d, %d device(s)\n", prop.name, prop.major, prop.minor, devices);
  A::init(devices, nullptr);  // no host allocator: nothing is swapped out in this smoke test
  A::setUserEnabledLMS(true);
  A::setUserLimitLMS(size_t(8) << 30);
  std::printf("LMS enabled: %d, limit: %zu bytes\n", int(A::userEnabledLMS()), A::userLimitLMS());
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) {
    void* p = A::raw_alloc(size_t(256) << 20);
    if (cudaMemset(p, i, size_t(256) << 20) != cudaSuccess) {
      std::printf("cudaMemset failed on block %d\n", i);
      return 1;
    }
    blocks.push_back(p);
  }
  cudaDeviceSynchronize();
  for (void* p : blocks) A::raw_delete(p);
  void* again = A::raw_alloc(size_t(256) << 20);  // served from the cache, no new cudaMalloc
  A::raw_delete(again);
  const auto stats = A::getDeviceStats(0);
  const auto all = static_cast<size_t>(c10::cuda::CUDACachingAllocator::StatType::AGGREGATE);
  std::printf("allocations: %lld, segments (cudaMalloc): %lld, peak allocated bytes: %lld\n",
              static_cast<long long>(stats.allocation[all].allocated),
              static_cast<long long>(stats.segment[all].allocated),
              static_cast<long long>(stats.allocated_bytes[all].peak));
  A::emptyCache();
  std::printf("ok\n");
  return 0;
}
