#include <catch2/catch.hpp>

#include "report/analysis/analysis.h"
#include "report/analysis/library_held.h"
#include "report/render/report_json.h"

using namespace torchseal;

namespace {

NativeFrame frame(std::string fn, std::string module) {
  return NativeFrame{std::move(fn), "", 0, std::move(module), 0};
}

// Stacks as the shim records them: innermost first, the library's static
// runtime (cudaMalloc inside libcublas) under the library's own function.
struct Fixture {
  AnalysisInput in;
  Symbolizer sym{std::vector<Module>{}};
  uint64_t next_ip = 0x1000;

  Fixture() {
    in.stacks.native.push_back({});
    in.stacks.python.push_back({});
  }
  StackId stack(std::vector<NativeFrame> frames) {
    std::vector<uint64_t> ips;
    for (NativeFrame &f : frames) {
      f.address = next_ip;
      sym.preload(next_ip, {f});
      ips.push_back(next_ip++);
    }
    in.stacks.native.push_back(std::move(ips));
    return static_cast<StackId>(in.stacks.native.size() - 1);
  }
  void live(uint64_t size, StackId s, ApiId api, DetectedAt at = DetectedAt::Exit) {
    LiveAlloc a;
    a.addr = 0x7000000 + in.live.size() * 0x100000;
    a.size = size;
    a.stack = s;
    a.api = api;
    a.family = api_info(api).family;
    a.device = 0;
    a.detected_at = at;
    in.live.push_back(a);
  }
  // cublasCreate reached from PyTorch (getCurrentCUDABlasHandle), or from
  // a program's main().
  StackId cublas_create(bool from_torch) {
    std::vector<NativeFrame> f = {
        frame("cudaMalloc", "/sim/libcublas.so.13"),
        frame("simmath::device_alloc(unsigned long)", "/sim/libcublas.so.13"),
        frame("cublasCreate_v2", "/sim/libcublas.so.13")};
    if (from_torch) {
      f.push_back(frame("at::cuda::getCurrentCUDABlasHandle(bool)", "/venv/torch/lib/libtorch_cuda.so"));
      f.push_back(frame("_PyEval_EvalFrameDefault", "/usr/bin/python3.11"));
    } else {
      f.push_back(frame("main", "/app/simple_cublas"));
    }
    return stack(std::move(f));
  }
};

}  // namespace

TEST_CASE("library_holding: a library's allocation reached from the framework", "[library_held]") {
  std::vector<NativeFrame> torch = {frame("cudaMalloc", "/x/libcudnn.so.9"),
                                    frame("cudnnCreate", "/x/libcudnn.so.9"),
                                    frame("at::native::getCudnnHandle()", "/t/libtorch_cuda.so")};
  LibraryHolding h = library_holding(torch);
  CHECK(h.library == "cuDNN");
  CHECK(h.direct);
  CHECK(library_holding({frame("x", "/a/libcublasLt.so.13"), frame("y", "/t/libc10_cuda.so")})
            .library == "cuBLASLt");
  CHECK(library_holding({frame("x", "/a/libnccl.so.2"), frame("y", "/t/libtorch_cuda.so")})
            .library == "NCCL");
  CHECK(library_holding({frame("x", "/a/libcufft.so.12"), frame("y", "/t/libtorch_cuda.so")})
            .library == "cuFFT");
}

TEST_CASE("library_holding: the program's own handle is not the framework's", "[library_held]") {
  CHECK(library_holding({frame("cublasCreate_v2", "/a/libcublas.so.13"), frame("main", "/app/p")})
            .library.empty());
  // A framework frame inside (not outside) the library does not count.
  CHECK(library_holding({frame("c10::alloc", "/t/libc10_cuda.so"),
                         frame("cublasCreate_v2", "/a/libcublas.so.13"), frame("main", "/app/p")})
            .library.empty());
  CHECK(library_holding({frame("main", "/app/p")}).library.empty());
  CHECK(library_holding({}).library.empty());
}

TEST_CASE("library_holding: PyTorch's own cuBLAS workspaces", "[library_held]") {
  LibraryHolding h = library_holding(
      {frame("c10::cuda::CUDACachingAllocator::malloc", "/t/libc10_cuda.so"),
       frame("at::cuda::getCUDABlasLtWorkspace()", "/t/libtorch_cuda.so")});
  CHECK(h.library == "cuBLASLt");
  CHECK_FALSE(h.direct);
  CHECK(library_holding({frame("at::cuda::allocateCUDABlasWorkspace(unsigned long)",
                               "/t/libtorch_cuda.so")})
            .library == "cuBLAS");
  // PyTorch 2.11 (the H100 run): the cuBLAS handle's workspace, made for
  // the autograd engine's thread by a backward matmul, and made under
  // getCUDABlasLtWorkspace by a forward one: cuBLAS's either way.
  CHECK(library_holding({frame("c10::cuda::CUDACachingAllocator::CudaMallocAsync::"
                               "CudaMallocAsyncAllocator::allocate(unsigned long)",
                               "/t/libc10_cuda.so"),
                         frame("at::cuda::setWorkspaceForHandle(cublasContext*, "
                               "c10::cuda::CUDAStream)",
                               "/t/libtorch_cuda.so"),
                         frame("at::cuda::getCurrentCUDABlasHandle()", "/t/libtorch_cuda.so"),
                         frame("void at::cuda::blas::gemm_internal_cublas<float, float>()",
                               "/t/libtorch_cuda.so")})
            .library == "cuBLAS");
  CHECK(library_holding({frame("at::cuda::setWorkspaceForHandle(cublasContext*, "
                               "c10::cuda::CUDAStream)",
                               "/t/libtorch_cuda.so"),
                         frame("at::cuda::getCurrentCUDABlasHandle()", "/t/libtorch_cuda.so"),
                         frame("at::cuda::getCUDABlasLtWorkspace()", "/t/libtorch_cuda.so")})
            .library == "cuBLAS");
  // The same name in a module of the program's own is not PyTorch's.
  CHECK(library_holding({frame("at::cuda::allocateCUDABlasWorkspace(unsigned long)", "/app/p")})
            .library.empty());
}

TEST_CASE("analyze: PyTorch's cuBLAS handle is library_held, a program's own is leaked",
          "[library_held]") {
  Fixture f;
  StackId torch = f.cublas_create(true);
  StackId own = f.cublas_create(false);
  f.live(64u << 20, torch, ApiId::cuMemAlloc_v2);
  f.live(64u << 20, own, ApiId::cuMemAlloc_v2);
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.library_held.size() == 1);
  CHECK(r.library_held[0].library == "cuBLAS");
  CHECK(r.library_held[0].bytes == (64u << 20));
  CHECK(r.summary.library_held_bytes == (64u << 20));
  REQUIRE(r.leaks.size() == 1);
  CHECK(r.leaks[0].library.empty());
  CHECK(r.summary.leaked_bytes == (64u << 20));

  SECTION("TORCHSEAL_LIBRARY_HELD=off folds it back into leaks") {
    AnalysisOptions opts;
    opts.library_held = false;
    Report off = analyze(f.in, f.sym, opts);
    CHECK(off.library_held.empty());
    CHECK(off.summary.library_held_bytes == 0);
    CHECK(off.summary.leaked_bytes == (128u << 20));
  }
}

TEST_CASE("analyze: in segments mode the libraries' own memory is library_held, "
          "PyTorch's workspace stays cache",
          "[library_held]") {
  Fixture f;
  f.in.torch_process = true;
  f.in.torch_caching_allocator = true;
  StackId pinned = f.stack({frame("cudaHostAlloc", "/sim/libcudnn.so.9"),
                            frame("cudnnCreate", "/sim/libcudnn.so.9"),
                            frame("at::native::getCudnnHandle()", "/t/libtorch_cuda.so")});
  StackId workspace =
      f.stack({frame("c10::cuda::CUDACachingAllocator::malloc", "/t/libc10_cuda.so"),
               frame("at::cuda::allocateCUDABlasWorkspace(unsigned long)", "/t/libtorch_cuda.so")});
  f.live(4, pinned, ApiId::cuMemHostAlloc);
  f.live(32u << 20, workspace, ApiId::cudaMalloc);
  Report r = analyze(f.in, f.sym);
  CHECK(r.leaks.empty());
  REQUIRE(r.library_held.size() == 1);
  CHECK(r.library_held[0].library == "cuDNN");
  CHECK(r.library_held[0].api == "cuMemHostAlloc");
  CHECK(r.summary.cached_bytes == (32u << 20));
}

TEST_CASE("analyze: memory live at a context teardown is never library_held", "[library_held]") {
  Fixture f;
  f.live(1024, f.cublas_create(true), ApiId::cuMemAlloc_v2, DetectedAt::ContextTeardown);
  Report r = analyze(f.in, f.sym);
  CHECK(r.library_held.empty());
  CHECK(r.leaks.size() == 1);
}

TEST_CASE("library_held round-trips through P.json", "[library_held]") {
  Fixture f;
  f.live(1024, f.cublas_create(true), ApiId::cuMemAlloc_v2);
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.library_held.size() == 1);
  Report back;
  std::string error;
  REQUIRE(report_from_json(report_to_json(r), back, error));
  REQUIRE(back.library_held.size() == 1);
  CHECK(back.library_held[0].library == "cuBLAS");
  CHECK(back.summary.library_held_bytes == 1024);
  CHECK(report_to_json(back) == report_to_json(r));
}
