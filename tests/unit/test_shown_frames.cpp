#include <catch2/catch.hpp>

#include <sstream>

#include "report/render/report_text.h"
#include "report/analysis/shown_frames.h"

using namespace torchseal;

namespace {

const char *kTorchPy = "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py";
const char *kLibC10 = "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so";
const char *kLibTorch = "/venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so";

NativeFrame native(const char *fn, const char *module, uint64_t address = 0x1000) {
  return NativeFrame{fn, "", 0, module, address};
}

// What a tensor allocated from a Python line looks like: the caching
// allocator, the dispatcher, the interpreter, then the process entry.
std::vector<NativeFrame> torch_native_stack() {
  return {native("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, "
                 "signed char, unsigned long, CUstream_st*)",
                 kLibC10, 0x7f0000000010),
          native("at::native::empty_cuda(...)", kLibTorch, 0x7f0000000020),
          native("", kLibTorch, 0x7f0000000030),  // unsymbolized, still torch's
          native("torch::autograd::THPVariable_add(_object*, _object*, _object*)",
                 "/venv/lib/python3.12/site-packages/torch/lib/libtorch_python.so"),
          native("_PyEval_EvalFrameDefault", "/usr/bin/python3.12"),
          native("PyEval_EvalCode", "/usr/bin/python3.12"),
          native("Py_RunMain", "/usr/bin/python3.12"),
          native("main", "/usr/bin/python3.12"),
          native("__libc_start_main", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
          native("_start", "/usr/bin/python3.12")};
}

std::vector<PythonFrame> torch_python_stack() {
  return {{"Linear.forward", "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", 125},
          {"Module._call_impl", kTorchPy, 1562},
          {"train", "/home/me/train.py", 18},
          {"<module>", "/home/me/train.py", 40}};
}

std::vector<std::string> lines(const std::string &s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("python_origin: torch, the standard library, and the user", "[frames]") {
  CHECK(python_origin("/home/me/train.py") == PyOrigin::User);
  CHECK(python_origin("train.py") == PyOrigin::User);
  CHECK(python_origin("<stdin>") == PyOrigin::User);
  CHECK(python_origin("<ipython-input-3-abc>") == PyOrigin::User);
  // Other installed packages are not torch: their frame may be the nearest
  // code the user controls.
  CHECK(python_origin("/venv/lib/python3.12/site-packages/transformers/modeling.py") ==
        PyOrigin::User);
  CHECK(python_origin("/venv/lib/python3.12/site-packages/torchvision/ops/boxes.py") ==
        PyOrigin::User);
  CHECK(python_origin(kTorchPy) == PyOrigin::Torch);
  CHECK(python_origin("/usr/lib/python3/dist-packages/torch/functional.py") == PyOrigin::Torch);
  CHECK(python_origin("/usr/local/lib/python3.11/dist-packages/torch/autograd/graph.py") ==
        PyOrigin::Torch);
  // A checkout with a torch/ directory is not an installed torch.
  CHECK(python_origin("/home/me/proj/torch/model.py") == PyOrigin::User);
  CHECK(python_origin("/usr/lib/python3.12/json/decoder.py") == PyOrigin::Stdlib);
  CHECK(python_origin("/opt/conda/lib/python3.11/runpy.py") == PyOrigin::Stdlib);
  CHECK(python_origin("/usr/lib64/python3.13t/threading.py") == PyOrigin::Stdlib);
  CHECK(python_origin("<frozen runpy>") == PyOrigin::Stdlib);
  CHECK(python_origin("") == PyOrigin::Stdlib);
  // Near misses of the standard library's directory.
  CHECK(python_origin("/home/me/lib/python_utils/x.py") == PyOrigin::User);
  CHECK(python_origin("/home/me/mylib/python3.12/x.py") == PyOrigin::User);

  CHECK(is_installed_python("/venv/lib/python3.12/site-packages/transformers/modeling.py"));
  CHECK(is_installed_python("/usr/lib/python3.12/json/decoder.py"));
  CHECK(is_installed_python("<string>"));
  CHECK_FALSE(is_installed_python("/home/me/train.py"));
}

TEST_CASE("user_python_index: innermost frame outside torch and the stdlib", "[frames]") {
  CHECK(user_python_index(torch_python_stack()) == 2);
  CHECK(user_python_index({}) == -1);
  CHECK(user_python_index({{"f", kTorchPy, 1}, {"g", "<frozen runpy>", 2}}) == -1);
}

TEST_CASE("is_folded_native: interpreter and framework, never the entry", "[frames]") {
  for (const NativeFrame &f : torch_native_stack()) {
    INFO(f.function);
    const bool entry = f.function == "main" || f.function == "_start" ||
                       f.function == "__libc_start_main";
    CHECK(is_folded_native(f) == !entry);
  }
  CHECK(is_folded_native(native("PyObject_Call", "/usr/lib/libpython3.11.so.1.0")));
  CHECK(is_interpreter_native(native("PyObject_Call", "/usr/lib/libpython3.11.so.1.0")));
  CHECK(is_interpreter_native(native("_PyEval_EvalFrameDefault", "")));
  CHECK_FALSE(is_interpreter_native(native("at::native::empty_cuda(...)", kLibTorch)));
  CHECK(is_folded_native(native("void c10::function_ref<void ()>::callback_fn<F>(long)", "")));
  CHECK(is_folded_native(native("std::_Function_handler<void ()>::_M_invoke(std::_Any_data const&)",
                                kLibTorch)));
  CHECK(is_folded_native(native("pybind11::cpp_function::dispatcher(_object*)", "/x/ext.so")));
  // The user's own native code, even when it names torch types.
  CHECK_FALSE(is_folded_native(native("myext::run(at::Tensor const&)", "/home/me/myext.so")));
  CHECK_FALSE(is_folded_native(native("Pyramid::build()", "/home/me/app")));
  CHECK_FALSE(is_folded_native(native("leaky(int)", "/home/me/app")));
  CHECK_FALSE(is_folded_native(native("", "")));
}

TEST_CASE("shown_stack: user frame first, framework runs folded", "[frames]") {
  auto nf = torch_native_stack();
  auto py = torch_python_stack();
  ShownStack s = shown_stack(nf, py);
  CHECK(s.user == 2);
  CHECK(s.python == std::vector<size_t>{2, 0, 1, 3});
  REQUIRE(s.native.size() == 4);
  CHECK(s.native[0].folded);
  CHECK(s.native[0].first == 0);
  CHECK(s.native[0].count == 7);
  for (size_t i = 1; i < 4; ++i) {
    CHECK_FALSE(s.native[i].folded);
    CHECK(s.native[i].first == 6 + i);
  }
  // A lone framework frame between user frames stays visible.
  std::vector<NativeFrame> mixed = {native("leaky(int)", "/app"), native("c10::foo()", kLibC10),
                                    native("main", "/app")};
  ShownStack m = shown_stack(mixed, {});
  REQUIRE(m.native.size() == 3);
  for (const NativeRow &row : m.native) CHECK_FALSE(row.folded);
  CHECK(folded_label(1) == "1 interpreter/framework frame folded");
}

TEST_CASE("text report of a Python process: the user's line first", "[frames][text]") {
  Report r;
  r.process.pid = 9;
  r.process.python = "3.12.1";
  LeakEntry l;
  l.kind = "stream-ordered";
  l.api = "cudaMallocAsync";
  l.bytes = 4096;
  l.allocations = 1;
  l.frames = torch_native_stack();
  l.python_frames = torch_python_stack();
  r.leaks.push_back(l);
  auto ls = lines(report_to_text(r));
  size_t at = 0;
  while (at < ls.size() && ls[at].rfind("Direct leak", 0) != 0) ++at;
  REQUIRE(at + 9 < ls.size());
  CHECK(ls[at + 1] == "    #py2 in train /home/me/train.py:18");
  CHECK(ls[at + 2].rfind("    #py0 in Linear.forward ", 0) == 0);
  CHECK(ls[at + 4] == "    #py3 in <module> /home/me/train.py:40");
  CHECK(ls[at + 5] == "    ... 7 interpreter/framework frames folded (#0-#6)");
  CHECK(ls[at + 6].rfind("    #7 0x1000 in main (/usr/bin/python3.12)", 0) == 0);
  CHECK(ls[at + 8].rfind("    #9 0x1000 in _start", 0) == 0);

  // Without Python, the same native frames are listed one by one.
  r.process.python.clear();
  r.leaks[0].python_frames.clear();
  std::string native_text = report_to_text(r);
  CHECK(native_text.find("folded") == std::string::npos);
  CHECK(native_text.find("    #0 0x7f0000000010 in c10::cuda::") != std::string::npos);
}

TEST_CASE("text report: each hint once, with the sites it explains", "[frames][text]") {
  Report r;
  r.process.pid = 3;
  r.process.python = "3.12.1";
  const Hint h{"loss-accumulation", "`total += loss` (train.py:30) keeps every step's graph",
               "/home/me/train.py", 30};
  GrowthEntry g;
  g.kind = "device";
  g.api = "cudaMalloc";
  g.python_frames = {{"forward", "/home/me/model.py", 12}};
  g.hint = h;
  r.growth.push_back(g);
  g.python_frames = {{"backward_hook", "/home/me/model.py", 44}};
  r.growth.push_back(g);
  g.hint.reset();
  r.growth.push_back(g);
  OomEntry o;
  o.api = "cudaMalloc";
  o.python_frames = {{"step", "/home/me/train.py", 25}};
  o.hint = Hint{"exception-frame", "retry after leaving the except block", "/home/me/train.py", 27};
  r.ooms.push_back(o);
  r.ooms.push_back(o);  // the retry failed the same way: one site, twice
  std::string text = report_to_text(r);
  std::vector<std::string> hints;
  for (const std::string &l : lines(text)) {
    if (l.find("hint:") != std::string::npos) hints.push_back(l);
  }
  REQUIRE(hints.size() == 2);
  CHECK(hints[0] == "  hint: " + h.message);
  CHECK(text.find("    for growing site at forward (model.py:12), growing site at backward_hook "
                  "(model.py:44)\n") != std::string::npos);
  CHECK(text.find("    for OOM at step (train.py:25) (2 times)\n") != std::string::npos);
}
