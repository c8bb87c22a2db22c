// JSON pieces shared by the files that list sites (report, diff, baseline):
// one spelling of a stack in all of them, and one way to write a list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/model/report_model.h"

namespace torchseal {

// "0x7f3a...": how a report spells a raw address.
std::string hex_address(uint64_t v);

// What a native frame says about its address. The files differ on purpose:
// a report keeps the raw address (hex string) for symbolizing later, a diff
// compares builds and drops it, a baseline keeps it (as a number) only where
// it is the frame's sole identity.
enum class FrameAddress { Hex, None, WhenUnsymbolized };

// {"function", "file", "line", "module"[, "address"]} per frame; unknown
// function/file/module and line 0 are null.
nlohmann::ordered_json native_frames_json(const std::vector<NativeFrame> &frames,
                                          FrameAddress address);

// {"function", "file", "line"} per frame.
nlohmann::ordered_json python_frames_json(const std::vector<PythonFrame> &frames);

// Sets e["frames"] and e["python_frames"] from a site entry's two stacks.
template <class Entry>
void put_stacks(nlohmann::ordered_json &e, const Entry &x, FrameAddress address) {
  e["frames"] = native_frames_json(x.frames, address);
  e["python_frames"] = python_frames_json(x.python_frames);
}

// One JSON array, an object per entry filled in by `fill(object, entry)`.
template <class Entry, class Fill>
nlohmann::ordered_json entries_json(const std::vector<Entry> &entries, Fill fill) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const Entry &x : entries) {
    nlohmann::ordered_json e;
    fill(e, x);
    a.push_back(std::move(e));
  }
  return a;
}

}  // namespace torchseal
