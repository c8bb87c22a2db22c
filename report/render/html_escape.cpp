#include "report/render/html_escape.h"

#include <cstdarg>
#include <cstdio>

namespace torchseal {

std::string markup_escape(std::string_view s, const char *apos, std::string_view keep_controls,
                          bool replace_del) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += apos;
        break;
      default:
        if ((static_cast<unsigned char>(c) < 0x20 &&
             keep_controls.find(c) == std::string_view::npos) ||
            (replace_del && c == 0x7f)) {
          out += '?';
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string html_escape(std::string_view s) { return markup_escape(s, "&#39;", "\t", true); }

std::string html_bytes(uint64_t bytes) {
  static const char *const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return html_format(v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, kUnits[u]);
}

std::string html_format(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string s;
  if (n > 0) {
    s.resize(static_cast<size_t>(n) + 1);
    std::vsnprintf(s.data(), s.size(), fmt, ap2);
    s.resize(static_cast<size_t>(n));
  }
  va_end(ap2);
  return s;
}

}  // namespace torchseal
