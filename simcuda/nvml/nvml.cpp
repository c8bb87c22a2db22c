// A simulated NVML (libnvidia-ml.so.1) for the devices simcuda's driver
// reports. PyTorch needs one on a real-looking machine: with
// expandable_segments its allocator resolves NVML functions once NVML loads
// and otherwise calls a null nvmlInit_v2 pointer (c10::cuda::get_fabric_access),
// and torch.cuda.device_count() asks NVML before initialising CUDA. The
// answers agree with libcuda.so.1: SIMCUDA_DEVICES devices, PCI bus ids
// 0000:18+dev:00.0, the same UUID bytes as cuDeviceGetUuid, no fabric, no
// NVLink, no peer access, no running processes.
//
// No nvml.h ships with the toolkit, so the few types are declared here with
// NVML's C ABI (nvmlReturn_t is an enum, handles are opaque pointers).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace {

using nvmlReturn_t = int;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
constexpr int kMaxDevices = 16;

struct Device {
    int index;
};
Device g_devices[kMaxDevices];
int g_init_count = 0;

int device_count()
{
    // The same rule as the driver (driver_init.cpp): 1..16, default 1.
    const char *s = std::getenv("SIMCUDA_DEVICES");
    if (!s || !*s)
        return 1;
    char *end = nullptr;
    long v = std::strtol(s, &end, 10);
    return (*end == 0 && v >= 1 && v <= kMaxDevices) ? int(v) : 1;
}

bool valid(const Device *d) { return d >= g_devices && d < g_devices + device_count(); }

void uuid_string(int dev, char *out, size_t len)
{
    unsigned char b[16] = {};
    std::memcpy(b, "simcuda-dev", 11);  // as cuDeviceGetUuid
    b[15] = static_cast<unsigned char>(dev);
    std::snprintf(out, len,
                  "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                  b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                  b[12], b[13], b[14], b[15]);
}

}  // namespace

extern "C" {

using nvmlDevice_t = Device *;

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2(void)
{
    for (int i = 0; i < kMaxDevices; ++i)
        g_devices[i].index = i;
    ++g_init_count;
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

__attribute__((visibility("default"))) nvmlReturn_t nvmlInitWithFlags(unsigned int)
{
    return nvmlInit_v2();
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown(void)
{
    if (g_init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    --g_init_count;
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    default: return "Unknown Error";
    }
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
    if (!v)
        return NVML_ERROR_INVALID_ARGUMENT;
    *v = 13000;
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    return nvmlSystemGetCudaDriverVersion(v);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!g_init_count)
        return NVML_ERROR_UNINITIALIZED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = static_cast<unsigned>(device_count());
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
    return nvmlDeviceGetCount_v2(count);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i,
                                                                                  nvmlDevice_t *out)
{
    if (!g_init_count)
        return NVML_ERROR_UNINITIALIZED;
    if (!out || i >= static_cast<unsigned>(device_count()))
        return NVML_ERROR_INVALID_ARGUMENT;
    *out = &g_devices[i];
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i,
                                                                               nvmlDevice_t *out)
{
    return nvmlDeviceGetHandleByIndex_v2(i, out);
}

// Bus ids as the driver reports them ("0000:18:00.0") or as NVML formats
// them ("00000000:18:00.0"): the bus number picks the device.
__attribute__((visibility("default"))) nvmlReturn_t
nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *out)
{
    if (!g_init_count)
        return NVML_ERROR_UNINITIALIZED;
    if (!bus_id || !out)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned domain = 0, bus = 0, dev = 0;
    if (std::sscanf(bus_id, "%x:%x:%x", &domain, &bus, &dev) != 3)
        return NVML_ERROR_INVALID_ARGUMENT;
    int index = static_cast<int>(bus) - 0x18;
    if (domain != 0 || dev != 0 || index < 0 || index >= device_count())
        return NVML_ERROR_NOT_FOUND;
    *out = &g_devices[index];
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *b,
                                                                                  nvmlDevice_t *o)
{
    return nvmlDeviceGetHandleByPciBusId_v2(b, o);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid,
                                                                      unsigned int length)
{
    if (!g_init_count)
        return NVML_ERROR_UNINITIALIZED;
    if (!valid(d) || !uuid)
        return NVML_ERROR_INVALID_ARGUMENT;
    char buf[96];
    uuid_string(d->index, buf, sizeof buf);
    if (std::strlen(buf) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    std::memcpy(uuid, buf, std::strlen(buf) + 1);
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid,
                                                                              nvmlDevice_t *out)
{
    if (!g_init_count)
        return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !out)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < device_count(); ++i) {
        char buf[96];
        uuid_string(i, buf, sizeof buf);
        if (strcasecmp(buf, uuid) == 0) {
            *out = &g_devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

// No fabric: the caller pre-sets state = NOT_SUPPORTED and the structure is
// left as it is (its layout is versioned; nothing here needs to write it).
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t d,
                                                                                void *info)
{
    if (!g_init_count)
        return NVML_ERROR_UNINITIALIZED;
    if (!valid(d) || !info)
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

// Processes are not simulated: none is using the device.
__attribute__((visibility("default"))) nvmlReturn_t
nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *count, void *)
{
    if (!g_init_count)
        return NVML_ERROR_UNINITIALIZED;
    if (!valid(d) || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = 0;
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t
nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, void *infos)
{
    return nvmlDeviceGetComputeRunningProcesses(d, count, infos);
}

__attribute__((visibility("default"))) nvmlReturn_t
nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t, unsigned int, int *)
{
    return NVML_ERROR_NOT_SUPPORTED;
}

__attribute__((visibility("default"))) nvmlReturn_t
nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t, unsigned int, void *)
{
    return NVML_ERROR_NOT_SUPPORTED;
}

// Peer access is not simulated (cudaDeviceCanAccessPeer says 0):
// NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a,
                                                                           nvmlDevice_t b, int,
                                                                           int *status)
{
    if (!g_init_count)
        return NVML_ERROR_UNINITIALIZED;
    if (!valid(a) || !valid(b) || !status)
        return NVML_ERROR_INVALID_ARGUMENT;
    *status = a == b ? 0 : 1;
    return NVML_SUCCESS;
}

}  // extern "C"
