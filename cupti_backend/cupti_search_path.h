// Where libcupti may live, in the order it is tried. Kept apart from the
// loader so the list can be reasoned about (and printed at debug level)
// without opening anything.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace torchseal::cupti {

// Offers candidate names/paths for dlopen to `try_one`, best first, without
// duplicates, until it returns true (found). Lazy: the directory scans of
// the later stages happen only if the earlier candidates all failed, so the
// common case (libcupti on the loader's path) costs no file-system walk.
//   1. `explicit_path` (TORCHSEAL_CUPTI_PATH) when non-empty;
//   2. bare sonames, for the loader's own search (LD_LIBRARY_PATH, rpath,
//      ld.so.cache): libcupti.so.13, libcupti.so;
//   3. the CUDA toolkit: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, each with
//      lib64/ and extras/CUPTI/lib64/ (only files that exist);
//   4. pip wheels (nvidia-cuda-cupti, nvidia/cu13): <site-packages>/nvidia/*/lib
//      for the site-packages directories derivable without running Python
//      (see python_site_dirs). Only files that exist.
// Returns true if `try_one` accepted a candidate.
bool for_each_cupti_candidate(const std::string &explicit_path,
                              const std::function<bool(const std::string &)> &try_one);

// site-packages directories of the Python (if any) in this process or
// environment, derived cheaply: $VIRTUAL_ENV, $CONDA_PREFIX, loaded objects
// whose path contains "/site-packages/" (dl_iterate_phdr), a loaded
// libpythonX.Y and the executable when it is pythonX.Y. Bounded in count.
std::vector<std::string> python_site_dirs();

}  // namespace torchseal::cupti
