#include "report/render/site_json.h"

#include <cinttypes>
#include <cstdio>

namespace torchseal {
namespace {

using ojson = nlohmann::ordered_json;

ojson str_or_null(const std::string &s) { return s.empty() ? ojson(nullptr) : ojson(s); }

}  // namespace

std::string hex_address(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

ojson native_frames_json(const std::vector<NativeFrame> &frames, FrameAddress address) {
  ojson a = ojson::array();
  for (const NativeFrame &f : frames) {
    ojson j;
    j["function"] = str_or_null(f.function);
    j["file"] = str_or_null(f.file);
    j["line"] = f.line > 0 ? ojson(f.line) : ojson(nullptr);
    j["module"] = str_or_null(f.module);
    if (address == FrameAddress::Hex) {
      j["address"] = hex_address(f.address);
    } else if (address == FrameAddress::WhenUnsymbolized && f.function.empty() && f.file.empty()) {
      j["address"] = f.address;
    }
    a.push_back(std::move(j));
  }
  return a;
}

ojson python_frames_json(const std::vector<PythonFrame> &frames) {
  ojson a = ojson::array();
  for (const PythonFrame &f : frames) {
    a.push_back({{"function", f.function}, {"file", f.file}, {"line", f.line}});
  }
  return a;
}

}  // namespace torchseal
