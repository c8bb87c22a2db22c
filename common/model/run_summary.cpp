#include "common/model/run_summary.h"

#include <utility>

namespace torchseal {

bool push_step_sample(std::vector<StepSample> &v, StepSample &&s) {
  bool halved = v.size() >= kMaxStepSamples;
  if (halved) {
    // v[0] stays where it is: a vector moved onto itself would be emptied.
    size_t j = 1;
    for (size_t i = 2; i < v.size(); i += 2) v[j++] = std::move(v[i]);
    v.resize(j);
  }
  v.push_back(std::move(s));
  return halved;
}

void push_oom(std::vector<OomRecord> &v, OomRecord &&o) {
  if (v.size() >= kMaxOoms) v.erase(v.begin() + kSnapshotFirst);
  v.push_back(std::move(o));
  if (v.size() > kSnapshotFirst + kSnapshotLast)
    std::vector<SiteSample>().swap(v[v.size() - 1 - kSnapshotLast].sites_at_oom);
}

size_t surviving_base_samples(size_t base, uint64_t halvings) {
  for (uint64_t h = 0; h < halvings && base > 1; ++h) base = (base + 1) / 2;
  return base;
}

}  // namespace torchseal
