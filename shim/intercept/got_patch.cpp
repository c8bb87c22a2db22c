#include "shim/intercept/got_patch.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/util/log.h"
#include "shim/core/loader_walk.h"
#include "shim/intercept/dlsym_hook.h"

namespace torchseal::got {
namespace {

std::mutex g_mutex;
std::atomic<bool> g_patched{false};
std::unordered_set<uintptr_t> *g_done = nullptr;  // load bases already patched
void *g_self = nullptr;                           // our own dlopen handle
uintptr_t g_self_base = 0;

// What each rewritten slot held, to put it back at detach.
struct Saved {
  uintptr_t base;  // the object's load base: it may have been unloaded since
  uintptr_t slot;
  void *original;
  uintptr_t relro_lo, relro_hi;
};
std::vector<Saved> *g_saved = nullptr;  // under g_mutex

bool is_cuda_name(const char *n) {
  if (n[0] != 'c' || n[1] != 'u') return false;
  // The host's CUPTI subscription: the slot handover (subscribe_hook.cpp).
  if (strncmp(n, "cuptiSubscribe", 14) == 0) return true;
  if (n[2] == 'd' && n[3] == 'a') return true;  // runtime: cuda*
  return n[2] >= 'A' && n[2] <= 'Z';            // driver: cu[A-Z]*
}

// Objects whose calls are never the program's CUDA use, or that must not be
// touched while they run (the dynamic linker, libc, the vDSO).
bool skipped_object(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  return strncmp(base, "ld-linux", 8) == 0 || strncmp(base, "libc.so", 7) == 0 ||
         strncmp(base, "linux-vdso", 10) == 0 || strncmp(base, "libtorchseal", 12) == 0;
}

// Our definition of `name`, only if it is one of our interposers (defined in
// the shim itself, not found in a library the shim depends on).
void *our_hook(const char *name) {
  void *p = real_dlsym(g_self, name);
  if (!p) return nullptr;
  Dl_info info;
  if (!dladdr(p, &info) || reinterpret_cast<uintptr_t>(info.dli_fbase) != g_self_base)
    return nullptr;
  return p;
}

struct Dynamic {
  const ElfW(Sym) *symtab = nullptr;
  const char *strtab = nullptr;
  const ElfW(Rela) *jmprel = nullptr;
  size_t jmprel_size = 0;
  const ElfW(Rela) *rela = nullptr;
  size_t rela_size = 0;
  bool rela_plt = true;  // DT_PLTREL == DT_RELA (always on x86-64)
};

Dynamic read_dynamic(const dl_phdr_info *info, const ElfW(Dyn) * dyn) {
  // glibc relocates these entries in place on x86-64; the check keeps an
  // object whose .dynamic is read-only (left unrelocated) right too.
  auto at = [&](ElfW(Addr) p) { return p < info->dlpi_addr ? p + info->dlpi_addr : p; };
  Dynamic d;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    switch (dyn->d_tag) {
      case DT_SYMTAB:
        d.symtab = reinterpret_cast<const ElfW(Sym) *>(at(dyn->d_un.d_ptr));
        break;
      case DT_STRTAB:
        d.strtab = reinterpret_cast<const char *>(at(dyn->d_un.d_ptr));
        break;
      case DT_JMPREL:
        d.jmprel = reinterpret_cast<const ElfW(Rela) *>(at(dyn->d_un.d_ptr));
        break;
      case DT_PLTRELSZ:
        d.jmprel_size = dyn->d_un.d_val;
        break;
      case DT_RELA:
        d.rela = reinterpret_cast<const ElfW(Rela) *>(at(dyn->d_un.d_ptr));
        break;
      case DT_RELASZ:
        d.rela_size = dyn->d_un.d_val;
        break;
      case DT_PLTREL:
        d.rela_plt = dyn->d_un.d_val == DT_RELA;
        break;
      default:
        break;
    }
  }
  return d;
}

// Writes one GOT slot, opening a RELRO page for the store and closing it
// again, so the object keeps its protection.
bool write_slot(uintptr_t slot, void *value, uintptr_t relro_lo, uintptr_t relro_hi) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t lo = slot & ~(page - 1);
  bool relro = slot >= relro_lo && slot < relro_hi;
  if (relro && mprotect(reinterpret_cast<void *>(lo), page, PROT_READ | PROT_WRITE) != 0)
    return false;
  __atomic_store_n(reinterpret_cast<void **>(slot), value, __ATOMIC_RELEASE);
  if (relro) mprotect(reinterpret_cast<void *>(lo), page, PROT_READ);
  return true;
}

size_t patch_relocs(const dl_phdr_info *info, const Dynamic &d, const ElfW(Rela) * r, size_t bytes,
                    uintptr_t relro_lo, uintptr_t relro_hi) {
  size_t n = 0;
  if (!r) return 0;
  for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
    uint32_t type = ELF64_R_TYPE(r[i].r_info);
    if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
    const ElfW(Sym) &sym = d.symtab[ELF64_R_SYM(r[i].r_info)];
    const char *name = d.strtab + sym.st_name;
    // Only references (undefined here): an object's own cuda* definitions
    // (libcudart calling itself) are not calls into the CUDA API.
    if (sym.st_shndx != SHN_UNDEF || !is_cuda_name(name)) continue;
    void *hook = our_hook(name);
    if (!hook) continue;
    uintptr_t slot = info->dlpi_addr + r[i].r_offset;
    void *original = __atomic_load_n(reinterpret_cast<void **>(slot), __ATOMIC_ACQUIRE);
    if (original == hook) continue;
    if (!write_slot(slot, hook, relro_lo, relro_hi)) continue;
    g_saved->push_back({info->dlpi_addr, slot, original, relro_lo, relro_hi});
    ++n;
  }
  return n;
}

int patch_one(dl_phdr_info *info, size_t, void *out) {
  const char *path = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "(main)";
  if (info->dlpi_addr == g_self_base || skipped_object(path)) return 0;
  if (!g_done->insert(info->dlpi_addr).second) return 0;
  const ElfW(Dyn) *dyn = nullptr;
  uintptr_t relro_lo = 0, relro_hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn) *>(info->dlpi_addr + ph.p_vaddr);
    if (ph.p_type == PT_GNU_RELRO) {
      relro_lo = info->dlpi_addr + ph.p_vaddr;
      relro_hi = relro_lo + ph.p_memsz;
    }
  }
  if (!dyn) return 0;
  Dynamic d = read_dynamic(info, dyn);
  if (!d.symtab || !d.strtab || !d.rela_plt) return 0;
  size_t n = patch_relocs(info, d, d.jmprel, d.jmprel_size, relro_lo, relro_hi) +
             patch_relocs(info, d, d.rela, d.rela_size, relro_lo, relro_hi);
  if (n) log::debug("patched %zu CUDA entr%s of %s", n, n == 1 ? "y" : "ies", path);
  *static_cast<size_t *>(out) += n;
  return 0;
}

bool find_self() {
  if (g_self) return true;
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&find_self), &info) || !info.dli_fname) return false;
  g_self_base = reinterpret_cast<uintptr_t>(info.dli_fbase);
  g_self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  return g_self != nullptr;
}

}  // namespace

size_t patch_loaded_objects() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_done) g_done = new std::unordered_set<uintptr_t>();
  if (!g_saved) g_saved = new std::vector<Saved>();
  if (!find_self()) return 0;
  size_t n = 0;
  LoaderWalkGuard walking;
  dl_iterate_phdr(patch_one, &n);
  g_patched.store(true, std::memory_order_release);
  return n;
}

bool patched() { return g_patched.load(std::memory_order_acquire); }

void patch_new_objects() {
  if (!patched()) return;
  static unsigned long long seen = 0;
  unsigned long long adds = 0;
  {
    // Released before patch_loaded_objects takes it again (not recursive).
    LoaderWalkGuard walking;
    dl_iterate_phdr(
        [](dl_phdr_info *info, size_t size, void *out) {
          if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
            *static_cast<unsigned long long *>(out) = info->dlpi_adds;
          return 1;
        },
        &adds);
  }
  if (adds == seen) return;
  seen = adds;
  patch_loaded_objects();
}

size_t restore_all() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_patched.store(false, std::memory_order_release);  // the writer patches nothing more
  if (!g_saved) return 0;
  std::unordered_set<uintptr_t> loaded;
  {
    LoaderWalkGuard walking;
    dl_iterate_phdr(
        [](dl_phdr_info *info, size_t, void *out) {
          static_cast<std::unordered_set<uintptr_t> *>(out)->insert(info->dlpi_addr);
          return 0;
        },
        &loaded);
  }
  size_t n = 0;
  // Only objects still loaded: an unloaded one's slots are gone with it.
  for (const Saved &e : *g_saved)
    if (loaded.count(e.base) && write_slot(e.slot, e.original, e.relro_lo, e.relro_hi)) ++n;
  g_saved->clear();
  g_done->clear();
  return n;
}

}  // namespace torchseal::got
