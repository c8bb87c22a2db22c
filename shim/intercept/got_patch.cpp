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
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/util/fork_safe.h"
#include "common/util/log.h"
#include "shim/core/loader_walk.h"
#include "shim/intercept/dlsym_hook.h"

namespace torchseal::got {
namespace {

std::mutex g_mutex;
// A fork while another thread patches (the writer's pass after a dlopen)
// waits for it: the child patches its own later dlopens with this lock and
// these tables. Registered after the loader walk's handlers (priority 101),
// which a patch takes inside this lock.
__attribute__((constructor(102))) void hold_patch_across_fork() { hold_across_fork<g_mutex>(); }
std::atomic<bool> g_patched{false};
std::unordered_set<uintptr_t> *g_done = nullptr;  // load bases already patched
void *g_self = nullptr;                           // our own dlopen handle
uintptr_t g_self_base = 0;

// What each rewritten slot held, to put it back at detach.
struct Saved {
  uintptr_t base;  // the object's load base: it may have been unloaded since
  void *original;
  void *hook;  // what we wrote: a slot that no longer holds it is not ours to restore
  uintptr_t relro_lo, relro_hi;
};
// The newest patch of each slot, by slot: a library loaded again at the same
// base replaces its entries rather than adding to them (a program that
// reloads a plugin in a loop), and unloaded objects' entries are dropped.
std::unordered_map<uintptr_t, Saved> *g_saved = nullptr;  // under g_mutex

// Visits each saved slot that is still one we patched: its object is
// loaded (an unloaded one's slots are gone with it) and the slot holds our
// hook (another object loaded at the same base has other contents there).
// Inside the loader's walk, where no object can be unloaded under `fn`,
// which must not call into the loader.
template <typename Fn>
void for_each_still_ours(Fn fn) {
  struct Walk {
    std::unordered_map<uintptr_t, std::vector<uintptr_t>> by_base;
    Fn *fn;
  } w{{}, &fn};
  for (const auto &[slot, e] : *g_saved) w.by_base[e.base].push_back(slot);
  LoaderWalkGuard walking;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *p) {
        auto *w = static_cast<Walk *>(p);
        auto it = w->by_base.find(info->dlpi_addr);
        if (it == w->by_base.end()) return 0;
        for (uintptr_t slot : it->second) {
          bool inside = false;
          for (int i = 0; i < info->dlpi_phnum && !inside; ++i) {
            const ElfW(Phdr) &ph = info->dlpi_phdr[i];
            uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
            inside = ph.p_type == PT_LOAD && slot >= lo && slot + sizeof(void *) <= lo + ph.p_memsz;
          }
          const Saved &e = g_saved->at(slot);
          if (inside &&
              __atomic_load_n(reinterpret_cast<void **>(slot), __ATOMIC_ACQUIRE) == e.hook)
            (*w->fn)(slot, e);
        }
        w->by_base.erase(it);  // one object per base
        return 0;
      },
      &w);
}

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
// the shim itself, not found in a library the shim depends on). dlsym and
// dladdr take the loader's lock: never call this inside dl_iterate_phdr,
// whose lock a dlopen on another thread holds the other way round (that
// deadlock hung a notebook importing torch while the writer patched).
void *our_hook(const char *name) {
  void *p = real_dlsym(g_self, name);
  if (!p) return nullptr;
  Dl_info info;
  if (!dladdr(p, &info) || reinterpret_cast<uintptr_t>(info.dli_fbase) != g_self_base)
    return nullptr;
  return p;
}

// CUDA names referenced by the loaded objects -> our hook, or null where the
// shim has none. Filled between loader walks; read inside them. Under g_mutex.
std::unordered_map<std::string, void *> *g_hooks = nullptr;

// glibc 2.35's _dl_find_object knows only objects whose dlopen has finished
// relocating them, and takes no loader lock. dl_iterate_phdr lists an
// object from the moment it is mapped: patched then, a RELRO page closed
// again under the loader's own relocation crashed the program, and a slot
// the loader wrote afterwards lost our hook. Looked up at run time: the
// shim loads into older glibc too, which goes without the check.
using FindObject = int (*)(void *, void *);
FindObject g_find_object = nullptr;

bool fully_loaded(const dl_phdr_info *info) {
  if (!g_find_object) return true;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    alignas(16) unsigned char result[256];  // struct dl_find_object: 96 bytes
    return g_find_object(reinterpret_cast<void *>(info->dlpi_addr + ph.p_vaddr), result) == 0;
  }
  return false;
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
  static constinit Resolved<uintptr_t> page_size;
  const uintptr_t page = page_size.get([] { return static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)); });
  uintptr_t lo = slot & ~(page - 1);
  bool relro = slot >= relro_lo && slot < relro_hi;
  if (relro && mprotect(reinterpret_cast<void *>(lo), page, PROT_READ | PROT_WRITE) != 0)
    return false;
  __atomic_store_n(reinterpret_cast<void **>(slot), value, __ATOMIC_RELEASE);
  if (relro) mprotect(reinterpret_cast<void *>(lo), page, PROT_READ);
  return true;
}

// Calls fn(slot offset, name) for each GOT slot of the object that refers
// to a CUDA name defined elsewhere; stops when fn returns false.
template <typename Fn>
bool for_each_cuda_ref(const Dynamic &d, const ElfW(Rela) * r, size_t bytes, Fn fn) {
  if (!r) return true;
  for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
    uint32_t type = ELF64_R_TYPE(r[i].r_info);
    if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
    const ElfW(Sym) &sym = d.symtab[ELF64_R_SYM(r[i].r_info)];
    const char *name = d.strtab + sym.st_name;
    // Only references (undefined here): an object's own cuda* definitions
    // (libcudart calling itself) are not calls into the CUDA API.
    if (sym.st_shndx != SHN_UNDEF || !is_cuda_name(name)) continue;
    if (!fn(r[i].r_offset, name)) return false;
  }
  return true;
}

template <typename Fn>
bool for_each_cuda_ref(const Dynamic &d, Fn fn) {
  return for_each_cuda_ref(d, d.jmprel, d.jmprel_size, fn) &&
         for_each_cuda_ref(d, d.rela, d.rela_size, fn);
}

// The object's .dynamic, read, and its RELRO range; false for an object
// never to patch (ours, the loader, libc) or one without the tables.
bool object_tables(const dl_phdr_info *info, Dynamic &d, uintptr_t &relro_lo, uintptr_t &relro_hi) {
  const char *path = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "(main)";
  if (info->dlpi_addr == g_self_base || skipped_object(path) || !fully_loaded(info)) return false;
  const ElfW(Dyn) *dyn = nullptr;
  relro_lo = relro_hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn) *>(info->dlpi_addr + ph.p_vaddr);
    if (ph.p_type == PT_GNU_RELRO) {
      relro_lo = info->dlpi_addr + ph.p_vaddr;
      relro_hi = relro_lo + ph.p_memsz;
    }
  }
  if (!dyn) return false;
  d = read_dynamic(info, dyn);
  return d.symtab && d.strtab && d.rela_plt;
}

// First walk: the CUDA names that objects not yet patched refer to and the
// hook table does not know yet (looked up after the walk).
int collect_names(dl_phdr_info *info, size_t, void *out) {
  if (g_done->count(info->dlpi_addr)) return 0;
  Dynamic d;
  uintptr_t lo, hi;
  if (!object_tables(info, d, lo, hi)) return 0;
  auto *names = static_cast<std::unordered_set<std::string> *>(out);
  for_each_cuda_ref(d, [&](ElfW(Addr), const char *name) {
    if (!g_hooks->count(name)) names->emplace(name);
    return true;
  });
  return 0;
}

// Second walk: each object whose names are all known is patched and marked
// done; one loaded since the first walk waits for the next pass.
int patch_one(dl_phdr_info *info, size_t, void *out) {
  if (g_done->count(info->dlpi_addr)) return 0;
  Dynamic d;
  uintptr_t relro_lo, relro_hi;
  if (!object_tables(info, d, relro_lo, relro_hi)) return 0;
  bool known =
      for_each_cuda_ref(d, [&](ElfW(Addr), const char *name) { return g_hooks->count(name) != 0; });
  if (!known) return 0;
  size_t n = 0;
  for_each_cuda_ref(d, [&](ElfW(Addr) offset, const char *name) {
    void *hook = g_hooks->find(name)->second;
    if (!hook) return true;
    uintptr_t slot = info->dlpi_addr + offset;
    void *original = __atomic_load_n(reinterpret_cast<void **>(slot), __ATOMIC_ACQUIRE);
    if (original == hook || !write_slot(slot, hook, relro_lo, relro_hi)) return true;
    (*g_saved)[slot] = Saved{info->dlpi_addr, original, hook, relro_lo, relro_hi};
    ++n;
    return true;
  });
  g_done->insert(info->dlpi_addr);
  const char *path = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "(main)";
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

// Under g_mutex.
size_t patch_locked() {
  if (!g_done) g_done = new std::unordered_set<uintptr_t>();
  if (!g_saved) g_saved = new std::unordered_map<uintptr_t, Saved>();
  if (!g_hooks) {
    g_hooks = new std::unordered_map<std::string, void *>();
    g_find_object = reinterpret_cast<FindObject>(real_dlsym(RTLD_DEFAULT, "_dl_find_object"));
  }
  if (!find_self()) return 0;
  std::unordered_set<std::string> names;
  {
    LoaderWalkGuard walking;
    dl_iterate_phdr(collect_names, &names);
  }
  for (const std::string &name : names) (*g_hooks)[name] = our_hook(name.c_str());
  size_t n = 0;
  {
    LoaderWalkGuard walking;
    dl_iterate_phdr(patch_one, &n);
  }
  g_patched.store(true, std::memory_order_release);
  return n;
}

}  // namespace

size_t patch_loaded_objects() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return patch_locked();
}

bool patched() { return g_patched.load(std::memory_order_acquire); }

void patch_new_objects() {
  if (!patched()) return;
  struct Counts {
    unsigned long long adds = 0, subs = 0;
  };
  static Counts seen;
  Counts now;
  {
    // Released before patch_loaded_objects takes it again (not recursive).
    LoaderWalkGuard walking;
    dl_iterate_phdr(
        [](dl_phdr_info *info, size_t size, void *out) {
          auto *c = static_cast<Counts *>(out);
          if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
            c->adds = info->dlpi_adds;
            c->subs = info->dlpi_subs;
          }
          return 1;
        },
        &now);
  }
  if (now.adds == seen.adds) return;
  if (now.subs != seen.subs) {
    // Something was unloaded: its slots are gone with it, and an object
    // loaded since may sit at the same base, which alone says "done".
    // Every object is looked at again (a slot that already holds our hook
    // is left as it is).
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_done) g_done->clear();
    if (g_saved) {
      std::unordered_map<uintptr_t, Saved> kept;
      for_each_still_ours([&](uintptr_t slot, const Saved &e) { kept.emplace(slot, e); });
      g_saved->swap(kept);
    }
  }
  seen = now;
  std::lock_guard<std::mutex> lock(g_mutex);
  // A detach's restore_all() may have run since the check above: patching
  // again would send the process's calls through a finished shim.
  if (!g_patched.load(std::memory_order_acquire)) return;
  patch_locked();
}

size_t restore_all() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_patched.store(false, std::memory_order_release);  // the writer patches nothing more
  if (!g_saved) return 0;
  size_t n = 0;
  for_each_still_ours([&](uintptr_t slot, const Saved &e) {
    n += write_slot(slot, e.original, e.relro_lo, e.relro_hi);
  });
  g_saved->clear();
  g_done->clear();
  return n;
}

}  // namespace torchseal::got
