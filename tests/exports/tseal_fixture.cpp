// tseal_fixture: writes a synthetic .tseal history with the same chunk layout
// as shim/sink/pass_writer.cpp (Process first; then per writer pass a PASS chunk,
// new Stacks, and one Events chunk per thread; Symbols and End at a clean
// exit), so the exporters can be tested without the shim or a GPU.
//
//   tseal_fixture OUT.tseal [--events N] [--seed S] [--expect OUT.json]
//                           [--no-symbols] [--truncate]
//
// The history mixes device, stream-ordered, managed, host-pinned and VMM
// allocations on two devices from three threads, with address reuse, OOMs,
// invalid frees, VMM map/unmap, steps, marks and a device-1 reset. --expect
// writes the ground truth a correct memory-viz export must match (what is
// live at the end per device, and how many shown allocations and OOMs there
// were), computed here independently of the exporter.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/format/records.h"
#include "common/format/tseal_format.h"
#include "common/model/event.h"

using namespace torchseal;
namespace ts = torchseal::tseal;

namespace {

constexpr uint64_t kT0 = 1'000'000'000'000ull;   // first event: 1000 s of CLOCK_MONOTONIC
constexpr double kClockBase = 1'700'000'000.0;   // unix seconds at CLOCK_MONOTONIC zero
constexpr double kStartUnix = kClockBase + 999.5;  // process started 0.5 s before kT0
constexpr int kStacks = 40;
constexpr int kPyStacks = 5;
constexpr int kEventsPerPass = 4096;
const uint32_t kTids[3] = {4242, 4243, 4244};

struct Live {
  uint64_t size;
  Family family;
  int16_t device;
  ApiId free_api;
  bool mapped = false;  // VMM: a mapping holds it (unmapped before its release)
};

// IP of frame k of stack s. Frames 0-1 are torchseal / libcudart internals,
// frame 2 the CUDA API, then user code: trim_frames must drop the first three.
uint64_t ip_of(int s, int k) { return 0x400000ull + static_cast<uint64_t>(s) * 0x1000 + k * 0x10; }
int depth_of(int s) { return 6 + s % 5; }

struct Writer {
  std::vector<uint8_t> out;
  std::FILE *f;
  explicit Writer(std::FILE *file) : f(file) {}
  template <typename Record>
  void record(ts::Chunk type, const Record &rec) {
    ts::append_record(out, type, rec);
    if (out.size() > (1u << 20)) flush();
  }
  void events(uint32_t tid, const std::vector<Event> &ev) {
    ts::append_events_chunk(out, tid, ev);
    if (out.size() > (1u << 20)) flush();
  }
  void flush() {
    if (!out.empty() && std::fwrite(out.data(), 1, out.size(), f) != out.size()) {
      std::perror("tseal_fixture: write");
      std::exit(1);
    }
    out.clear();
  }
};

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tseal_fixture OUT.tseal [--events N] [--seed S] [--expect J] "
                         "[--no-symbols] [--truncate]\n");
    return 2;
  }
  std::string out_path = argv[1], expect_path;
  uint64_t n_events = 2000, seed = 1;
  bool symbols = true, truncate = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--events" && i + 1 < argc) n_events = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--expect" && i + 1 < argc) expect_path = argv[++i];
    else if (a == "--no-symbols") symbols = false;
    else if (a == "--truncate") truncate = true;
    else {
      std::fprintf(stderr, "tseal_fixture: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::FILE *f = std::fopen(out_path.c_str(), "wb");
  if (!f) {
    std::perror(out_path.c_str());
    return 1;
  }
  Writer w(f);
  ts::append_file_header(w.out);
  {
    ts::ProcessRecord p;
    p.info.pid = 4242;
    p.info.hostname = "fixture-host";
    p.info.start_time = kStartUnix;
    p.info.argv = {"/app/train", "--bad-utf8-\xff\xfe"};  // exporters must sanitize
    p.clock_base = kClockBase;
    w.record(ts::Chunk::Process, p);
  }

  std::mt19937_64 rng(seed);
  auto uni = [&](uint64_t n) { return n ? rng() % n : 0; };

  std::map<uint64_t, Live> ptrs, vmm;  // by address / VMM handle
  uint64_t next_addr[2] = {0x7f0000000000ull, 0x7f4000000000ull};
  uint64_t next_managed = 0x7e0000000000ull, next_host = 0x500000000000ull, next_handle = 1;
  uint64_t t = kT0;
  uint64_t step = 0;
  bool reset_done = false;
  // Ground truth for --expect.
  uint64_t shown_allocs[2] = {0, 0}, ooms[2] = {0, 0};
  std::vector<uint64_t> free_list[2];  // freed device addresses, reused later

  int stacks_written = 0;
  uint64_t made = 0;
  while (made < n_events) {
    // One writer pass: the PASS chunk, new stacks, then one chunk per thread.
    w.record(ts::Chunk::Pass, ts::PassRecord{t});
    if (stacks_written < kStacks) {
      ts::StacksRecord st;
      for (int s = 1; s <= kStacks; ++s) {
        std::vector<uint64_t> ips;
        for (int k = 0; k < depth_of(s); ++k) ips.push_back(ip_of(s, k));
        st.stacks.emplace_back(static_cast<StackId>(s), std::move(ips));
      }
      w.record(ts::Chunk::Stacks, st);
      stacks_written = kStacks;
      // Python stacks 1..kPyStacks (layout of pass_writer.cpp's
      // append_new_python_stacks): interned strings, then (fn, file, line).
      ts::PyStacksRecord py;
      py.strings = {{1, "train_step"}, {2, "/app/train.py"}, {3, "<module>"}, {4, "Model.forward"}};
      for (int k = 1; k <= kPyStacks; ++k)
        py.stacks.push_back({static_cast<PyStackId>(k),
                             {{4, 2, static_cast<uint32_t>(10 * k)},  // Model.forward, innermost
                              {1, 2, 50},                             // train_step
                              {3, 2, 99}}});                          // <module>
      w.record(ts::Chunk::PyStacks, py);
      // The labels of the marks below (ids 1..3), one not valid UTF-8.
      w.record(ts::Chunk::Labels,
               ts::LabelsRecord{{{1, "epoch start"}, {2, "validation \"<b>\""}, {3, "ckpt-\xff"}}});
    }
    std::vector<Event> per_tid[3];
    uint64_t in_pass = std::min<uint64_t>(kEventsPerPass, n_events - made);
    for (uint64_t i = 0; i < in_pass; ++i, ++made) {
      t += 1000 + uni(20000);  // 1-21 us apart
      Event e{};
      e.time_ns = t;
      e.stack = static_cast<StackId>(1 + uni(kStacks));
      e.pystack = static_cast<PyStackId>(uni(kPyStacks + 1));  // 0 = no Python
      int th = static_cast<int>(uni(3));
      int16_t dev = static_cast<int16_t>(uni(2));
      uint64_t r = uni(1000);
      // Keep a working set: allocate more when little is live.
      bool want_free = !ptrs.empty() && (ptrs.size() > 3000 || uni(100) < 45);
      if (!reset_done && made >= n_events * 2 / 3) {
        // cudaDeviceReset on device 1: its allocations die (shown as freed).
        e.op = Op::Teardown;
        e.api = ApiId::cudaDeviceReset;
        e.device = 1;
        for (auto it = ptrs.begin(); it != ptrs.end();) {
          if (it->second.device == 1) it = ptrs.erase(it);
          else ++it;
        }
        for (auto it = vmm.begin(); it != vmm.end();) {
          if (it->second.device == 1) it = vmm.erase(it);
          else ++it;
        }
        reset_done = true;
      } else if (r < 4) {
        e.op = Op::OomFail;
        e.api = ApiId::cudaMalloc;
        e.family = Family::Device;
        e.device = dev;
        e.size = (8ull << 30) + uni(1 << 20);
        ++ooms[dev];
      } else if (r < 6) {
        e.op = Op::InvalidFree;
        e.api = ApiId::cudaFree;
        e.addr = 0xdead0000ull + uni(1 << 16) * 16;
      } else if (r < 10) {
        e.op = Op::Step;
        e.api = ApiId::Unknown;
        e.size = ++step;
      } else if (r < 11) {
        e.op = Op::Mark;
        e.api = ApiId::Unknown;
        e.size = 1 + uni(3);
      } else if (r < 20) {
        // VMM: create, map, or unmap+release.
        if (!vmm.empty() && uni(2)) {
          auto it = vmm.begin();
          std::advance(it, static_cast<long>(uni(vmm.size())));
          if (it->second.mapped) {
            // Unmapped first: a released handle lives while a mapping holds it.
            e.op = Op::Unmap;
            e.api = ApiId::cuMemUnmap;
            e.addr = 0x600000000000ull + it->first * (32ull << 20);
            e.size = it->second.size;
            per_tid[th].push_back(e);
            t += 500;
            e.time_ns = t;
            e.size = 0;
          }
          e.op = Op::Free;
          e.api = ApiId::cuMemRelease;
          e.addr = it->first;
          vmm.erase(it);
        } else {
          e.op = Op::Alloc;
          e.api = ApiId::cuMemCreate;
          e.family = Family::Vmm;
          e.device = dev;
          e.addr = next_handle++;
          e.size = (2ull << 20) * (1 + uni(8));
          vmm[e.addr] = {e.size, Family::Vmm, dev, ApiId::cuMemRelease};
          ++shown_allocs[dev];
          if (uni(2)) {
            // A map right after it (timeline only).
            vmm[e.addr].mapped = true;
            per_tid[th].push_back(e);
            e.op = Op::Map;
            e.api = ApiId::cuMemMap;
            e.stream = e.addr;  // the handle
            e.addr = 0x600000000000ull + e.stream * (32ull << 20);
            t += 500;
            e.time_ns = t;
          }
        }
      } else if (want_free) {
        auto it = ptrs.begin();
        std::advance(it, static_cast<long>(uni(std::min<size_t>(ptrs.size(), 64))));
        e.op = Op::Free;
        e.api = it->second.free_api;
        e.addr = it->first;
        if (it->second.family == Family::Device)
          free_list[it->second.device].push_back(it->first);
        ptrs.erase(it);
      } else {
        e.op = Op::Alloc;
        e.device = dev;
        uint64_t kind = uni(10);
        e.size = 256 * (1 + uni(kind < 2 ? 65536 : 64));  // some >= 1 MiB for slices
        ApiId free_api = ApiId::cudaFree;
        if (kind < 5) {
          e.api = ApiId::cudaMalloc;
          e.family = Family::Device;
        } else if (kind < 7) {
          e.api = ApiId::cudaMallocAsync;
          e.family = Family::StreamOrdered;
          e.stream = 0x5000 + uni(4) * 0x100;
          free_api = ApiId::cudaFreeAsync;
        } else if (kind < 8) {
          e.api = ApiId::cudaMallocManaged;
          e.family = Family::Managed;
          e.device = uni(4) == 0 ? -1 : dev;  // unknown device: shown on device 0
          e.addr = next_managed;
          next_managed += (e.size + 4095) / 4096 * 4096 + 4096;
        } else {
          e.api = ApiId::cudaMallocHost;
          e.family = Family::HostPinned;
          e.device = -1;
          e.addr = next_host;
          next_host += (e.size + 4095) / 4096 * 4096 + 4096;
          free_api = ApiId::cudaFreeHost;
        }
        if (!e.addr) {
          int d = dev;
          // Reuse freed addresses (as a real allocator does) once there are some.
          if (!free_list[d].empty() && uni(2)) {
            e.addr = free_list[d].back();
            free_list[d].pop_back();
            if (ptrs.count(e.addr)) e.addr = 0;
          }
          if (!e.addr) {
            e.addr = next_addr[d];
            // Big enough for any size we generate, so reused addresses never overlap.
            next_addr[d] += 32ull << 20;
          }
        }
        ptrs[e.addr] = {e.size, e.family, e.device, free_api};
        if (e.family != Family::HostPinned) ++shown_allocs[e.device < 0 ? 0 : e.device];
      }
      per_tid[th].push_back(e);
    }
    for (int th = 0; th < 3; ++th) w.events(kTids[th], per_tid[th]);
  }

  if (truncate) {
    // A crash: no symbol table, no End chunk, half a chunk at the tail.
    std::vector<uint8_t> p(100, 0x55);
    std::vector<uint8_t> tail;
    ts::append_chunk(tail, ts::Chunk::Events, p);
    w.out.insert(w.out.end(), tail.begin(), tail.begin() + 40);
  } else {
    if (symbols) {
      ts::SymbolsRecord sym;
      auto add = [&](uint64_t ip, std::vector<NativeFrame> frames) {
        for (auto &fr : frames) fr.address = ip;
        sym.ips.emplace_back(ip, std::move(frames));
      };
      for (int s = 1; s <= kStacks; ++s) {
        for (int k = 0; k < depth_of(s); ++k) {
          uint64_t ip = ip_of(s, k);
          if (k == 0) {
            add(ip, {{"torchseal::hooks::cudaMalloc", "shim/runtime_hooks.cpp", 120,
                      "/usr/lib/torchseal/libtorchseal.so"}});
          } else if (k == 1) {
            add(ip, {{"cudart::mallocInternal", "", 0, "/usr/local/cuda/lib64/libcudart.so.13"}});
          } else if (k == 2) {
            add(ip, {{"cudaMalloc", "", 0, "/usr/local/cuda/lib64/libcudart.so.13"}});
          } else if (k == 3 && s % 3 == 0) {
            // An inlined call: two levels for one IP.
            add(ip, {{"inlined_helper<float>(int)", "/app/src/helpers.h", 10 + s, "/app/train"},
                     {"layer_" + std::to_string(s) + "::forward()", "/app/src/layers.cpp", 100 + s,
                      "/app/train"}});
          } else {
            // Shared outer frames (main, train_loop) so frame dicts repeat.
            std::string fn = k == depth_of(s) - 1 ? "main"
                             : k == depth_of(s) - 2 ? "train_loop(Config const&)"
                                                    : "fn_" + std::to_string(s) + "_" +
                                                          std::to_string(k) + "(\xc3\xa9)";
            add(ip, {{fn, k == depth_of(s) - 1 ? "/app/src/main.cpp" : "/app/src/model.cpp",
                      k * 10 + s, "/app/train"}});
          }
        }
      }
      w.record(ts::Chunk::Symbols, sym);
    }
    w.record(ts::Chunk::End, ts::EndRecord{kClockBase + static_cast<double>(t) / 1e9, made, true, 0});
  }
  w.flush();
  if (std::fclose(f) != 0) {
    std::perror(out_path.c_str());
    return 1;
  }

  if (!expect_path.empty()) {
    // Live at the end per shown device: device/stream-ordered/managed + VMM,
    // not host-pinned; unknown device counts as device 0.
    uint64_t live_n[2] = {0, 0}, live_b[2] = {0, 0};
    for (auto *m : {&ptrs, &vmm})
      for (auto &kv : *m) {
        if (kv.second.family == Family::HostPinned) continue;
        int d = kv.second.device < 0 ? 0 : kv.second.device;
        ++live_n[d];
        live_b[d] += kv.second.size;
      }
    std::FILE *j = std::fopen(expect_path.c_str(), "w");
    if (!j) {
      std::perror(expect_path.c_str());
      return 1;
    }
    std::fprintf(j, "{\"events\": %" PRIu64 ", \"start_unix\": %.6f, \"devices\": [", made,
                 kStartUnix);
    for (int d = 0; d < 2; ++d) {
      std::fprintf(j,
                   "%s{\"live_segments\": %" PRIu64 ", \"live_bytes\": %" PRIu64
                   ", \"allocs\": %" PRIu64 ", \"ooms\": %" PRIu64 "}",
                   d ? ", " : "", live_n[d], live_b[d], shown_allocs[d], ooms[d]);
    }
    std::fprintf(j, "]}\n");
    std::fclose(j);
  }
  return 0;
}
