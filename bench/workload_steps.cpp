// bench_workload steps: a seeded multi-threaded training-loop workload whose
// verdicts are known in advance (the long-run benchmark, scripts/bench
// --longrun, and tests/history/capped_exact.py).
//
//   bench_workload steps EVENTS --seed S [--threads T] [--sites K] [--steps N]
//                  [--hold H] [--ooms O] [--ledger FILE] [--pause-after P]
//
// T threads share ~EVENTS allocation events over N steps. Each thread churns
// a pool of allocations from K call paths (bench/workload_paths.h), random
// sizes, as many allocations as frees on average. A step ends at a barrier
// whose completion calls torchseal_step() while every thread waits, so the
// live set at each step boundary depends only on the seed, not on the
// interleaving. Planted on top, each from its own named function (so a
// report names it in frames[0]):
//   planted_leak_J     leaks allocations that stay live at exit: J = 0, 1
//                      one every step (a leak that is also growth), J = 2, 3
//                      a few during the warm-up only (a leak, no growth);
//   planted_growth_J   one allocation more every step after a warm-up,
//                      all freed after the last step (growth, no leak);
//   planted_plateau_0  grows during the first 40% of the steps, then holds,
//                      freed after the last step (flagged neither way).
//   planted_hold       --hold H: H small allocations made in step 1 and held
//                      to the end, then freed (a large live set, no verdict);
//   planted_oom        --ooms O: O requests no device can satisfy, spread over
//                      the steps after the warm-up (OOMs the program survives;
//                      each is an event).
// One early step boundary (a quarter in) is followed by a spike larger than
// everything else ever live, so the run's peak is the live set at that
// boundary plus the spike: exact too. Three torchseal_mark() calls, with a
// pause around each, give time windows with clean edges.
//
// --pause-after P: at the end of step P the ledger so far is written, "paused"
// printed, and the process waits to be killed (a crash test's fixed point).
//
// --ledger FILE writes what the run did, as JSON: events (in all and per
// step), the leaks per planted function (bytes, allocations), the sites a
// growth verdict must flag, the plateau, the peak, the marks. The same seed
// and options give the same ledger. torchseal_step/torchseal_mark are looked up with
// dlsym, so the program also runs without the shim.
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "torchseal.h"  // the types only: the functions are found with dlsym
#include "workload_paths.h"

// The planted sites: plain C names, so reports and the ledger agree on them.
#define PLANTED_SITE(name)                                             \
  extern "C" __attribute__((noinline)) void name(bench::AllocReq *r) { \
    if (cudaMalloc(&r->ptr, r->size) != cudaSuccess) r->ptr = nullptr; \
    asm volatile("" ::: "memory");                                     \
  }
PLANTED_SITE(planted_leak_0)
PLANTED_SITE(planted_leak_1)
PLANTED_SITE(planted_leak_2)
PLANTED_SITE(planted_leak_3)
PLANTED_SITE(planted_growth_0)
PLANTED_SITE(planted_growth_1)
PLANTED_SITE(planted_growth_2)
PLANTED_SITE(planted_plateau_0)
PLANTED_SITE(planted_spike)
PLANTED_SITE(planted_hold)
PLANTED_SITE(planted_oom)
#undef PLANTED_SITE

namespace {

using bench::AllocReq;
using Site = void (*)(AllocReq *);

struct Planted {
  const char *name;
  Site fn;
};
constexpr Planted kLeaks[] = {{"planted_leak_0", planted_leak_0},
                              {"planted_leak_1", planted_leak_1},
                              {"planted_leak_2", planted_leak_2},
                              {"planted_leak_3", planted_leak_3}};
constexpr Planted kGrowth[] = {{"planted_growth_0", planted_growth_0},
                               {"planted_growth_1", planted_growth_1},
                               {"planted_growth_2", planted_growth_2}};
constexpr Planted kPlateau = {"planted_plateau_0", planted_plateau_0};
constexpr int kNumLeaks = sizeof kLeaks / sizeof kLeaks[0];
constexpr int kNumSteadyLeaks = 2;  // the first ones
constexpr int kNumGrowth = sizeof kGrowth / sizeof kGrowth[0];
// torchseal_mark() labels, after the warm-up and near the end: the window
// between the last two is short and in the part of a run a cap keeps in
// detail.
constexpr const char *kMarkLabels[] = {"warm-up done", "4 steps to go", "2 steps to go"};
constexpr int kNumMarks = sizeof kMarkLabels / sizeof kMarkLabels[0];

// Churn sizes and pool bounds: a thread's pool never holds more than
// kPoolMax * kChurnMax bytes, which bounds the spike the peak needs.
constexpr double kChurnMin = 512, kChurnMax = 256 * 1024;
constexpr size_t kPoolLow = 16, kPoolMax = 128;
// The most one planted allocation takes.
constexpr double kPlantedMax = 64 * 1024;
// --hold sizes, and an OOM's request (more than any device has).
constexpr double kHoldMin = 256, kHoldMax = 4096;
constexpr size_t kOomRequest = size_t{1} << 52;

struct Options {
  uint64_t events = 0;
  uint64_t seed = 0;
  int threads = 4;
  int sites = 500;
  uint64_t steps = 100;
  uint64_t hold = 0, ooms = 0, pause_after = 0;
  const char *ledger = nullptr;
};

struct Live {
  void *ptr;
  size_t size;
};

struct Worker {
  bench::Rng rng{1};
  std::vector<Live> pool, planted_live;  // planted_live: growth, plateau, hold
  uint64_t live_bytes = 0;
  uint64_t events = 0;
  bool failed = false;
  std::vector<uint64_t> leak_bytes = std::vector<uint64_t>(kNumLeaks);
  std::vector<uint64_t> leak_allocs = std::vector<uint64_t>(kNumLeaks);
};

struct Run {
  Options opt;
  std::vector<Worker> workers;
  uint64_t per_thread_step_events = 0;
  uint64_t warmup = 0, plateau_end = 0, spike_step = 0;
  uint64_t mark_steps[3] = {0, 0, 0};
  size_t spike_bytes = 0;
  uint64_t peak_bytes = 0;
  uint64_t events_before = 0;             // events before the step now running
  std::vector<uint64_t> events_per_step;  // step k's events at index k - 1
  double last_step_unix_s = 0;            // when the last step ended (for scripts/bench)
  void (*step_fn)() = nullptr;
  void (*mark_fn)(const char *) = nullptr;
};

bool alloc(Worker &w, Site fn, size_t size, std::vector<Live> &into) {
  AllocReq r{size, nullptr};
  fn(&r);
  ++w.events;
  if (!r.ptr) {
    w.failed = true;
    return false;
  }
  into.push_back({r.ptr, size});
  w.live_bytes += size;
  return true;
}

void release(Worker &w, const Live &l) {
  cudaFree(l.ptr);
  ++w.events;
  w.live_bytes -= l.size;
}

// One thread's share of step `step` (1-based).
void step_work(Run &run, int t, uint64_t step) {
  Worker &w = run.workers[t];
  // Planted sites belong to one thread each, chosen by index.
  for (int j = 0; j < kNumLeaks; ++j) {
    if (j % run.opt.threads != t) continue;
    // A steady leak leaks every step (so it is growth too); an early one
    // leaks at step 1 and at half the other warm-up steps, then no more, so
    // its live bytes are flat where the growth fit looks.
    bool steady = j < kNumSteadyLeaks;
    if (steady || step == 1 || (step <= run.warmup && w.rng.uniform() < 0.5)) {
      std::vector<Live> kept;
      size_t size = bench::draw_size(w.rng, 512, kPlantedMax);
      if (alloc(w, kLeaks[j].fn, size, kept)) {
        w.leak_bytes[j] += size;
        w.leak_allocs[j] += 1;
      }
    }
  }
  for (int g = 0; g < kNumGrowth; ++g) {
    if ((kNumLeaks + g) % run.opt.threads != t || step <= run.warmup) continue;
    alloc(w, kGrowth[g].fn, bench::draw_size(w.rng, 4096, kPlantedMax), w.planted_live);
  }
  if ((kNumLeaks + kNumGrowth) % run.opt.threads == t && step <= run.plateau_end)
    alloc(w, kPlateau.fn, bench::draw_size(w.rng, 4096, kPlantedMax), w.planted_live);
  if (step == 1) {
    // Each thread its share of the held set.
    uint64_t n = run.opt.hold / run.opt.threads + (uint64_t(t) < run.opt.hold % run.opt.threads);
    for (uint64_t i = 0; i < n; ++i)
      alloc(w, planted_hold, bench::draw_size(w.rng, kHoldMin, kHoldMax), w.planted_live);
  }
  // OOMs on thread 0, one in each of O evenly spaced steps after the warm-up.
  if (t == 0 && run.opt.ooms && step > run.warmup) {
    uint64_t span = run.opt.steps - run.warmup, k = step - run.warmup - 1;
    if (k * run.opt.ooms / span != (k + 1) * run.opt.ooms / span) {
      AllocReq r{kOomRequest, nullptr};
      planted_oom(&r);
      ++w.events;
      if (r.ptr) {
        cudaFree(r.ptr);  // a device that big: the run is not what the ledger says
        w.failed = true;
      }
      (void)cudaGetLastError();
    }
  }

  // The churn: balanced around a pool of kPoolLow..kPoolMax allocations.
  for (uint64_t i = 0; i < run.per_thread_step_events && !w.failed; ++i) {
    double p_alloc = w.pool.empty()              ? 1
                     : w.pool.size() < kPoolLow  ? 0.7
                     : w.pool.size() >= kPoolMax ? 0
                                                 : 0.5;
    if (w.rng.uniform() < p_alloc) {
      int site = static_cast<int>(w.rng.next() % run.opt.sites);
      AllocReq r{bench::draw_size(w.rng, kChurnMin, kChurnMax), nullptr};
      bench::alloc_at_site(site, &r);
      ++w.events;
      if (!r.ptr) {
        w.failed = true;
        break;
      }
      w.pool.push_back({r.ptr, r.size});
      w.live_bytes += r.size;
    } else {
      size_t k = w.rng.next() % w.pool.size();
      std::swap(w.pool[k], w.pool.back());
      release(w, w.pool.back());
      w.pool.pop_back();
    }
  }
}

double unix_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return double(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

void pause_ms(long ms) {
  timespec ts{0, ms * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {}
}

std::string ledger_json(const Run &run);
bool write_ledger(const Run &run);

// Runs on one thread while all the others wait at the step's barrier.
void step_boundary(Run &run, uint64_t step) {
  uint64_t events = 0, live = 0;
  for (const Worker &w : run.workers) {
    events += w.events;
    live += w.live_bytes;
  }
  run.events_per_step.push_back(events - run.events_before);
  if (run.step_fn) run.step_fn();
  if (step == run.opt.steps) run.last_step_unix_s = unix_now();
  for (int m = 0; m < kNumMarks; ++m) {
    if (step != run.mark_steps[m]) continue;
    // The pauses keep every event well clear of the mark's time, so a
    // window that starts or ends at a mark cuts between steps.
    pause_ms(20);
    if (run.mark_fn) run.mark_fn(kMarkLabels[m]);
    pause_ms(20);
  }
  if (step == run.spike_step) {
    Worker &w = run.workers[0];
    std::vector<Live> spike;
    if (alloc(w, planted_spike, run.spike_bytes, spike)) release(w, spike[0]);
    run.peak_bytes = live + run.spike_bytes;
  }
  events = 0;
  for (const Worker &w : run.workers) events += w.events;
  run.events_before = events;
  if (step == run.opt.pause_after) {
    if (!write_ledger(run)) std::exit(1);
    std::printf("paused\n");
    std::fflush(stdout);
    for (;;) pause_ms(1000);
  }
}

void finish(Worker &w) {
  for (const Live &l : w.pool) release(w, l);
  for (const Live &l : w.planted_live) release(w, l);
  w.pool.clear();
  w.planted_live.clear();
}

struct Boundary {
  Run *run;
  uint64_t step = 0;
  void operator()() noexcept { step_boundary(*run, ++step); }
};
using StepBarrier = std::barrier<Boundary>;

struct ThreadArg {
  Run *run;
  StepBarrier *sync;
  int t;
};

// Plain pthreads, not std::thread: libstdc++'s thread trampoline has no
// symbols, and an unsymbolized frame keeps its ASLR address in the site, so
// two runs' sites would not match (torchseal diff, merge).
void *thread_main(void *p) {
  auto *a = static_cast<ThreadArg *>(p);
  for (uint64_t s = 1; s <= a->run->opt.steps; ++s) {
    step_work(*a->run, a->t, s);
    a->sync->arrive_and_wait();
  }
  finish(a->run->workers[a->t]);
  return nullptr;
}

bool parse(int argc, char **argv, Options &o) {
  if (argc < 3) return false;
  char *end = nullptr;
  o.events = std::strtoull(argv[2], &end, 10);
  if (*end || o.events == 0) return false;
  bool have_seed = false;
  for (int i = 3; i < argc; i += 2) {
    if (i + 1 >= argc) return false;
    const char *k = argv[i], *v = argv[i + 1];
    if (!std::strcmp(k, "--ledger")) {
      o.ledger = v;
      continue;
    }
    unsigned long long n = std::strtoull(v, &end, 10);
    if (*end || !*v) return false;
    if (!std::strcmp(k, "--seed")) {
      o.seed = n;
      have_seed = true;
    } else if (!std::strcmp(k, "--threads")) {
      o.threads = static_cast<int>(n);
    } else if (!std::strcmp(k, "--sites")) {
      o.sites = static_cast<int>(n);
    } else if (!std::strcmp(k, "--steps")) {
      o.steps = n;
    } else if (!std::strcmp(k, "--hold")) {
      o.hold = n;
    } else if (!std::strcmp(k, "--ooms")) {
      o.ooms = n;
    } else if (!std::strcmp(k, "--pause-after")) {
      o.pause_after = n;
    } else {
      return false;
    }
  }
  return have_seed && o.threads >= 1 && o.threads <= 64 && o.sites >= 1 &&
         o.sites <= bench::kPaths * bench::kDepths && o.steps >= 20 && o.steps <= 4096 &&
         o.hold <= 10000000 && o.ooms <= o.steps - o.steps / 10;
}

std::string json_str(const char *s) { return std::string("\"") + s + "\""; }

std::string ledger_json(const Run &run) {
  const Options &o = run.opt;
  uint64_t events = 0;
  for (const Worker &w : run.workers) events += w.events;
  uint64_t in_steps = 0;
  for (uint64_t e : run.events_per_step) in_steps += e;
  std::string s =
      "{\"seed\":" + std::to_string(o.seed) + ",\"threads\":" + std::to_string(o.threads) +
      ",\"sites\":" + std::to_string(o.sites) + ",\"steps\":" + std::to_string(o.steps) +
      ",\"events\":" + std::to_string(events) +
      ",\"events_after_last_step\":" + std::to_string(events - in_steps) +
      ",\"peak_bytes\":" + std::to_string(run.peak_bytes) + ",\"hold\":" + std::to_string(o.hold) +
      ",\"ooms\":" + std::to_string(o.ooms) + ",\"leaks\":{";
  for (int j = 0; j < kNumLeaks; ++j) {
    uint64_t bytes = 0, allocs = 0;
    for (const Worker &w : run.workers) {
      bytes += w.leak_bytes[j];
      allocs += w.leak_allocs[j];
    }
    s += (j ? "," : "") + json_str(kLeaks[j].name) + ":{\"bytes\":" + std::to_string(bytes) +
         ",\"allocations\":" + std::to_string(allocs) + "}";
  }
  // Growth verdicts: the growing sites and the steady leaks.
  s += "},\"growth\":[";
  for (int g = 0; g < kNumGrowth; ++g) s += (g ? "," : "") + json_str(kGrowth[g].name);
  for (int j = 0; j < kNumSteadyLeaks; ++j) s += "," + json_str(kLeaks[j].name);
  s += "],\"growth_from_step\":" + std::to_string(run.warmup + 1) + ",\"plateau\":[" +
       json_str(kPlateau.name) + "],\"plateau_until_step\":" + std::to_string(run.plateau_end) +
       ",\"spike\":{\"function\":\"planted_spike\",\"bytes\":" + std::to_string(run.spike_bytes) +
       ",\"after_step\":" + std::to_string(run.spike_step) + "},\"marks\":[";
  for (int m = 0; m < kNumMarks; ++m)
    s += std::string(m ? "," : "") + "{\"label\":" + json_str(kMarkLabels[m]) +
         ",\"after_step\":" + std::to_string(run.mark_steps[m]) + "}";
  s += "],\"events_per_step\":[";
  for (size_t i = 0; i < run.events_per_step.size(); ++i)
    s += (i ? "," : "") + std::to_string(run.events_per_step[i]);
  return s + "]}\n";
}

bool write_ledger(const Run &run) {
  if (!run.opt.ledger) return true;
  std::string ledger = ledger_json(run);
  FILE *f = std::fopen(run.opt.ledger, "w");
  if (!f || std::fputs(ledger.c_str(), f) < 0 || std::fclose(f) != 0) {
    std::fprintf(stderr, "bench_workload: cannot write the ledger %s\n", run.opt.ledger);
    return false;
  }
  return true;
}

}  // namespace

int steps_main(int argc, char **argv) {
  Run run;
  if (!parse(argc, argv, run.opt)) {
    std::fprintf(stderr,
                 "usage: bench_workload steps EVENTS --seed S [--threads 1..64] "
                 "[--sites 1..%d] [--steps 20..4096] [--hold H] [--ooms O (at most 90%% of "
                 "the steps)] [--ledger FILE] [--pause-after STEP]\n",
                 bench::kPaths * bench::kDepths);
    return 2;
  }
  const Options &o = run.opt;
  run.per_thread_step_events = o.events / (o.steps * o.threads);
  if (run.per_thread_step_events == 0) run.per_thread_step_events = 1;
  run.warmup = o.steps / 10;
  run.plateau_end = o.steps * 2 / 5;
  run.spike_step = o.steps / 4;
  run.mark_steps[0] = run.warmup;
  run.mark_steps[1] = o.steps - 4;
  run.mark_steps[2] = o.steps - 2;
  // Larger than all churn pools at their fullest plus every planted
  // allocation the run can make (one per planted site and step at most), so
  // nothing else in the run reaches the spike's total. It comes early, so a
  // capped history has to keep the peak through the segments it drops.
  size_t planted_max =
      (kNumLeaks + kNumGrowth + 1) * o.steps * size_t(kPlantedMax) + o.hold * size_t(kHoldMax);
  run.spike_bytes = size_t(o.threads) * kPoolMax * size_t(kChurnMax) + planted_max + (64 << 20);
  run.step_fn = reinterpret_cast<decltype(&torchseal_step)>(dlsym(RTLD_DEFAULT, "torchseal_step"));
  run.mark_fn = reinterpret_cast<decltype(&torchseal_mark)>(dlsym(RTLD_DEFAULT, "torchseal_mark"));
  run.workers.resize(o.threads);
  for (int t = 0; t < o.threads; ++t) run.workers[t].rng = bench::Rng(o.seed * 1000003 + t + 1);

  StepBarrier sync(o.threads, Boundary{&run});
  std::vector<ThreadArg> args(o.threads);
  std::vector<pthread_t> threads(o.threads);
  for (int t = 0; t < o.threads; ++t) {
    args[t] = {&run, &sync, t};
    if (pthread_create(&threads[t], nullptr, thread_main, &args[t]) != 0) {
      std::fprintf(stderr, "bench_workload: cannot start thread %d\n", t);
      return 1;
    }
  }
  for (pthread_t th : threads) pthread_join(th, nullptr);
  double drained = unix_now();  // everything but the leaks freed

  bool failed = false;
  for (const Worker &w : run.workers) failed |= w.failed;
  if (failed) {
    std::fprintf(stderr, "bench_workload: a cudaMalloc failed\n");
    return 1;
  }
  if (!write_ledger(run)) return 1;
  uint64_t events = 0;
  for (const Worker &w : run.workers) events += w.events;
  std::printf(
      "{\"mode\":\"steps\",\"events\":%llu,\"steps\":%llu,\"threads\":%d,\"sites\":%d,"
      "\"last_step_unix_s\":%.6f,\"drained_unix_s\":%.6f}\n",
      (unsigned long long)events, (unsigned long long)o.steps, o.threads, o.sites,
      run.last_step_unix_s, drained);
  std::fflush(stdout);
  return 0;
}
