// Small text helpers shared by the HTML report writers. Every string that
// comes from a report or a history (function names, paths, argv) is
// untrusted and goes through html_escape() before it reaches the page.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace torchseal {

// Escapes & < > " and ' (as `apos`) and replaces control characters other
// than those in `keep_controls` (and DEL when `replace_del`) with '?', so the
// result is safe in element text and quoted attribute values of HTML or XML.
std::string markup_escape(std::string_view s, const char *apos, std::string_view keep_controls,
                          bool replace_del);

// markup_escape() for HTML: ' as &#39;, only tab kept, DEL replaced.
std::string html_escape(std::string_view s);

// "1.5 MiB", "512 B": compact sizes for labels.
std::string html_bytes(uint64_t bytes);

// printf into a std::string.
std::string html_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace torchseal
