#!/bin/sh
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined)
# into build-fuzz/ and runs each for a bounded time.
#
#   tests/fuzz/run.sh [SECONDS_PER_TARGET (default 20)] [TARGET...]
#
# Targets: history_reader, output_template, report_json, suppressions.
# New inputs found are added to tests/fuzz/corpus/<target>/ only when
# FUZZ_MERGE=1; crashes are written to build-fuzz/crash-<target>-*: copy one
# into the corpus once fixed and the meson 'fuzz' suite replays it forever.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${FUZZ_BUILD:-$root/build-fuzz}
secs=${1:-20}
[ $# -gt 0 ] && shift
targets=${*:-"history_reader output_template report_json suppressions"}
cxx=${CLANGXX:-clang++}
cuda_inc=${CUDA_INCLUDE:-/usr/local/cuda/include}
command -v "$cxx" >/dev/null || { echo "run.sh: $cxx not found (apt-get install clang)"; exit 77; }
mkdir -p "$out/obj"

flags="-std=c++20 -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
inc="-I$root -isystem $cuda_inc"

# Small compile lists: each target gets only what it calls.
report_srcs="common/model/event.cpp common/model/vmm_maps.cpp common/model/run_summary.cpp
  common/format/event_codec.cpp common/format/tseal_format.cpp common/format/crc32.cpp common/format/records.cpp
  common/format/checkpoint.cpp common/format/segment_files.cpp common/symbols/module_map.cpp common/symbols/symbolizer.cpp
  common/symbols/elf_symtab.cpp common/symbols/runtime_libs.cpp common/util/read_file.cpp
  common/live/live_set.cpp common/live/run_tally.cpp common/live/checkpoint_state.cpp
  report/input/chunk_reader.cpp report/input/history_reader.cpp report/input/segmented_reader.cpp report/replay/replay.cpp
  report/replay/analysis_replay.cpp
  report/render/report_json.cpp report/analysis/analysis.cpp report/analysis/site.cpp
  report/analysis/growth.cpp report/analysis/hints.cpp report/analysis/holder_hints.cpp
  report/analysis/python_source.cpp report/analysis/shown_frames.cpp
  report/analysis/suppressions.cpp report/analysis/holders.cpp report/render/site_json.cpp
  report/analysis/library_held.cpp report/analysis/graph_growth.cpp
  report/analysis/roles.cpp report/render/roles_json.cpp"
# An object is rebuilt when its source or any of our headers is newer (a
# header change alone must not leave objects of two layouts linked together).
stale() {
  [ ! -f "$2" ] || [ "$1" -nt "$2" ] ||
    [ -n "$(find "$root/common" "$root/report" "$root/shim" -name '*.h' -newer "$2" -print -quit)" ]
}
# Eight sources to an object, as Meson's unity build of report/ does: the
# JSON library's templates are then compiled once a group, not once a file.
objs=""
compile_group() {  # GROUP SOURCE...
  u="$out/obj/report-unity$1.cpp" o="$out/obj/report-unity$1.o"
  shift
  for s in "$@"; do echo "#include \"$root/$s\""; done >"$u.new"
  if cmp -s "$u.new" "$u"; then rm "$u.new"; else mv "$u.new" "$u"; fi
  again=0
  [ "$u" -nt "$o" ] && again=1
  for s in "$@"; do stale "$root/$s" "$o" && again=1; done
  if [ $again = 1 ]; then
    $cxx $flags -fsanitize=fuzzer-no-link -DTORCHSEAL_HAVE_LIBDW=0 $inc -c "$u" -o "$o"
  fi
  objs="$objs $o"
}
group=0 members=""
for s in $report_srcs; do
  members="$members $s"
  if [ "$(echo $members | wc -w)" -eq 8 ]; then
    # shellcheck disable=SC2086
    compile_group $group $members
    group=$((group + 1)) members=""
  fi
done
# shellcheck disable=SC2086
[ -z "$members" ] || compile_group $group $members
shim_objs=""
for s in shim/runtime/output_path.cpp common/settings/config.cpp common/util/log.cpp common/settings/settings.cpp; do
  o="$out/obj/shim_$(echo "$s" | tr / _).o"
  if stale "$root/$s" "$o"; then
    $cxx $flags -fsanitize=fuzzer-no-link $inc -c "$root/$s" -o "$o"
  fi
  shim_objs="$shim_objs $o"
done

status=0
for t in $targets; do
  case $t in
    output_template) link="$shim_objs" ;;
    *) link="$objs" ;;
  esac
  $cxx $flags -fsanitize=fuzzer $inc "$here/fuzz_$t.cpp" $link -ldl -o "$out/fuzz_$t"
  work="$out/corpus-$t"
  mkdir -p "$work"
  echo "== fuzz_$t: ${secs}s"
  log="$out/fuzz_$t.log"
  if ! (cd "$out" && ASAN_OPTIONS=detect_leaks=1 ./"fuzz_$t" -max_total_time="$secs" \
          -timeout=10 -rss_limit_mb=2048 -max_len=262144 -print_final_stats=1 \
          -artifact_prefix="$out/crash-$t-" "$work" "$here/corpus/$t" >"$log" 2>&1); then
    echo "   CRASH or error: see $log"; tail -30 "$log"; status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|^Done" "$log" | sed 's/^/   /' || true
  if [ "${FUZZ_MERGE:-0}" = 1 ]; then
    "$out/fuzz_$t" -merge=1 "$here/corpus/$t" "$work" >/dev/null 2>&1 || true
  fi
done
exit $status
