#include "shim/runtime/output_path.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "common/settings/settings.h"

namespace torchseal {

bool expand_output_template(const std::string &tmpl, const TemplateVars &v, std::string &out,
                            std::string &error) {
  out.clear();
  for (size_t i = 0; i < tmpl.size(); ++i) {
    char c = tmpl[i];
    if (c != '%') {
      out += c;
      continue;
    }
    if (++i == tmpl.size()) {
      error = "TORCHSEAL_OUTPUT ends with a lone '%'";
      return false;
    }
    switch (tmpl[i]) {
      case 'p':
        out += std::to_string(v.pid);
        break;
      case 'r':
        out += std::to_string(v.rank < 0 ? 0 : v.rank);
        break;
      case 'h': {
        // A hostname must not smuggle in a path separator.
        for (char h : v.host) out += (h == '/' ? '_' : h);
        break;
      }
      case 't':
        out += std::to_string(v.start_time);
        break;
      case '%':
        out += '%';
        break;
      default: {
        // Show the offending byte printably: the message must stay one line.
        unsigned char c = static_cast<unsigned char>(tmpl[i]);
        char shown[8];
        if (c >= 0x20 && c < 0x7f)
          snprintf(shown, sizeof shown, "%c", c);
        else
          snprintf(shown, sizeof shown, "\\x%02x", c);
        error = std::string("TORCHSEAL_OUTPUT has unknown placeholder '%") + shown +
                "' (accepted: %p %r %h %t %%)";
        return false;
      }
    }
  }
  if (out.empty() || out.back() == '/') {
    error = "TORCHSEAL_OUTPUT expands to a directory, not a file prefix";
    return false;
  }
  return true;
}

int64_t rank_from_environment() {
  for (const char *name : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    const char *v = secure_getenv(name);
    long n;
    if (v && settings::parse_int_in_range(v, 0, 1L << 30, n)) return n;
  }
  return -1;
}

std::string default_output_template(int64_t rank) {
  return rank >= 0 ? "torchseal-r%r-%p" : "torchseal-%p";
}

namespace {
std::string dir_of(const std::string &prefix) {
  size_t slash = prefix.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return prefix.substr(0, slash);
}
std::string base_of(const std::string &prefix) {
  size_t slash = prefix.rfind('/');
  return slash == std::string::npos ? prefix : prefix.substr(slash + 1);
}
}  // namespace

bool choose_writable_prefix(const std::string &prefix, std::string &out, std::string &note) {
  std::string dir = dir_of(prefix);
  if (access(dir.c_str(), W_OK | X_OK) == 0) {
    out = prefix;
    return true;
  }
  const char *tmp = secure_getenv("TMPDIR");
  for (std::string cand : {std::string(tmp && *tmp ? tmp : ""), std::string("/tmp")}) {
    if (cand.empty() || access(cand.c_str(), W_OK | X_OK) != 0) continue;
    out = cand + "/" + base_of(prefix);
    note = "output directory '" + dir + "' is not writable; writing to " + out + ".*";
    return true;
  }
  note = "output directory '" + dir + "' is not writable and neither is $TMPDIR nor /tmp";
  return false;
}

}  // namespace torchseal
