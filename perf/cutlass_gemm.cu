// CUTLASS 2.x sm_80 GEMMs (the peers perf/LOG.md compares with), timed at n^3 as
// warpforge's bench sweep times (each launch alone, the median), on inputs drawn
// as the bench draws them: the reference for perf/LOG.md's side-by-side runs.
//
// Built on a machine without CUDA from PyPI wheels (nvidia-cutlass for the
// headers; nvidia-cuda-nvcc, nvidia-nvvm, nvidia-cuda-runtime, nvidia-cuda-cccl
// and nvidia-cuda-crt 13.0 unpacked into one prefix):
//   nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr \
//     -I<cutlass>/cutlass_library/source/include cutlass_gemm.cu \
//     -L<prefix>/lib -lcudart_static -ldl -lrt -lpthread -o cutlass_gemm
// Run: cutlass_gemm [n] [reps] [r|c (random or coarse inputs)] [name filter]
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include "cutlass/gemm/device/gemm.h"
#include "cutlass/epilogue/thread/linear_combination.h"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

static const char* only = "";
template <typename E, typename Acc, typename Out, typename Tile, typename Warp, typename Inst, int Stages, int Align>
double run(const char* name, int n, int reps, bool coarse) {
  using Gemm = cutlass::gemm::device::Gemm<
      E, cutlass::layout::RowMajor, E, cutlass::layout::ColumnMajor, Out, cutlass::layout::RowMajor, Acc,
      cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, Tile, Warp, Inst,
      cutlass::epilogue::thread::LinearCombination<Out, 128 / cutlass::sizeof_bits<Out>::value, Acc, Acc>,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, Stages, Align, Align>;
  if (!strstr(name, only)) return 0;
  size_t sz = size_t(n) * n;
  E *a, *b; Out *c;
  CK(cudaMalloc(&a, sz * sizeof(E))); CK(cudaMalloc(&b, sz * sizeof(E))); CK(cudaMalloc(&c, sz * sizeof(Out)));
  std::vector<E> h(sz);
  // Uniform in [-1, 1) with full mantissas (warpforge's bench draws the same), or
  // multiples of 1/8 (fewer toggling bits: less power, higher clocks) when coarse.
  for (size_t i = 0; i < sz; ++i) {
    float x = coarse ? float((rand() % 17) - 8) / 8.0f : float(rand()) / float(RAND_MAX) * 2.0f - 1.0f;
    h[i] = std::is_same<E, int8_t>::value ? E(int8_t(rand() & 255)) : E(x);
  }
  CK(cudaMemcpy(a, h.data(), sz * sizeof(E), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, h.data(), sz * sizeof(E), cudaMemcpyHostToDevice));
  typename Gemm::Arguments args({n, n, n}, {a, n}, {b, n}, {c, n}, {c, n}, {Acc(1), Acc(0)});
  Gemm gemm;
  if (gemm.initialize(args) != cutlass::Status::kSuccess) { printf("%s: init failed\n", name); return 0; }
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int i = 0; i < 3; ++i) gemm();
  std::vector<float> ms;
  // Each launch timed alone, the median of `reps` (warpforge's sweep times so).
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(e0);
    gemm();
    cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
    float t; cudaEventElapsedTime(&t, e0, e1); ms.push_back(t);
  }
  CK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  double tf = 2.0 * n * double(n) * n / (ms[ms.size() / 2] * 1e-3) / 1e12;
  printf("cutlass %s n=%d%s: %.3f ms, %.1f T/s\n", name, n, coarse ? " coarse values" : "", ms[ms.size() / 2], tf);
  cudaFree(a); cudaFree(b); cudaFree(c);
  return tf;
}

using namespace cutlass::gemm;
int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 8192;
  int reps = argc > 2 ? atoi(argv[2]) : 10;
  bool coarse = argc > 3 && argv[3][0] == 'c';
  only = argc > 4 ? argv[4] : "";
  run<cutlass::half_t, float, cutlass::half_t, GemmShape<128, 256, 64>, GemmShape<64, 64, 64>, GemmShape<16, 8, 16>, 3, 8>("f16 128x256x64 S3", n, reps, coarse);
  run<cutlass::half_t, float, cutlass::half_t, GemmShape<256, 128, 64>, GemmShape<64, 64, 64>, GemmShape<16, 8, 16>, 3, 8>("f16 256x128x64 S3", n, reps, coarse);
  run<cutlass::half_t, float, cutlass::half_t, GemmShape<128, 128, 64>, GemmShape<64, 64, 64>, GemmShape<16, 8, 16>, 3, 8>("f16 128x128x64 S3", n, reps, coarse);
  run<cutlass::bfloat16_t, float, cutlass::bfloat16_t, GemmShape<128, 256, 32>, GemmShape<64, 64, 32>, GemmShape<16, 8, 16>, 3, 8>("bf16 128x256x32 S3", n, reps, coarse);
  run<cutlass::tfloat32_t, float, float, GemmShape<128, 256, 32>, GemmShape<64, 64, 32>, GemmShape<16, 8, 8>, 3, 4>("tf32 128x256x32 S3", n, reps, coarse);
  run<int8_t, int32_t, int32_t, GemmShape<256, 128, 64>, GemmShape<64, 64, 64>, GemmShape<16, 8, 32>, 3, 16>("s8 256x128x64 S3", n, reps, coarse);
  return 0;
}
