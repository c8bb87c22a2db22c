#include "shim/runtime/exit_verdict.h"

#include "common/format/records.h"
#include "common/format/tseal_format.h"
#include "common/model/analysis_input.h"
#include "common/util/log.h"
#include "shim/core/recorder.h"
#include "shim/runtime/holder_scan/safe_points.h"

namespace torchseal::history {

void append_verdict(std::vector<uint8_t> &out) {
  // Built as the exit report builds its input, so both see the same OOMs
  // in the same order (holders::fill matches OOMs by position).
  AnalysisInput in;
  recorder().ooms(in.ooms);
  holders::fill(in);
  if (!in.holders.done && in.site_holders.empty() && in.ooms.empty()) return;
  tseal::VerdictRecord rec;
  rec.scan = std::move(in.holders);
  rec.site_holders = std::move(in.site_holders);
  for (OomRecord &o : in.ooms)
    rec.ooms.push_back({o.time_ns, o.tid, o.recovered, std::move(o.holders), std::move(o.roles)});
  rec.roles_now = std::move(in.roles_now);
  rec.roles_peak = std::move(in.roles_peak);
  rec.role_steps = std::move(in.role_steps);
  std::vector<uint8_t> payload;
  tseal::ByteWriter w(payload);
  rec.encode(w);
  // A reader stops at a chunk over the limit, and would lose the End after it.
  if (payload.size() > tseal::kMaxChunkPayload) {
    log::warn(
        "the exit verdict (%zu bytes) is too large for the history file; replays of it "
        "will not show holders",
        payload.size());
    return;
  }
  tseal::append_chunk(out, tseal::Chunk::Verdict, payload);
}

}  // namespace torchseal::history
