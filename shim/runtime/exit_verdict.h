// The Verdict chunk of the history (docs/tseal-format.md): what the exit
// report decides that the events cannot show (the holder scan, the holders
// per site, each OOM's recovered flag and holders), so a replay of P.tseal
// reaches P.json's verdict.
#pragma once

#include <cstdint>
#include <vector>

namespace torchseal::history {

// Appends it when there is anything to say (a Python process's scans, or
// OOMs). Call once the OOMs are settled and the exit scan has run, after the
// last pass (its stack ids are defined there). May throw (allocation).
void append_verdict(std::vector<uint8_t> &out);

}  // namespace torchseal::history
