// Matching leak/growth sites between two reports (baseline, diff, merge).
//
// site_key() identifies a site inside one report; it keeps full paths and,
// for frames without line info, the module path, so it does not survive a
// rebuild into another directory or a checkout at another path. This
// matcher is the portable version, used whenever sites from different runs
// or builds are compared:
//
//   1. A site's *chain* is its kind, api, any caller-supplied extra (e.g.
//      device), then per native frame the function name and the basename of
//      its file (a frame with no function and no file: module basename plus
//      raw address), then per Python frame function + file basename.
//      Module paths and addresses of symbolized frames are ignored, so a
//      rebuild, relink or a checkout elsewhere keeps the chain.
//   2. Sites can only match within one chain. Pairs whose line numbers are
//      all equal match first ("exact").
//   3. Then the remaining pairs match when every frame's line moved by at
//      most kLineSlack lines (code edited above the call), closest first.
//   4. Matching is one-to-one: a second leak added to the same function is
//      still a new site even if its lines are close to an old one's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "report/model/report_model.h"

namespace torchseal {

inline constexpr int kLineSlack = 50;

struct SiteView {
  std::string kind, api, extra;
  const std::vector<NativeFrame> *frames = nullptr;
  const std::vector<PythonFrame> *python_frames = nullptr;
};

SiteView site_view(const LeakEntry &e, std::string extra = {});
SiteView site_view(const GrowthEntry &e, std::string extra = {});

// The chain of rule 1 (exposed for grouping and tests).
std::string site_chain(const SiteView &s);

// For every site in `b`, the index of its match in `a`, or -1 (rules 2-4).
// `slack` 0: lines must be equal (reports of one build: the ranks a merge
// adds up, where two lines of one function are two sites).
std::vector<long> match_sites(const std::vector<SiteView> &a, const std::vector<SiteView> &b,
                              int slack = kLineSlack);

// "function file:line" of the frame a user should look at: the innermost
// Python frame outside torch's package and the standard library when there
// is one (user_python_index(), shown_frames.h), else frames[0]. Empty when
// the site has no symbols at all.
struct UserFrame {
  std::string function, file;
  int line = 0;
};
UserFrame user_frame(const std::vector<NativeFrame> &frames,
                     const std::vector<PythonFrame> &python_frames);

// One-line label for a site: "fn (file.cpp:12) <- caller (file.cpp:40)".
std::string site_label(const std::vector<NativeFrame> &frames,
                       const std::vector<PythonFrame> &python_frames, size_t depth = 2);

}  // namespace torchseal
