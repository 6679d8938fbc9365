/* sim_nvml.c: a stand-in for libnvidia-ml.so.1 (NVML) describing the simulator's devices (UVMSIM_DEVICES,
 * as the driver reads it: sim_profile.c), so programs that link NVML (FBGEMM's fbgemm_gpu_py.so has a
 * DT_NEEDED on it) or open it (PyTorch's device count, c10's driver API) load and get consistent
 * answers. Every pair of devices is P2P-capable (as cuDeviceCanAccessPeer says: sim_peer.c); link-level
 * NvLink queries are "not supported"; no process runs. */
#include <stdio.h>
#include <stdlib.h>
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

#define MAX_DEVICES 64 /* as SIM_MAX_DEVICES */
struct sim_nvml_device { unsigned index; };
static struct sim_nvml_device g_devs[MAX_DEVICES];
static unsigned g_ndev = 8;
static int g_inits; /* nvmlInit / nvmlShutdown are reference counted */

__attribute__((constructor)) static void nvml_load(void) {
    const char *v = getenv("UVMSIM_DEVICES"); /* the driver says when it is not understood */
    char *end;
    long n = v && *v ? strtol(v, &end, 10) : 8;
    g_ndev = v && *v && *end == '\0' && n >= 1 && n <= MAX_DEVICES ? (unsigned)n : 8;
    for (unsigned i = 0; i < MAX_DEVICES; i++) g_devs[i].index = i;
}

/* The same devices the simulated driver describes (sim_device.c, sim_runtime.c): device i on PCI
 * 0000:(i+1):00.0, an H200's PCI device id, the UUID whose bytes cudaGetDeviceProperties reports
 * ("uvmchunk-sim-gpu", its last byte plus i). */
static const char g_uuid0[] = "GPU-75766d63-6875-6e6b-2d73-696d2d677075";
static const char g_name[] = "uvmchunk simulated GPU";
static void uuid_of(unsigned i, char out[sizeof g_uuid0]) {
    memcpy(out, g_uuid0, sizeof g_uuid0);
    snprintf(out + sizeof g_uuid0 - 3, 3, "%02x", 0x75 + i);
}

#define NEED_INIT()                                                                                    \
    do {                                                                                               \
        if (g_inits <= 0) return NVML_ERROR_UNINITIALIZED;                                             \
    } while (0)
#define NEED_DEV(d)                                                                                    \
    do {                                                                                               \
        NEED_INIT();                                                                                   \
        if ((d) < g_devs || (d) >= g_devs + g_ndev) return NVML_ERROR_INVALID_ARGUMENT;                \
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

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) { NEED_INIT(); if (!n) return NVML_ERROR_INVALID_ARGUMENT; *n = g_ndev; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *n) { return nvmlDeviceGetCount_v2(n); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
    NEED_INIT();
    if (!d || i >= g_ndev) return NVML_ERROR_INVALID_ARGUMENT;
    *d = &g_devs[i];
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d) { return nvmlDeviceGetHandleByIndex_v2(i, d); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d) {
    NEED_INIT();
    if (!uuid || !d) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < g_ndev; i++) {
        char u[sizeof g_uuid0];
        uuid_of(i, u);
        if (!strcmp(uuid, u)) { *d = &g_devs[i]; return NVML_SUCCESS; }
    }
    return NVML_ERROR_NOT_FOUND;
}
/* "00000000:01:00.0" (NVML's form) or the runtime's "0000:01:00.0", any case; bus i+1 is device i */
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *id, nvmlDevice_t *d) {
    NEED_INIT();
    if (!id || !d) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned dom = 1, bus = 0, dev = 1, fn = 1;
    if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4 || dom || bus < 1 || bus > g_ndev || dev || fn) return NVML_ERROR_NOT_FOUND;
    *d = &g_devs[bus - 1];
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *id, nvmlDevice_t *d) { return nvmlDeviceGetHandleByPciBusId_v2(id, d); }
EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *i) { NEED_DEV(d); if (!i) return NVML_ERROR_INVALID_ARGUMENT; *i = d->index; return NVML_SUCCESS; }
/* NVML's string getters: the whole string with its NUL, or INSUFFICIENT_SIZE. */
static nvmlReturn_t copy_string(char *s, unsigned int n, const char *v, size_t size) {
    if (!s) return NVML_ERROR_INVALID_ARGUMENT;
    if (n < size) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(s, v, size);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *s, unsigned int n) {
    NEED_DEV(d);
    char u[sizeof g_uuid0];
    uuid_of(d->index, u);
    return copy_string(s, n, u, sizeof u);
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
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02x:00.0", d->index + 1);
    snprintf(p->busId, sizeof p->busId, "00000000:%02x:00.0", d->index + 1);
    p->bus = d->index + 1;
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

/* Link-level NvLink queries are "not supported" (no link topology is modelled); P2P status below. */
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
    *status = a == b ? 4 : 0; /* NVML_P2P_STATUS_NOT_SUPPORTED for itself, else NVML_P2P_STATUS_OK */
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
