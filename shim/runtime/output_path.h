// Expands the TORCHSEAL_OUTPUT template (%p pid, %r rank, %h host, %t start
// time, %% literal) into a concrete path prefix. Never invokes a shell.
#pragma once

#include <cstdint>
#include <string>

namespace torchseal {

struct TemplateVars {
  int64_t pid = 0;
  int64_t rank = -1;  // -1: no rank; %r then expands to "0"
  std::string host;
  int64_t start_time = 0;
};

// Returns false with a one-line `error` for a malformed template.
bool expand_output_template(const std::string &tmpl, const TemplateVars &vars, std::string &out,
                            std::string &error);

// Rank from RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK; -1 if none.
int64_t rank_from_environment();

// The default template: includes the rank when one is set.
std::string default_output_template(int64_t rank);

// Picks a writable location for `prefix`: its own directory if writable,
// otherwise the same base name under $TMPDIR or /tmp. Returns false if none is.
bool choose_writable_prefix(const std::string &prefix, std::string &out, std::string &note);

}  // namespace torchseal
