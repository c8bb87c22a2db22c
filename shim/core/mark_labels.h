// Mark labels (torchseal_mark): interned by the core when a mark is made,
// defined in the file by the pass writer before the events that use them.
#pragma once

#include <cstdint>

#include "common/format/records.h"

namespace torchseal::history {

// Interns a mark label for Mark events: the id their `size` carries; the
// writer defines it in the file before the event. 0 when the label cannot be
// kept (too many distinct labels): drop the mark then.
// Any thread; takes a lock, so not for the allocation path.
uint32_t intern_label(const char *label);

namespace labels {
// Moves the labels interned since the last call into `rec`.
void take_new(tseal::LabelsRecord &rec);
// Child side of fork: a file the child starts defines its labels afresh.
void reset_after_fork();
}  // namespace labels

}  // namespace torchseal::history
