# Shared helpers for scripts/*. Source it; do not run it.
# shellcheck shell=bash

TS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TS_BUILD="${TORCHSEAL_BUILD_DIR:-$TS_ROOT/build}"

ts_say() {
  if [[ -t 2 ]]; then printf '\033[1m==> %s\033[0m\n' "$*" >&2; else printf '==> %s\n' "$*" >&2; fi
}
ts_err() { printf 'error: %s\n' "$*" >&2; }

# The meson option that points at the CUDA toolkit (declared in
# meson_options.txt: `cudatoolkit_root` today; found by name so a rename
# does not break the scripts).
ts_cuda_option() {
  local name
  name="$(grep -oE "option\('[A-Za-z0-9_-]*cuda[A-Za-z0-9_-]*'" "$TS_ROOT/meson_options.txt" \
          | head -n1 | sed -E "s/option\('(.*)'/\1/")"
  printf '%s\n' "${name:-cuda_root}"
}

# Configure (or reconfigure) and compile $TS_BUILD. meson's configure output
# is shown only when it fails; with TS_QUIET=1 the compiler's output too.
ts_build() {
  local opt; opt="$(ts_cuda_option)"
  local args=() log
  if [[ -n "${CUDA_ROOT:-}" ]]; then args+=("-D${opt}=${CUDA_ROOT}"); fi
  log="$(mktemp)"
  if [[ -f "$TS_BUILD/meson-private/coredata.dat" ]]; then
    ts_say "reconfiguring $TS_BUILD"
    args=(--reconfigure "${args[@]}")
  else
    ts_say "configuring $TS_BUILD"
    # Line tables, not full debug info: the tests need file:line and inlined
    # frames (both in -g1), never locals or types, and the build is ~10%
    # faster (bench/RESULTS.md, "CI time"). Only a fresh directory: a
    # developer's own cpp_args are left alone.
    args+=(-Dcpp_args=-g1 -Dc_args=-g1)
  fi
  if ! meson setup "${args[@]}" "$TS_BUILD" "$TS_ROOT" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    ts_err "meson setup failed"
    return 1
  fi
  ts_say "compiling"
  if [[ "${TS_QUIET:-0}" == 1 ]]; then
    # Quiet: show the compiler's output only if something failed.
    if ! meson compile -C "$TS_BUILD" >"$log" 2>&1; then
      tail -n 60 "$log" >&2; rm -f "$log"
      ts_err "compilation failed"
      return 1
    fi
  elif ! meson compile -C "$TS_BUILD"; then
    rm -f "$log"
    ts_err "compilation failed"
    return 1
  fi
  rm -f "$log"
}
