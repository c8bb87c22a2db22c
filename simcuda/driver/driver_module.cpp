// Modules and kernel launch through the driver API. An image (PTX text, a
// cubin ELF, or a fatbin holding either) is read for its kernel and global
// names; kernels are never run, so a launch only checks its arguments, like
// the runtime's launches. Globals get zeroed device memory of their declared
// size, freed with the module.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "driver_internal.h"

struct CUmod_st;

struct CUfunc_st {
    CUmod_st *mod;
    std::string name;
};

struct CUmod_st {
    CUctx_st *ctx;
    // A compressed fatbin entry cannot be read here: any name is accepted.
    bool any_name;
    std::map<std::string, CUfunc_st *> functions;
    std::map<std::string, size_t> global_sizes;
    std::map<std::string, uintptr_t> globals;  // allocated on first query
};

namespace simcuda {
namespace {

Immortal<std::set<CUmod_st *>> g_modules;
Immortal<std::set<CUfunc_st *>> g_functions;

struct Names {
    bool any = false;
    std::vector<std::string> functions;
    std::map<std::string, size_t> globals;
};

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }

size_t ptx_type_size(const std::string &t)
{
    if (t == ".b8" || t == ".u8" || t == ".s8" || t == ".pred")
        return 1;
    if (t == ".b16" || t == ".u16" || t == ".s16" || t == ".f16")
        return 2;
    if (t == ".b64" || t == ".u64" || t == ".s64" || t == ".f64")
        return 8;
    return 4;
}

// The directive `word` at `at`: a whole word, not part of an instruction
// such as ld.global.f32.
bool directive_at(const std::string &s, size_t at, size_t len)
{
    return (at == 0 || std::isspace(static_cast<unsigned char>(s[at - 1]))) &&
           at + len < s.size() && std::isspace(static_cast<unsigned char>(s[at + len]));
}

// One variable declaration, after its state space: `[.align N] .TYPE
// NAME[[N]] [= {...}]`; its size is the element size times the count.
void read_ptx_variable(const std::string &s, size_t from, Names &out)
{
    size_t end = s.find(';', from);
    if (end == std::string::npos)
        return;
    // Up to the initialiser, if any.
    std::string decl = s.substr(from, std::min(end, s.find('=', from)) - from);
    if (decl.find_first_of("(){}") != std::string::npos)
        return;  // a kernel parameter in .global space, not a variable
    std::vector<std::string> words;
    size_t i = 0;
    while (i < decl.size()) {
        while (i < decl.size() && std::isspace(static_cast<unsigned char>(decl[i])))
            ++i;
        size_t j = i;
        while (j < decl.size() && !std::isspace(static_cast<unsigned char>(decl[j])))
            ++j;
        if (j > i)
            words.push_back(decl.substr(i, j - i));
        i = j;
    }
    if (words.size() < 2)
        return;
    std::string name = words.back();
    size_t count = 1;
    if (size_t br = name.find('['); br != std::string::npos) {
        count = std::strtoull(name.c_str() + br + 1, nullptr, 10);
        name.resize(br);
    }
    out.globals[name] = ptx_type_size(words[words.size() - 2]) * std::max<size_t>(count, 1);
}

// `.entry NAME(` declares a kernel; `.global` and `.const` declarations at
// module scope are __device__ and __constant__ variables.
void read_ptx(const char *text, Names &out)
{
    std::string s(text);
    for (size_t at = s.find(".entry"); at != std::string::npos; at = s.find(".entry", at + 6)) {
        if (!directive_at(s, at, 6))
            continue;
        size_t b = s.find_first_not_of(" \t\r\n", at + 6);
        size_t e = b;
        while (e < s.size() && ident_char(s[e]))
            ++e;
        if (b != std::string::npos && e > b)
            out.functions.push_back(s.substr(b, e - b));
    }
    // __device__ and __constant__ variables.
    for (const char *space : {".global", ".const"}) {
        size_t len = std::strlen(space);
        for (size_t at = s.find(space); at != std::string::npos; at = s.find(space, at + len)) {
            if (!directive_at(s, at, len))
                continue;
            read_ptx_variable(s, at + len, out);
        }
    }
}

template <class T>
T read_at(const unsigned char *p, size_t off)
{
    T v;
    std::memcpy(&v, p + off, sizeof v);
    return v;
}

// Functions and data objects of a 64-bit ELF's symbol table.
bool read_elf(const unsigned char *img, Names &out)
{
    if (img[4] != 2)  // ELFCLASS64
        return false;
    uint64_t shoff = read_at<uint64_t>(img, 0x28);
    uint16_t shentsize = read_at<uint16_t>(img, 0x3a), shnum = read_at<uint16_t>(img, 0x3c);
    if (shentsize < 64)
        return false;
    for (uint16_t i = 0; i < shnum; ++i) {
        const unsigned char *sh = img + shoff + size_t(i) * shentsize;
        if (read_at<uint32_t>(sh, 4) != 2)  // SHT_SYMTAB
            continue;
        uint64_t off = read_at<uint64_t>(sh, 0x18), size = read_at<uint64_t>(sh, 0x20);
        uint32_t link = read_at<uint32_t>(sh, 0x28);
        uint64_t entsize = read_at<uint64_t>(sh, 0x38);
        const unsigned char *strsh = img + shoff + size_t(link) * shentsize;
        const char *strtab = reinterpret_cast<const char *>(img + read_at<uint64_t>(strsh, 0x18));
        for (uint64_t k = 0; entsize >= 24 && k < size / entsize; ++k) {
            const unsigned char *sym = img + off + k * entsize;
            unsigned type = sym[4] & 0xf, bind = sym[4] >> 4;
            const char *name = strtab + read_at<uint32_t>(sym, 0);
            if (!*name || read_at<uint16_t>(sym, 6) == 0)  // unnamed or undefined
                continue;
            // Kernels are global functions; a __device__ variable that is not
            // `extern` is local to the cubin and still found by name.
            if (type == 2 && bind != 0)  // STT_FUNC
                out.functions.push_back(name);
            else if (type == 1)  // STT_OBJECT
                out.globals[name] = read_at<uint64_t>(sym, 16);
        }
    }
    return true;
}

constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr uint32_t kFatbinWrapperMagic = 0x466243B1;
constexpr uint64_t kFatbinCompressed = 0x2000;

// A fatbin: a 16-byte header, then entries (kind 1 = PTX, 2 = ELF), each
// with its own header size and payload size.
bool read_fatbin(const unsigned char *img, Names &out)
{
    uint16_t header = read_at<uint16_t>(img, 6);
    uint64_t total = read_at<uint64_t>(img, 8);
    for (uint64_t at = header; at + 0x40 <= header + total;) {
        const unsigned char *e = img + at;
        uint16_t kind = read_at<uint16_t>(e, 0);
        uint32_t eh = read_at<uint32_t>(e, 4);
        uint64_t payload = read_at<uint64_t>(e, 8);
        if (eh < 0x40)
            return false;
        if (read_at<uint64_t>(e, 0x28) & kFatbinCompressed)
            out.any = true;
        else if (kind == 1)
            read_ptx(std::string(reinterpret_cast<const char *>(e + eh), payload).c_str(), out);
        else if (kind == 2 && std::memcmp(e + eh, "\177ELF", 4) == 0 && !read_elf(e + eh, out))
            return false;
        at += eh + payload;
    }
    return true;
}

bool read_image(const void *image, Names &out)
{
    auto *img = static_cast<const unsigned char *>(image);
    if (read_at<uint32_t>(img, 0) == kFatbinWrapperMagic)  // __fatBinC_Wrapper_t
        img = read_at<const unsigned char *>(img, 8);
    if (read_at<uint32_t>(img, 0) == kFatbinMagic)
        return read_fatbin(img, out);
    if (std::memcmp(img, "\177ELF", 4) == 0)
        return read_elf(img, out);
    // PTX is NUL-terminated text that declares its version.
    const char *text = reinterpret_cast<const char *>(img);
    if (std::strstr(text, ".version") == nullptr)
        return false;
    read_ptx(text, out);
    return true;
}

CUresult load(CUmodule *module, const void *image)
{
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    CUctx_st *c;
    if (CUresult r = current_live(&c))
        return r;
    Names names;
    if (!read_image(image, names))
        return CUDA_ERROR_INVALID_IMAGE;
    auto *m = new CUmod_st{c, names.any, {}, std::move(names.globals), {}};
    Lock lock(driver_mutex());
    for (const std::string &f : names.functions) {
        auto *fn = new CUfunc_st{m, f};
        m->functions.emplace(f, fn);
        g_functions->insert(fn);
    }
    g_modules->insert(m);
    *module = m;
    return CUDA_SUCCESS;
}

bool module_live_locked(CUmod_st *m)
{
    return g_modules->count(m) && m->ctx->alive.load(std::memory_order_relaxed);
}

void unload_locked(CUmod_st *m)
{
    for (auto &[name, fn] : m->functions) {
        g_functions->erase(fn);
        delete fn;
    }
    for (auto &[name, p] : m->globals)
        release_alloc_locked(p);
    g_modules->erase(m);
    delete m;
}

// Fixed per-function values of an sm_90 part, as cudaFuncGetAttributes gives.
int function_attribute(CUfunction_attribute attrib)
{
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        return 1024;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
        return 16;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
        return 90;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        return 49152;
    default:
        return 0;
    }
}

}  // namespace

void modules_release_context_locked(CUctx_st *c)
{
    std::vector<CUmod_st *> owned;
    for (CUmod_st *m : *g_modules)
        if (m->ctx == c)
            owned.push_back(m);
    for (CUmod_st *m : owned)
        unload_locked(m);
}

}  // namespace simcuda

using namespace simcuda;

extern "C" {

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
    SIM_REQUIRE_INIT();
    return load(module, image);
}

// JIT options change nothing here; the documented outputs are filled (empty
// logs, no time spent).
CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                    CUjit_option *options, void **optionValues)
{
    SIM_REQUIRE_INIT();
    if (numOptions && (!options || !optionValues))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numOptions; ++i) {
        if (options[i] < 0 || options[i] >= CU_JIT_NUM_OPTIONS)
            return CUDA_ERROR_INVALID_VALUE;
        if (options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
            options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            optionValues[i] = nullptr;
        if (options[i] == CU_JIT_WALL_TIME) {
            float zero = 0;
            std::memcpy(&optionValues[i], &zero, sizeof zero);
        }
    }
    return load(module, image);
}

CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    SIM_REQUIRE_INIT();
    return load(module, fatCubin);
}

CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
    SIM_REQUIRE_INIT();
    if (!module || !fname)
        return CUDA_ERROR_INVALID_VALUE;
    std::ifstream in(fname, std::ios::binary);
    if (!in)
        return CUDA_ERROR_FILE_NOT_FOUND;
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bytes.push_back('\0');  // PTX files are not NUL-terminated on disk
    return load(module, bytes.data());
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!g_modules->count(hmod))
        return CUDA_ERROR_INVALID_HANDLE;
    unload_locked(hmod);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    SIM_REQUIRE_INIT();
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    *mode = CU_MODULE_EAGER_LOADING;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    SIM_REQUIRE_INIT();
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    if (!module_live_locked(hmod))
        return CUDA_ERROR_INVALID_HANDLE;
    auto it = hmod->functions.find(name);
    if (it == hmod->functions.end()) {
        if (!hmod->any_name)
            return CUDA_ERROR_NOT_FOUND;
        auto *fn = new CUfunc_st{hmod, name};
        it = hmod->functions.emplace(name, fn).first;
        g_functions->insert(fn);
    }
    *hfunc = it->second;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
                                      const char *name)
{
    SIM_REQUIRE_INIT();
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    if (!module_live_locked(hmod))
        return CUDA_ERROR_INVALID_HANDLE;
    auto size = hmod->global_sizes.find(name);
    if (size == hmod->global_sizes.end())
        return CUDA_ERROR_NOT_FOUND;
    auto it = hmod->globals.find(name);
    if (it == hmod->globals.end()) {
        uintptr_t p;
        if (CUresult r = module_global_alloc_locked(hmod->ctx, std::max<size_t>(size->second, 1), &p))
            return r;
        it = hmod->globals.emplace(name, p).first;
    }
    if (dptr)
        *dptr = it->second;
    if (bytes)
        *bytes = size->second;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    SIM_REQUIRE_INIT();
    if (!pi || attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    if (!g_functions->count(hfunc))
        return CUDA_ERROR_INVALID_HANDLE;
    *pi = function_attribute(attrib);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    SIM_REQUIRE_INIT();
    if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    return g_functions->count(hfunc) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// Checks what cuLaunchKernel documents (a function of a live module, grid
// and block limits of an sm_90 part, one way of passing parameters, a valid
// stream); the kernel itself does nothing.
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX,
                                unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
                                void **extra)
{
    SIM_REQUIRE_INIT();
    CUctx_st *c;
    if (CUresult r = current_live(&c))
        return r;
    if (kernelParams && extra)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ ||
        gridDimX > 2147483647u || gridDimY > 65535 || gridDimZ > 65535 || blockDimX > 1024 ||
        blockDimY > 1024 || blockDimZ > 64 ||
        uint64_t(blockDimX) * blockDimY * blockDimZ > 1024 || sharedMemBytes > 232448)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    if (!g_functions->count(f) || !module_live_locked(f->mod))
        return CUDA_ERROR_INVALID_HANDLE;
    if (f->mod->ctx != c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!stream_valid_locked(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

SIM_PT_TWIN(CUresult, cuLaunchKernel_ptsz, cuLaunchKernel,
            (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
             unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
             unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra),
            (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
             hStream, kernelParams, extra))

}  // extern "C"
