// A (code, name, text) row of an enum (errors, CUPTI callback ids); tables are generated from the
// toolkit headers by gen_errors.py so codes and names cannot drift.
#pragma once
namespace simcuda {
struct ErrorEntry {
    int code;
    const char *name;
    const char *text;
};
extern const ErrorEntry kDriverErrors[];
extern const ErrorEntry kRuntimeErrors[];
extern const ErrorEntry kCuptiErrors[];
// CUPTI callback ids (same generator; `name` is the enumerator).
extern const ErrorEntry kDriverCbids[];
extern const ErrorEntry kRuntimeCbids[];
// nullptr terminated tables; returns nullptr for unknown codes.
const ErrorEntry *find_error(const ErrorEntry *table, int code);
}  // namespace simcuda
