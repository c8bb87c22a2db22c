#include "common/model/event.h"

namespace torchseal {

ApiId api_from_name(std::string_view name) {
  for (uint16_t i = 0; i < static_cast<uint16_t>(ApiId::Count); ++i) {
    if (kApiTable[i].name == name) return static_cast<ApiId>(i);
  }
  return ApiId::Unknown;
}

std::string_view family_name(Family f) {
  switch (f) {
    case Family::Device:
      return "device";
    case Family::StreamOrdered:
      return "stream-ordered";
    case Family::Managed:
      return "managed";
    case Family::HostPinned:
      return "host-pinned";
    case Family::Vmm:
      return "vmm";
    case Family::HostRegistered:
      return "host-registered";
    case Family::Graph:
      return "graph";
    case Family::None:
      break;
  }
  return "none";
}

bool family_from_name(std::string_view s, Family &out) {
  for (Family f : {Family::Device, Family::StreamOrdered, Family::Managed, Family::HostPinned,
                   Family::Vmm, Family::HostRegistered, Family::Graph}) {
    if (family_name(f) == s) {
      out = f;
      return true;
    }
  }
  return false;
}

std::string_view dump_trigger_name(uint64_t code) {
  switch (code) {
    case static_cast<uint64_t>(DumpTrigger::Signal):
      return "signal";
    case static_cast<uint64_t>(DumpTrigger::Api):
      return "api";
    case static_cast<uint64_t>(DumpTrigger::Oom):
      return "oom";
    case static_cast<uint64_t>(DumpTrigger::Stop):
      return "stop";
    default:
      return "unknown";
  }
}

bool dump_trigger_from_name(std::string_view name, DumpTrigger &out) {
  for (DumpTrigger t :
       {DumpTrigger::Signal, DumpTrigger::Api, DumpTrigger::Oom, DumpTrigger::Stop}) {
    if (dump_trigger_name(static_cast<uint64_t>(t)) == name) {
      out = t;
      return true;
    }
  }
  return false;
}

}  // namespace torchseal
