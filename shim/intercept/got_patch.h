// Late attachment: when libtorchseal.so is dlopen'ed into a process that
// already loaded (and bound) the CUDA libraries, interposition by symbol
// lookup order no longer applies. The objects already loaded call
// the CUDA runtime and driver through their GOT entries (PLT slots and
// GLOB_DAT data pointers); rewriting those entries to our interposers gives
// the same view LD_PRELOAD gives, for every call made from now on.
//
// Not seen this way: driver entry points a library fetched earlier through
// dlsym or cuGetProcAddress and keeps in its own variables (static cudart,
// PyTorch's expandable segments). CUPTI, tried first, sees those; the host's
// cuptiSubscribe entries are rewritten too, so the slot handover works as
// when preloaded.
#pragma once

#include <cstddef>

namespace torchseal::got {

// Rewrites the CUDA entries of every loaded object but the shim, the
// dynamic linker and libc. Libraries loaded afterwards are patched by the
// writer's next pass (patch_new_objects): calls they make before it are not
// seen. Returns how many entries were rewritten. Idempotent.
size_t patch_loaded_objects();

// Whether the patch was applied (the hooks record, not CUPTI).
bool patched();

// Patches the objects loaded since the last call, when the patch is on: the
// writer thread calls it every pass. dlopen itself is not wrapped, because
// glibc resolves a relative name against its caller's RUNPATH, which a
// wrapper would replace with ours.
void patch_new_objects();

// Puts back every entry the patch rewrote, still holding the value it held
// before (`torchseal attach` detaching): the process calls CUDA as it did
// before the attach. No later object is patched. Returns how many entries
// were restored.
size_t restore_all();

}  // namespace torchseal::got
