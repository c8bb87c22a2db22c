// Leak sites: which frames a user should see, and when two stacks are "the
// same place" in the source (site_key, and SiteIds to number them cheaply).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/model/analysis_input.h"
#include "common/symbols/module_map.h"  // is_internal_module
#include "common/symbols/symbolizer.h"
#include "report/model/report_model.h"

namespace torchseal {

// The function is a CUDA API entry point or a CUDA runtime internal (cuda*,
// __cuda*, cudart::*, cuXxx driver calls, libcudart_static helpers): when the
// runtime is linked statically these frames sit in the user's own module.
bool is_cuda_api_function(std::string_view function);

// Drops the leading torchseal/CUDA-library frames, then the leading CUDA API
// frames, so frames[0] is the user's call site. A stack that would become
// empty keeps what the first rule left (or is returned unchanged), so a
// report never loses the only information it has.
std::vector<NativeFrame> trim_frames(std::vector<NativeFrame> frames);

// Canonical identity of a site: (function, file, line) per native frame and
// (function, file, line) per Python frame. Frames without any symbol fall
// back to module + raw address. Two stacks with equal keys are one site.
std::string site_key(const std::vector<NativeFrame> &frames,
                     const std::vector<PythonFrame> &python_frames);

// One frame's part of site_key(), terminator included: site_key() is these
// parts in order, so comparing part by part is comparing keys (SiteIds
// interns the parts instead of holding whole keys).
void append_frame_key(std::string &key, const NativeFrame &frame);
void append_frame_key(std::string &key, const PythonFrame &frame);

// Numbers the source sites of raw (native, python) stack pairs, so grouping
// millions of allocations or samples compares integers, not stacks. Two pairs
// get the same id exactly when site_key() of their trimmed frames is equal.
//
// A site is held as interned per-frame ids, not as its key string and frames:
// a long run can put thousands of deep stacks into the step samples, and
// keeping every one symbolized (~10 KB each) made the analysis, not the live
// state, the largest thing in memory. Frames are produced again on request
// (the symbolizer caches per return address), for the few sites reported.
//
// Ids outside the store (a damaged history file) are treated as empty stacks
// rather than trusted.
class SiteIds {
 public:
  SiteIds(const StackStore &stacks, Symbolizer &sym) : stacks_(stacks), sym_(sym) {}

  uint32_t get(StackId native, PyStackId python);

  // The frames a report shows for one raw stack: symbolized and trimmed
  // (trim_frames) for native stacks, as recorded for Python ones.
  std::vector<NativeFrame> native_frames(StackId native);
  const std::vector<PythonFrame> &python_frames(PyStackId python) const;

  // The first raw pair that got `site`: the one whose frames name it.
  std::pair<StackId, PyStackId> first_pair(uint32_t site) const { return firsts_[site]; }

 private:
  using Parts = std::vector<uint32_t>;  // interned frame keys, innermost first
  struct PartsHash {
    size_t operator()(const Parts &p) const;
  };

  uint32_t intern_frame(const std::string &key);
  uint32_t intern_parts(Parts &&parts);
  template <class Frame>
  uint32_t intern_stack(const std::vector<Frame> &frames);  // parts id of a whole stack
  uint32_t native_key(StackId native);
  uint32_t python_key(PyStackId python);

  const StackStore &stacks_;
  Symbolizer &sym_;
  std::unordered_map<uint64_t, uint32_t> by_pair_;     // raw pair -> site
  std::unordered_map<StackId, uint32_t> native_keys_;  // raw stack -> parts id
  std::unordered_map<PyStackId, uint32_t> python_keys_;
  std::unordered_map<std::string, uint32_t> frames_;  // frame key -> id
  std::unordered_map<Parts, uint32_t, PartsHash> parts_;
  std::unordered_map<uint64_t, uint32_t> sites_;       // (native, python) parts -> site
  std::vector<std::pair<StackId, PyStackId>> firsts_;  // site -> first raw pair
};

}  // namespace torchseal
