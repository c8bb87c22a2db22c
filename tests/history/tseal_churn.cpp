// tseal_churn: writes a history whose interned data (stacks, symbols,
// modules) and live state do not depend on its length, so only the event and
// step counts differ between two runs. The reader-memory test compares a
// short and a long one: anything the reader keeps per event, per pass or per
// step sample past the live state shows up as a difference.
//
//   tseal_churn OUT.tseal EVENTS STEPS
//
// The layout is the writer's (shim/sink/pass_writer.cpp): Process, Modules,
// Stacks; then per pass a PASS chunk and an Events chunk; Symbols and End at
// the clean exit. The workload, like training loops that call through many
// layers: 5000 distinct deep stacks (100 call paths x depths 1..50, the
// bench's mixed shape) with long C++ names, drawn at random by a FIFO of
// 512 live 1 MiB allocations, plus 8 allocations live to the end (leaks).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "common/format/records.h"
#include "common/format/tseal_format.h"
#include "common/model/event.h"

using namespace torchseal;
namespace ts = torchseal::tseal;

namespace {

constexpr int kPaths = 100;
constexpr int kDepths = 50;
constexpr int kStacks = kPaths * kDepths;
constexpr size_t kLive = 512;
constexpr int kLeaks = 8;
constexpr uint64_t kEventsPerPass = 30000;  // what a busy writer pass holds
constexpr uint64_t kT0 = 1'000'000'000'000ull;
constexpr double kClockBase = 1'700'000'000.0;
const char *const kModule = "/opt/models/build/lib/libtraining_loop_with_a_long_name.so";

// IPs: the CUDA API, the recursive layer frame, one per call path, main.
constexpr uint64_t kApiIp = 0x7f1000001000ull;
constexpr uint64_t kLayerIp = 0x400100;
constexpr uint64_t kMainIp = 0x400200;

// Stacks are drawn pseudo-randomly (splitmix64), so the live set sampled at
// every step boundary is a different spread of sites, as in a real loop.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t path_ip(int p) { return 0x401000 + static_cast<uint64_t>(p) * 0x40; }

std::vector<uint64_t> stack_ips(int s) {  // s in [0, kStacks)
  std::vector<uint64_t> ips{kApiIp};
  for (int d = 0; d < 1 + s / kPaths; ++d) ips.push_back(kLayerIp);
  ips.push_back(path_ip(s % kPaths));
  ips.push_back(kMainIp);
  return ips;
}

class Out {
 public:
  explicit Out(std::FILE *f) : f_(f) { ts::append_file_header(buf_); }
  template <typename Record>
  void record(ts::Chunk type, const Record &rec) {
    ts::append_record(buf_, type, rec);
    if (buf_.size() > (1u << 20)) flush();
  }
  void events(uint32_t tid, const std::vector<Event> &ev) {
    ts::append_events_chunk(buf_, tid, ev);
    if (buf_.size() > (1u << 20)) flush();
  }
  bool flush() {
    bool ok = buf_.empty() || std::fwrite(buf_.data(), 1, buf_.size(), f_) == buf_.size();
    buf_.clear();
    return ok;
  }

 private:
  std::FILE *f_;
  std::vector<uint8_t> buf_;
};

void write_header_chunks(Out &out) {
  ts::ProcessRecord proc;
  proc.info.pid = 4242;
  proc.info.hostname = "churn-host";
  proc.info.start_time = kClockBase + 999.0;
  proc.info.argv = {"/opt/models/train"};
  proc.clock_base = kClockBase;
  out.record(ts::Chunk::Process, proc);
  out.record(ts::Chunk::Modules, ts::ModulesRecord{{{kModule, 0, 0x400000, 0x500000, ""}}});
  ts::StacksRecord stacks;
  for (int s = 0; s < kStacks; ++s) stacks.stacks.emplace_back(static_cast<StackId>(s + 1), stack_ips(s));
  out.record(ts::Chunk::Stacks, stacks);
}

void symbol(ts::SymbolsRecord &rec, uint64_t ip, const std::string &fn, const std::string &file,
            int line, const std::string &module) {
  rec.ips.push_back({ip, {{fn, file, line, module, ip}}});
}

void write_symbols(Out &out) {
  ts::SymbolsRecord b;
  symbol(b, kApiIp, "cudaMalloc", "", 0, "/usr/local/cuda/lib64/libcudart.so.12");
  symbol(b, kLayerIp,
         "models::transformer::DecoderLayer<float, 128>::forward(models::Tensor const&, "
         "models::Context&)",
         "/opt/models/src/transformer/decoder_layer.cpp", 212, kModule);
  symbol(b, kMainIp, "main", "/opt/models/src/main.cpp", 40, kModule);
  for (int i = 0; i < kPaths; ++i)
    symbol(b, path_ip(i),
           "models::ops::workspace_for_kernel_" + std::to_string(i) +
               "(models::Shape const&, models::DeviceBuffer&)",
           "/opt/models/src/ops/workspace_" + std::to_string(i) + ".cpp", 30 + i, kModule);
  out.record(ts::Chunk::Symbols, b);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: tseal_churn OUT.tseal EVENTS STEPS\n");
    return 2;
  }
  const uint64_t n_events = std::strtoull(argv[2], nullptr, 10);
  const uint64_t n_steps = std::strtoull(argv[3], nullptr, 10);
  std::FILE *f = std::fopen(argv[1], "wb");
  if (!f) {
    std::perror(argv[1]);
    return 1;
  }
  Out out(f);
  write_header_chunks(out);

  std::vector<Event> pass;
  uint64_t t = kT0, made = 0, next_addr = 0x7f0000000000ull, allocs = 0, step = 0;
  const uint64_t step_every = n_steps ? std::max<uint64_t>(1, n_events / n_steps) : 0;
  std::deque<uint64_t> fifo;
  auto write_pass = [&] {
    if (pass.empty()) return;
    out.record(ts::Chunk::Pass, ts::PassRecord{pass.front().time_ns});
    out.events(4242, pass);
    pass.clear();
  };
  auto push = [&](const Event &e) {
    pass.push_back(e);
    if (pass.size() >= kEventsPerPass) write_pass();
  };
  auto alloc = [&](int stack) {
    Event e{};
    e.time_ns = t += 500;
    e.op = Op::Alloc;
    e.api = ApiId::cudaMalloc;
    e.family = Family::Device;
    e.device = 0;
    e.addr = next_addr;
    next_addr += 1u << 20;
    e.size = 1u << 20;
    e.stack = static_cast<StackId>(stack + 1);
    push(e);
    ++made;
    return e.addr;
  };
  auto free_addr = [&](uint64_t addr) {
    Event e{};
    e.time_ns = t += 500;
    e.op = Op::Free;
    e.api = ApiId::cudaFree;
    e.family = Family::Device;
    e.device = 0;
    e.addr = addr;
    push(e);
    ++made;
  };

  for (int i = 0; i < kLeaks; ++i) alloc(i * 613 % kStacks);
  while (made + fifo.size() < n_events) {
    if (fifo.size() >= kLive) {
      free_addr(fifo.front());
      fifo.pop_front();
    } else {
      fifo.push_back(alloc(static_cast<int>(mix(allocs++) % kStacks)));
    }
    if (step_every && made >= (step + 1) * step_every && step < n_steps) {
      Event e{};
      e.time_ns = t += 500;
      e.op = Op::Step;
      e.api = ApiId::Unknown;
      e.family = Family::None;
      e.size = ++step;
      push(e);
    }
  }
  while (!fifo.empty()) {
    free_addr(fifo.front());
    fifo.pop_front();
  }
  write_pass();
  write_symbols(out);
  out.record(ts::Chunk::End, ts::EndRecord{kClockBase + static_cast<double>(t) / 1e9, made, true, 0});
  if (!out.flush() || std::fclose(f) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  return 0;
}
