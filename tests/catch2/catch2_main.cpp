// The Catch2 runner, once for every test binary (tests/catch2/meson.build).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
