// Turning the recorder's state into P.json / P.txt through the shared
// analysis library (the same code `torchseal report` runs).
#pragma once

#include <cstdint>

#include <string>

#include "common/model/analysis_input.h"
#include "common/settings/config.h"

namespace torchseal {

void report_files_init(const Config &cfg);
// pid, argv, rank, host, start time and backend of this process now.
void fill_process_info(ProcessInfo &p);
// The expanded, writable prefix P for this process ("" with a logged error).
std::string output_prefix();
void report_files_after_fork();
// trigger: "exit" writes P.json/P.txt; others write P.<n>.json/P.<n>.txt.
// Returns the number of leaked allocations, or -1 if nothing could be written.
// trigger "stop" (the end of a torchseal_start() interval) and "snapshot"
// (`torchseal attach --snapshot`) write `prefix`.json/.txt, `prefix` as
// given (relative to the working directory).
// fresh_scan = false: the holder scan already taken is the one to use
// (`torchseal attach` scanned, then froze the recording).
int64_t write_report(const char *trigger, const std::string &prefix = {}, bool fresh_scan = true);
// A shim attached by torchseal_start() writes its history (and an exit
// report, if the interval is still open then) under the interval's prefix.
void set_output_prefix(const std::string &prefix);

// The disk is full or read-only: no further reports are attempted (the
// one-line reason has already been printed).
// Stops every later report; true for the first caller only, so one full disk
// makes one line however many writers hit it.
bool disable_report_output();

}  // namespace torchseal
