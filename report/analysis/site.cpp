#include "report/analysis/site.h"
#include "common/util/fork_safe.h"

#include <cctype>

namespace torchseal {
namespace {

void append_field(std::string &key, std::string_view s) {
  // Length-prefixed, so no choice of separator can be forged by a name.
  key += std::to_string(s.size());
  key += ':';
  key += s;
}

}  // namespace

bool is_cuda_api_function(std::string_view fn) {
  if (fn.starts_with("cuda") || fn.starts_with("__cuda") || fn.starts_with("cudart::") ||
      fn.starts_with("libcudart_static")) {
    return true;
  }
  // Driver API: cuMemAlloc_v2, cuCtxDestroy, ... but not user names like "cute".
  return fn.size() > 2 && fn[0] == 'c' && fn[1] == 'u' &&
         std::isupper(static_cast<unsigned char>(fn[2]));
}

std::vector<NativeFrame> trim_frames(std::vector<NativeFrame> frames) {
  size_t i = 0;
  while (i < frames.size() && is_internal_module(frames[i].module)) ++i;
  if (i == frames.size()) return frames;
  // Work per physical frame: the inlined levels of one return address share
  // its `address`. A static runtime's API function can inline helpers (a
  // lambda, a template) whose own names say nothing; if any level of the
  // physical frame is a CUDA API function, the whole frame is the runtime's.
  auto group_end = [&](size_t k) {
    size_t e = k + 1;
    while (e < frames.size() && frames[e].address == frames[k].address) ++e;
    return e;
  };
  // A statically linked runtime's helpers may have no symbol at all; a
  // nameless frame is skipped only when a CUDA API frame follows it, i.e.
  // when it is evidently inside the runtime rather than user code without
  // symbols.
  size_t j = i, cut = i;
  while (j < frames.size()) {
    size_t e = group_end(j);
    bool nameless = true, api = false;
    for (size_t k = j; k < e; ++k) {
      if (!frames[k].function.empty()) nameless = false;
      if (is_cuda_api_function(frames[k].function)) api = true;
    }
    if (!nameless && !api) break;
    if (api) cut = e;
    j = e;
  }
  if (cut == frames.size()) cut = i;
  frames.erase(frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(cut));
  return frames;
}

void append_frame_key(std::string &key, const NativeFrame &f) {
  if (f.function.empty() && f.file.empty()) {
    // No symbols at all: the raw address is the only identity there is.
    key += 'A';
    append_field(key, f.module);
    key += std::to_string(f.address);
  } else {
    // Function plus source line, so unrolled or duplicated copies of one
    // call line merge. Without line info the module disambiguates
    // same-named static functions in different objects.
    key += 'N';
    append_field(key, f.function);
    append_field(key, f.file);
    key += std::to_string(f.line);
    if (f.line == 0) append_field(key, f.module);
  }
  key += ';';
}

void append_frame_key(std::string &key, const PythonFrame &p) {
  key += 'P';
  append_field(key, p.function);
  append_field(key, p.file);
  key += std::to_string(p.line);
  key += ';';
}

std::string site_key(const std::vector<NativeFrame> &frames,
                     const std::vector<PythonFrame> &python_frames) {
  std::string key;
  key.reserve(frames.size() * 48);
  for (const NativeFrame &f : frames) append_frame_key(key, f);
  key += '|';
  for (const PythonFrame &p : python_frames) append_frame_key(key, p);
  return key;
}

size_t SiteIds::PartsHash::operator()(const Parts &p) const {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the ids
  for (uint32_t v : p) {
    h ^= v;
    h *= 0x100000001b3ull;
  }
  return static_cast<size_t>(h);
}

uint32_t SiteIds::intern_frame(const std::string &key) {
  return frames_.emplace(key, uint32_t(frames_.size())).first->second;
}

uint32_t SiteIds::intern_parts(Parts &&parts) {
  return parts_.emplace(std::move(parts), uint32_t(parts_.size())).first->second;
}

template <class Frame>
uint32_t SiteIds::intern_stack(const std::vector<Frame> &frames) {
  Parts parts;
  std::string key;
  for (const Frame &f : frames) {
    key.clear();
    append_frame_key(key, f);
    parts.push_back(intern_frame(key));
  }
  return intern_parts(std::move(parts));
}

uint32_t SiteIds::native_key(StackId native) {
  auto it = native_keys_.find(native);
  if (it != native_keys_.end()) return it->second;
  return native_keys_.emplace(native, intern_stack(native_frames(native))).first->second;
}

uint32_t SiteIds::python_key(PyStackId python) {
  auto it = python_keys_.find(python);
  if (it != python_keys_.end()) return it->second;
  return python_keys_.emplace(python, intern_stack(python_frames(python))).first->second;
}

uint32_t SiteIds::get(StackId native, PyStackId python) {
  const uint64_t pair = (uint64_t(native) << 32) | python;
  auto it = by_pair_.find(pair);
  if (it != by_pair_.end()) return it->second;
  // Native and Python frame keys never coincide (different leading tag), so
  // one parts table serves both halves.
  const uint64_t halves = (uint64_t(native_key(native)) << 32) | python_key(python);
  auto [site, fresh] = sites_.emplace(halves, uint32_t(firsts_.size()));
  if (fresh) firsts_.emplace_back(native, python);
  by_pair_.emplace(pair, site->second);
  return site->second;
}

std::vector<NativeFrame> SiteIds::native_frames(StackId native) {
  if (native == 0 || native >= stacks_.native.size()) return {};
  return trim_frames(sym_.symbolize_stack(stacks_.native[native]));
}

const std::vector<PythonFrame> &SiteIds::python_frames(PyStackId python) const {
  static constinit Lazy<const std::vector<PythonFrame>> none;
  if (python == 0 || python >= stacks_.python.size()) return none.get();
  return stacks_.python[python];
}

}  // namespace torchseal
