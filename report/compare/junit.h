// JUnit XML for CI systems (GitLab, Jenkins, GitHub test reporters): one
// <testcase> per checked report, with a <failure> when the gate failed.
#pragma once

#include <string>
#include <vector>

namespace torchseal {

struct JUnitCase {
  std::string name;       // the report path
  std::string classname;  // e.g. "torchseal.check"
  bool failed = false;
  std::string message;  // one line: why it failed
  std::string details;  // the offending stacks (failure body)
  std::string output;   // system-out for passing cases
};

std::string junit_xml(const std::string &suite, const std::vector<JUnitCase> &cases);

// Escapes for XML text and attributes; drops characters XML 1.0 forbids.
std::string xml_escape(const std::string &s);

}  // namespace torchseal
