#include "common/symbols/symbolizer.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "common/symbols/elf_symtab.h"
#include "common/symbols/module_map.h"
#include "common/symbols/runtime_libs.h"
#include "common/util/fork_safe.h"

#if TORCHSEAL_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#endif

namespace torchseal {

std::string demangle(const std::string &raw) {
  // .symtab names of versioned definitions carry "@@GLIBC_2.34" / "@VER".
  std::string name = raw.substr(0, raw.find('@'));
  if (name.empty()) return raw;
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char *d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return name;
  std::string out(d);
  std::free(d);
  return out;
}

namespace {

// libdw for the whole process, opened once (bundled copy first); the
// handle stays open: unloading a library from exit-time code in someone
// else's process buys nothing and risks running its destructors out of
// order.
struct LibDw {
  void *handle = nullptr;
  std::string why;  // when handle is null
};

const LibDw &libdw() {
  static constinit Lazy<LibDw> lib;
  return lib.get([] {
    LibDw l;
#if TORCHSEAL_HAVE_LIBDW
    runtime_libs::Opened o = runtime_libs::open("libdw.so.1", RTLD_LAZY);
    l.handle = o.handle;
    l.why = o.error;
#else
    l.why = "this torchseal was built without elfutils' headers";
#endif
    if (!l.handle) runtime_libs::note_degraded("no line numbers: libdw unavailable");
    return l;
  });
}

}  // namespace

bool libdw_available(std::string *why) {
  const LibDw &l = libdw();
  if (why) *why = l.why;
  return l.handle != nullptr;
}

struct Symbolizer::Symtabs {
  std::map<std::string, ElfSymtab> by_path;
  const ElfSymtab &get(const std::string &path) {
    auto it = by_path.find(path);
    if (it == by_path.end()) it = by_path.emplace(path, ElfSymtab::load(path)).first;
    return it->second;
  }
};

#if TORCHSEAL_HAVE_LIBDW

// Every libdw/libdwfl function we use, resolved with dlsym so the library
// has no link-time dependency on elfutils. The prototypes come from the
// installed headers, so a signature mismatch is a compile error.
// One function a line: clang-format reflows a packed list differently each run.
// clang-format off
#define TORCHSEAL_LIBDW_FUNCTIONS(X) \
  X(dwfl_begin) \
  X(dwfl_end) \
  X(dwfl_report_begin) \
  X(dwfl_report_elf) \
  X(dwfl_report_end) \
  X(dwfl_addrmodule) \
  X(dwfl_module_addrinfo) \
  X(dwfl_module_getsrc) \
  X(dwfl_lineinfo) \
  X(dwfl_module_addrdie) \
  X(dwfl_module_build_id) \
  X(dwfl_build_id_find_elf) \
  X(dwfl_standard_find_debuginfo) \
  X(dwfl_offline_section_address) \
  X(dwarf_getscopes) \
  X(dwarf_tag) \
  X(dwarf_attr_integrate) \
  X(dwarf_formstring) \
  X(dwarf_formudata) \
  X(dwarf_getsrcfiles) \
  X(dwarf_filesrc) \
  X(dwarf_getscopes_die) \
  X(dwarf_attr) \
  X(dwarf_formref_die) \
  X(dwarf_diename) \
  X(dwarf_child) \
  X(dwarf_siblingof) \
  X(dwarf_haspc)
// clang-format on

struct Symbolizer::Dwarf {
#define TORCHSEAL_DECLARE(name) decltype(&::name) name = nullptr;
  TORCHSEAL_LIBDW_FUNCTIONS(TORCHSEAL_DECLARE)
#undef TORCHSEAL_DECLARE
  Dwfl_Callbacks callbacks{};
  Dwfl *dwfl = nullptr;
  std::map<Dwfl_Module *, bool> build_id_ok;

  ~Dwarf() {
    if (dwfl) dwfl_end(dwfl);
  }

  bool load(const std::vector<Module> &modules) {
    void *h = libdw().handle;
    if (!h) return false;
#define TORCHSEAL_RESOLVE(name)                                \
  name = reinterpret_cast<decltype(&::name)>(dlsym(h, #name)); \
  if (!name) return false;
    TORCHSEAL_LIBDW_FUNCTIONS(TORCHSEAL_RESOLVE)
#undef TORCHSEAL_RESOLVE
    callbacks.find_elf = dwfl_build_id_find_elf;
    callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
    callbacks.section_address = dwfl_offline_section_address;
    dwfl = dwfl_begin(&callbacks);
    if (!dwfl) return false;
    // Each module is placed at its recorded load bias, which works the same
    // for this process and for a history file from another one (unlike
    // dwfl_linux_proc_report, which reads a live /proc/PID/maps).
    dwfl_report_begin(dwfl);
    for (const Module &m : modules) {
      if (m.path.empty() || m.path[0] != '/') continue;  // vDSO and friends: no file
      Dwfl_Module *mod = dwfl_report_elf(dwfl, m.path.c_str(), m.path.c_str(), -1, m.base, true);
      if (mod && !m.build_id.empty()) build_id_ok[mod] = build_id_matches(mod, m.build_id);
    }
    dwfl_report_end(dwfl, nullptr, nullptr);
    return true;
  }

  // A file replaced since the run (upgraded library, other machine) would
  // give confidently wrong lines; better to show module+address only.
  bool build_id_matches(Dwfl_Module *mod, const std::string &want) {
    const unsigned char *bits = nullptr;
    GElf_Addr vaddr = 0;
    int n = dwfl_module_build_id(mod, &bits, &vaddr);
    if (n <= 0) return true;  // file has none: nothing to compare
    static const char kDigits[] = "0123456789abcdef";
    std::string have;
    for (int i = 0; i < n; ++i) {
      have.push_back(kDigits[bits[i] >> 4]);
      have.push_back(kDigits[bits[i] & 15]);
    }
    return have == want;
  }

  // Demangled linkage name when there is one (it carries the scope and the
  // parameters, like the ELF symbol of an out-of-line function). Otherwise
  // (GCC omits it for many inlined and static functions) the plain name,
  // qualified with its enclosing namespaces and classes.
  std::string die_name(Dwarf_Die *die) {
    Dwarf_Attribute a;
    for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
      if (dwarf_attr_integrate(die, at, &a)) {
        if (const char *s = dwarf_formstring(&a)) return demangle(s);
      }
    }
    // The declaration (via abstract_origin / specification) sits in the
    // namespace or class that names it; the concrete DIE may not.
    Dwarf_Die decl = *die, next;
    for (int hops = 0; hops < 8; ++hops) {
      if ((dwarf_attr(&decl, DW_AT_abstract_origin, &a) ||
           dwarf_attr(&decl, DW_AT_specification, &a)) &&
          dwarf_formref_die(&a, &next)) {
        decl = next;
      } else {
        break;
      }
    }
    const char *base = dwarf_diename(&decl);
    if (!base) return {};
    std::string name = base;
    Dwarf_Die *chain = nullptr;
    int n = dwarf_getscopes_die(&decl, &chain);
    for (int i = 1; i < n; ++i) {
      int tag = dwarf_tag(&chain[i]);
      if (tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
          tag == DW_TAG_union_type) {
        const char *scope = dwarf_diename(&chain[i]);
        name = std::string(scope ? scope : "(anonymous namespace)") + "::" + name;
      }
    }
    free(chain);
    return name;
  }

  // Line tables name files as the compiler was given them
  // (../examples/x.cpp); the compilation directory makes them usable from
  // anywhere: absolute, without "." or ".." steps.
  std::string source_path(Dwarf_Die *cu, const char *file) {
    std::filesystem::path p(file);
    Dwarf_Attribute a;
    if (p.is_relative() && cu && dwarf_attr_integrate(cu, DW_AT_comp_dir, &a)) {
      if (const char *dir = dwarf_formstring(&a)) p = std::filesystem::path(dir) / p;
    }
    return p.lexically_normal().string();
  }

  // The innermost function DIE (subprogram or inlined call) whose ranges
  // hold `pc`, wherever it sits in the tree under `parent`. dwarf_getscopes
  // descends only through DIEs that hold pc, so it never reaches a
  // subprogram nested in one whose ranges lie elsewhere: GCC's OpenMP
  // outlined regions (main._omp_fn.0 inside main), and lambdas or other
  // nested functions laid out that way.
  bool find_function_die(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *out, int depth) {
    Dwarf_Die child;
    if (depth > 64 || dwarf_child(parent, &child) != 0) return false;
    do {
      int tag = dwarf_tag(&child);
      if ((tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) &&
          dwarf_haspc(&child, pc) == 1) {
        *out = child;
        find_function_die(&child, pc, out, depth + 1);  // an inlined call inside it
        return true;
      }
      if ((tag == DW_TAG_subprogram || tag == DW_TAG_lexical_block || tag == DW_TAG_namespace ||
           tag == DW_TAG_class_type || tag == DW_TAG_structure_type || tag == DW_TAG_union_type) &&
          find_function_die(&child, pc, out, depth + 1))
        return true;
    } while (dwarf_siblingof(&child, &child) == 0);
    return false;
  }

  // Where `inlined` (a DW_TAG_inlined_subroutine) was called from.
  void call_site(Dwarf_Die *cu, Dwarf_Die *inlined, std::string &file, int &line) {
    file.clear();
    line = 0;
    Dwarf_Attribute a;
    Dwarf_Word v = 0;
    if (dwarf_attr_integrate(inlined, DW_AT_call_line, &a) && dwarf_formudata(&a, &v) == 0) {
      line = static_cast<int>(v);
    }
    Dwarf_Files *files = nullptr;
    size_t nfiles = 0;
    if (dwarf_attr_integrate(inlined, DW_AT_call_file, &a) && dwarf_formudata(&a, &v) == 0 &&
        dwarf_getsrcfiles(cu, &files, &nfiles) == 0 && v < nfiles) {
      if (const char *f = dwarf_filesrc(files, v, nullptr, nullptr)) file = source_path(cu, f);
    }
  }

  // Empty when the address is in no reported module (caller falls back);
  // `stale` is set when the file on disk is not the one that was loaded.
  std::vector<NativeFrame> lookup(uint64_t pc, const NativeFrame &proto, bool expand_inlined,
                                  bool &stale) {
    std::vector<NativeFrame> out;
    Dwfl_Module *mod = dwfl_addrmodule(dwfl, pc);
    if (!mod) return out;
    if (auto it = build_id_ok.find(mod); it != build_id_ok.end() && !it->second) {
      stale = true;
      return out;
    }

    NativeFrame f = proto;
    GElf_Off off = 0;
    GElf_Sym sym;
    if (const char *s = dwfl_module_addrinfo(mod, pc, &off, &sym, nullptr, nullptr, nullptr)) {
      f.function = demangle(s);
    }
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(mod, pc, &bias);
    Dwarf_Die *scopes = nullptr;
    int n = cu ? dwarf_getscopes(cu, pc - bias, &scopes) : 0;
    int function_scope = -1;
    for (int i = 0; i < n && function_scope < 0; ++i) {
      int tag = dwarf_tag(&scopes[i]);
      if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) function_scope = i;
    }
    Dwarf_Die innermost;
    bool in_function = function_scope >= 0;
    if (in_function)
      innermost = scopes[0];
    else if (cu)
      in_function = find_function_die(cu, pc - bias, &innermost, 0);
    // libdw answers a line query with the nearest row of some line table
    // even for code no function DIE covers (e.g. _start, right after main),
    // so line info is taken only inside a function the DWARF describes.
    // Hand-written assembly loses its lines; a wrong line would be worse.
    if (in_function) {
      if (Dwfl_Line *l = dwfl_module_getsrc(mod, pc)) {
        Dwarf_Addr a = 0;
        int line = 0, col = 0;
        Dwarf_Word mtime = 0, len = 0;
        if (const char *file = dwfl_lineinfo(l, &a, &line, &col, &mtime, &len)) {
          f.file = source_path(cu, file);
          f.line = line;
        }
      }
    }
    // dwarf_getscopes continues from an inlined DIE into its abstract
    // origin's scopes, so take only the innermost DIE from it and walk the
    // physical nesting (inlined_subroutine -> ... -> subprogram) instead.
    Dwarf_Die *chain = nullptr;
    int m = in_function ? dwarf_getscopes_die(&innermost, &chain) : 0;
    if (f.function.empty()) {
      for (Dwarf_Die *list : {scopes, chain}) {
        for (int i = 0; f.function.empty() && i < (list == scopes ? n : m); ++i) {
          if (dwarf_tag(&list[i]) == DW_TAG_subprogram) f.function = die_name(&list[i]);
        }
      }
    }
    free(scopes);
    // Each inlined_subroutine is one source-level frame at the current
    // location; its call site is the location of the next frame out, up to
    // the real (ELF) function.
    std::string file = f.file;
    int line = f.line;
    for (int i = 0; i < m; ++i) {
      int tag = dwarf_tag(&chain[i]);
      if (tag == DW_TAG_inlined_subroutine) {
        NativeFrame in = proto;
        in.function = die_name(&chain[i]);
        in.file = file;
        in.line = line;
        out.push_back(std::move(in));
        call_site(cu, &chain[i], file, line);
      } else if (tag == DW_TAG_subprogram) {
        break;
      }
    }
    free(chain);
    f.file = file;
    f.line = line;
    out.push_back(std::move(f));
    // One frame per address: the innermost, so its function and line still
    // belong together (the line is inside the inlined callee).
    if (!expand_inlined) out.resize(1);
    return out;
  }
};

#else  // !TORCHSEAL_HAVE_LIBDW

struct Symbolizer::Dwarf {
  bool load(const std::vector<Module> &) { return false; }
  std::vector<NativeFrame> lookup(uint64_t, const NativeFrame &, bool, bool &) { return {}; }
};

#endif

Symbolizer::Symbolizer(std::vector<Module> modules, SymbolizerOptions opts)
    : modules_(std::move(modules)), opts_(opts), symtabs_(std::make_unique<Symtabs>()) {}

Symbolizer::~Symbolizer() = default;

Symbolizer::Dwarf *Symbolizer::dwarf() {
  if (!dwarf_tried_) {
    dwarf_tried_ = true;
    if (opts_.use_libdw) {
      auto d = std::make_unique<Dwarf>();
      if (d->load(modules_)) dwarf_ = std::move(d);
    }
  }
  return dwarf_.get();
}

bool Symbolizer::has_libdw() { return dwarf() != nullptr; }

std::vector<NativeFrame> Symbolizer::resolve(uint64_t ip) {
  // A return address points after the call; ip - 1 is inside the call
  // instruction, so the line is the call's, and a call that is the last
  // instruction of a function still maps to that function.
  const uint64_t pc = ip > 0 ? ip - 1 : 0;
  NativeFrame proto;
  proto.address = ip;
  const Module *m = find_module(modules_, pc);
  if (!m) return {proto};
  proto.module = m->path;
  if (Dwarf *d = dwarf()) {
    bool stale = false;
    std::vector<NativeFrame> frames = d->lookup(pc, proto, opts_.expand_inlined, stale);
    if (!frames.empty()) return frames;
    if (stale) return {proto};
  }
  if (!m->path.empty() && m->path[0] == '/') {
    const ElfSymtab &t = symtabs_->get(m->path);
    // A different file under the same path (upgraded since the run, or
    // another machine): its names would be wrong, so show the address only.
    if (!m->build_id.empty() && !t.build_id().empty() && t.build_id() != m->build_id) {
      return {proto};
    }
    proto.function = demangle(t.lookup(pc - m->base));
  }
  return {proto};
}

const std::vector<NativeFrame> &Symbolizer::symbolize(uint64_t ip) {
  auto it = cache_.find(ip);
  if (it == cache_.end()) it = cache_.emplace(ip, resolve(ip)).first;
  return it->second;
}

void Symbolizer::preload(uint64_t ip, std::vector<NativeFrame> frames) {
  if (frames.empty()) frames.push_back(NativeFrame{{}, {}, 0, {}, ip});
  cache_[ip] = std::move(frames);
}

std::vector<NativeFrame> Symbolizer::symbolize_stack(const std::vector<uint64_t> &ips) {
  std::vector<NativeFrame> out;
  out.reserve(ips.size());
  for (uint64_t ip : ips) {
    const auto &f = symbolize(ip);
    out.insert(out.end(), f.begin(), f.end());
  }
  return out;
}

}  // namespace torchseal
