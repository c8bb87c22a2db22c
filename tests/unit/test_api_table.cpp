#include <catch2/catch.hpp>

#include "common/model/event.h"

using namespace torchseal;

TEST_CASE("every API name round-trips through api_from_name", "[api]") {
  for (uint16_t i = 0; i < static_cast<uint16_t>(ApiId::Count); ++i) {
    ApiId id = static_cast<ApiId>(i);
    INFO(api_name(id));
    CHECK(api_from_name(api_name(id)) == id);
  }
  CHECK(api_from_name("cudaMalloc") == ApiId::cudaMalloc);
  CHECK(api_from_name("cuMemCreate") == ApiId::cuMemCreate);
  CHECK(api_from_name("malloc") == ApiId::Unknown);
  CHECK(api_from_name("") == ApiId::Unknown);
  CHECK(api_name(ApiId::Unknown) == "unknown");
}

TEST_CASE("families use the report spelling and round-trip", "[api]") {
  CHECK(family_name(Family::Device) == "device");
  CHECK(family_name(Family::StreamOrdered) == "stream-ordered");
  CHECK(family_name(Family::Managed) == "managed");
  CHECK(family_name(Family::HostPinned) == "host-pinned");
  CHECK(family_name(Family::Vmm) == "vmm");
  CHECK(family_name(Family::HostRegistered) == "host-registered");
  for (Family f : {Family::Device, Family::StreamOrdered, Family::Managed, Family::HostPinned,
                   Family::Vmm, Family::HostRegistered}) {
    Family out = Family::None;
    REQUIRE(family_from_name(family_name(f), out));
    CHECK(out == f);
  }
  Family out = Family::Device;
  CHECK_FALSE(family_from_name("pinned", out));
  CHECK_FALSE(family_from_name("none", out));
  CHECK(out == Family::Device);
}

TEST_CASE("table entries carry the documented family and role", "[api]") {
  CHECK(api_info(ApiId::cudaMallocAsync).family == Family::StreamOrdered);
  CHECK(api_info(ApiId::cudaHostAlloc).family == Family::HostPinned);
  CHECK(api_info(ApiId::cuMemRelease).role == Role::Release);
  CHECK(api_info(ApiId::cudaHostRegister).family == Family::HostRegistered);
  CHECK(api_info(ApiId::cuMemHostUnregister).role == Role::Free);
  CHECK(api_info(ApiId::cudaDeviceReset).role == Role::Teardown);
}
