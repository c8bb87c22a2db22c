// A capped history (docs/tseal-format.md, "Capped histories"): the main
// file, its segment index and the segment files, read through ChunkReader.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/model/history_window.h"
#include "report/input/history_reader.h"

namespace torchseal {

// Reads the capped history whose main file is `main` (open, past its header).
bool read_segmented(const std::string &path, FILE *main, HistoryListener &listener,
                    std::string &error, std::vector<std::string> &warnings, HistoryReadStats *stats,
                    void (*progress)(uint64_t, uint64_t), const HistoryWindow *window);

}  // namespace torchseal
