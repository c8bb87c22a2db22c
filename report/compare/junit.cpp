#include "report/compare/junit.h"

#include "report/render/html_escape.h"

namespace torchseal {

std::string xml_escape(const std::string &s) {
  // Control characters other than tab/newline/CR are not allowed in XML 1.0
  // even as references; a symbol name must not break the file.
  return markup_escape(s, "&apos;", "\t\n\r", false);
}

std::string junit_xml(const std::string &suite, const std::vector<JUnitCase> &cases) {
  size_t failures = 0;
  for (const JUnitCase &c : cases) failures += c.failed ? 1 : 0;
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites name=\"" + xml_escape(suite) + "\" tests=\"" + std::to_string(cases.size()) +
         "\" failures=\"" + std::to_string(failures) + "\">\n";
  out += "  <testsuite name=\"" + xml_escape(suite) + "\" tests=\"" + std::to_string(cases.size()) +
         "\" failures=\"" + std::to_string(failures) + "\" errors=\"0\" skipped=\"0\">\n";
  for (const JUnitCase &c : cases) {
    out += "    <testcase name=\"" + xml_escape(c.name) + "\" classname=\"" +
           xml_escape(c.classname) + "\" time=\"0\"";
    if (!c.failed && c.output.empty()) {
      out += "/>\n";
      continue;
    }
    out += ">\n";
    if (c.failed) {
      out += "      <failure message=\"" + xml_escape(c.message) + "\" type=\"torchseal.leak\">" +
             xml_escape(c.details) + "</failure>\n";
    }
    if (!c.output.empty()) out += "      <system-out>" + xml_escape(c.output) + "</system-out>\n";
    out += "    </testcase>\n";
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace torchseal
