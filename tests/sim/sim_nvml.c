/* sim_nvml.c: a stand-in for libnvidia-ml.so.1 (NVML) describing the simulator's one device, so programs
 * that link NVML (FBGEMM's fbgemm_gpu_py.so has a DT_NEEDED on it) or open it (PyTorch's device count,
 * c10's driver API) load and get consistent answers. NvLink is "not supported"; no process runs. */
#include <stdio.h>
#include <string.h>

/* The NVML ABI of the calls answered here (nvml.h, NVML API reference: nvmlReturn_t, nvmlPciInfo_t v3,
 * nvmlMemory_t); the toolkit ships no nvml.h, so the types are spelled out. */
typedef int nvmlReturn_t;
enum { NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2, NVML_ERROR_NOT_SUPPORTED = 3,
       NVML_ERROR_NOT_FOUND = 6, NVML_ERROR_INSUFFICIENT_SIZE = 7, NVML_ERROR_UNKNOWN = 999 };
typedef struct sim_nvml_device *nvmlDevice_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId, computeInstanceId; } nvmlProcessInfo_t;

#define EXPORT __attribute__((visibility("default")))

struct sim_nvml_device { int index; };
static struct sim_nvml_device g_dev0 = { 0 };
static int g_inits; /* nvmlInit / nvmlShutdown are reference counted */

/* The same device the simulated driver describes (sim_device.c, sim_runtime.c): PCI 0000:01:00.0,
 * an H200's PCI device id, the UUID whose bytes cudaGetDeviceProperties reports ("uvmchunk-sim-gpu"). */
static const char g_uuid[] = "GPU-75766d63-6875-6e6b-2d73-696d2d677075";
static const char g_name[] = "uvmchunk simulated GPU";

#define NEED_INIT()                                                                                    \
    do {                                                                                               \
        if (g_inits <= 0) return NVML_ERROR_UNINITIALIZED;                                             \
    } while (0)
#define NEED_DEV(d)                                                                                    \
    do {                                                                                               \
        NEED_INIT();                                                                                   \
        if ((d) != &g_dev0) return NVML_ERROR_INVALID_ARGUMENT;                                        \
    } while (0)

EXPORT nvmlReturn_t nvmlInit_v2(void) { __atomic_add_fetch(&g_inits, 1, __ATOMIC_SEQ_CST); return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvmlInit_v2(); }
EXPORT nvmlReturn_t nvmlShutdown(void) {
    NEED_INIT();
    __atomic_sub_fetch(&g_inits, 1, __ATOMIC_SEQ_CST);
    return NVML_SUCCESS;
}
EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
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

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { NEED_INIT(); if (!v) return NVML_ERROR_INVALID_ARGUMENT; *v = 13000; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { return nvmlSystemGetCudaDriverVersion_v2(v); }
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *s, unsigned int n) {
    NEED_INIT();
    if (!s) return NVML_ERROR_INVALID_ARGUMENT;
    if (snprintf(s, n, "%s", "580.0 (uvmchunk simulated)") >= (int)n) return NVML_ERROR_INSUFFICIENT_SIZE;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) { NEED_INIT(); if (!n) return NVML_ERROR_INVALID_ARGUMENT; *n = 1; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *n) { return nvmlDeviceGetCount_v2(n); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
    NEED_INIT();
    if (!d || i != 0) return NVML_ERROR_INVALID_ARGUMENT;
    *d = &g_dev0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d) { return nvmlDeviceGetHandleByIndex_v2(i, d); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d) {
    NEED_INIT();
    if (!uuid || !d) return NVML_ERROR_INVALID_ARGUMENT;
    if (strcmp(uuid, g_uuid)) return NVML_ERROR_NOT_FOUND;
    *d = &g_dev0;
    return NVML_SUCCESS;
}
/* "00000000:01:00.0" (NVML's form) or the runtime's "0000:01:00.0", any case */
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *id, nvmlDevice_t *d) {
    NEED_INIT();
    if (!id || !d) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned dom = 1, bus = 0, dev = 1, fn = 1;
    if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4 || dom || bus != 1 || dev || fn) return NVML_ERROR_NOT_FOUND;
    *d = &g_dev0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *id, nvmlDevice_t *d) { return nvmlDeviceGetHandleByPciBusId_v2(id, d); }
EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *i) { NEED_DEV(d); if (!i) return NVML_ERROR_INVALID_ARGUMENT; *i = 0; return NVML_SUCCESS; }
/* NVML's string getters: the whole string with its NUL, or INSUFFICIENT_SIZE. */
static nvmlReturn_t copy_string(char *s, unsigned int n, const char *v, size_t size) {
    if (!s) return NVML_ERROR_INVALID_ARGUMENT;
    if (n < size) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(s, v, size);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *s, unsigned int n) {
    NEED_DEV(d);
    return copy_string(s, n, g_uuid, sizeof g_uuid);
}
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *s, unsigned int n) {
    NEED_DEV(d);
    return copy_string(s, n, g_name, sizeof g_name);
}
EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor) {
    NEED_DEV(d);
    if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    *major = 9;
    *minor = 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
    NEED_DEV(d);
    if (!p) return NVML_ERROR_INVALID_ARGUMENT;
    memset(p, 0, sizeof *p);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%s", "0000:01:00.0");
    snprintf(p->busId, sizeof p->busId, "%s", "00000000:01:00.0");
    p->bus = 1;
    p->pciDeviceId = 0x233510de; /* device 0x2335 (H200), vendor 0x10de */
    p->pciSubSystemId = 0x18be10de;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t *p) { return nvmlDeviceGetPciInfo_v3(d, p); }
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, nvmlPciInfo_t *p) { return nvmlDeviceGetPciInfo_v3(d, p); }
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    NEED_DEV(d);
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    m->total = (unsigned long long)16 << 30; /* as cuDeviceTotalMem */
    m->used = 0;
    m->free = m->total;
    return NVML_SUCCESS;
}

/* One GPU, no NvLink: every link query is "not supported", as on a PCIe card. */
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, int *active) {
    NEED_DEV(d);
    (void)link;
    if (!active) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_ERROR_NOT_SUPPORTED;
}
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link, nvmlPciInfo_t *p) {
    NEED_DEV(d);
    (void)link;
    if (!p) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_ERROR_NOT_SUPPORTED;
}
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t d, unsigned int link, nvmlPciInfo_t *p) {
    return nvmlDeviceGetNvLinkRemotePciInfo_v2(d, link, p);
}
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned int link, int *type) {
    NEED_DEV(d);
    (void)link;
    if (!type) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_ERROR_NOT_SUPPORTED;
}
EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int index, int *status) {
    NEED_DEV(a);
    NEED_DEV(b);
    (void)index;
    if (!status) return NVML_ERROR_INVALID_ARGUMENT;
    *status = 4; /* NVML_P2P_STATUS_NOT_SUPPORTED */
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t d, void *info) {
    NEED_DEV(d);
    (void)info;
    return NVML_ERROR_NOT_SUPPORTED;
}
/* No process holds device memory (the simulator's memory is the host's). */
static nvmlReturn_t no_processes(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *infos) {
    NEED_DEV(d);
    (void)infos;
    if (!n) return NVML_ERROR_INVALID_ARGUMENT;
    *n = 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *i) { return no_processes(d, n, i); }
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *i) { return no_processes(d, n, i); }
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *i) { return no_processes(d, n, i); }
