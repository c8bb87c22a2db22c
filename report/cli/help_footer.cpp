// The footer every subcommand's --help ends with, in one shape.
#include "report/cli/commands.h"

namespace torchseal::cli {

std::string help_footer(std::string_view description, std::string_view exit_status,
                        std::initializer_list<std::string_view> examples) {
  std::string out = "DESCRIPTION\n";
  out += description;
  out += "\nEXIT STATUS\n  ";
  out += exit_status;
  out += "\n\nEXAMPLES\n";
  for (std::string_view e : examples) {
    out += "  ";
    out += e;
    out += "\n";
  }
  return out;
}

}  // namespace torchseal::cli
