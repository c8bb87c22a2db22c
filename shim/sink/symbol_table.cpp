#include "shim/sink/symbol_table.h"

#include <algorithm>

#include "common/format/records.h"
#include "common/format/tseal_format.h"
#include "common/symbols/module_map.h"
#include "common/symbols/symbolizer.h"
#include "shim/core/loader_walk.h"

namespace torchseal::history {

void append_symbols(std::vector<uint8_t> &out, StackTable &stacks) {
  std::vector<std::vector<uint64_t>> all;
  stacks.export_all(all);
  std::vector<uint64_t> ips;
  for (const auto &st : all) ips.insert(ips.end(), st.begin(), st.end());
  std::sort(ips.begin(), ips.end());
  ips.erase(std::unique(ips.begin(), ips.end()), ips.end());
  std::vector<Module> modules;
  {
    LoaderWalkGuard walking;
    modules = capture_module_map();
  }
  Symbolizer sym(std::move(modules));
  tseal::SymbolsRecord rec;
  rec.ips.reserve(ips.size());
  for (uint64_t ip : ips) rec.ips.emplace_back(ip, sym.symbolize(ip));
  tseal::append_record(out, tseal::Chunk::Symbols, rec);
}

}  // namespace torchseal::history
