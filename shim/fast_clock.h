// Event timestamps: CLOCK_MONOTONIC nanoseconds, read from the TSC when the
// kernel itself trusts it. clock_gettime costs ~50-65 ns on the VMs we
// measure on and every event needs a stamp (two per alloc+free pair); rdtsc
// plus a scale is ~20 ns (bench/RESULTS.md).
//
// The scale is calibrated against clock_gettime (which stays in use for the
// first 10 ms) and re-anchored about every 250 ms by whichever thread reads
// the clock then: each new anchor continues the old line (no step) and bends
// the slope by at most 0.1% to close the remaining gap. It tracks
// CLOCK_MONOTONIC to within microseconds; a thread preempted across a
// re-anchor may see time step back by 0.1% of the preemption.
#pragma once

#include <cstdint>

namespace torchseal {

uint64_t now_ns();

// Whether now_ns() reads the TSC (false: clock_gettime on every call).
bool clock_uses_tsc();

}  // namespace torchseal
