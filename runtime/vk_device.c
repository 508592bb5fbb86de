/* vk_device: instance, device choice, capability record, context lifetime,
 * VkResult mapping, the on-disk pipeline cache and the cache folder. */
#define _GNU_SOURCE /* dl_iterate_phdr, RTLD_NODELETE */
#include "vk_internal.h"

#include "hs_shaders.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STBDS_NO_SHORT_NAMES
#include "stb_ds.h"

const char *hs_vk_result_string(VkResult r) {
    switch (r) {
#define C(x)                                                                                       \
    case x: return #x;
        C(VK_SUCCESS) C(VK_NOT_READY) C(VK_TIMEOUT) C(VK_INCOMPLETE)
        C(VK_ERROR_OUT_OF_HOST_MEMORY) C(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        C(VK_ERROR_INITIALIZATION_FAILED) C(VK_ERROR_DEVICE_LOST) C(VK_ERROR_MEMORY_MAP_FAILED)
        C(VK_ERROR_LAYER_NOT_PRESENT) C(VK_ERROR_EXTENSION_NOT_PRESENT)
        C(VK_ERROR_FEATURE_NOT_PRESENT) C(VK_ERROR_INCOMPATIBLE_DRIVER) C(VK_ERROR_TOO_MANY_OBJECTS)
        C(VK_ERROR_FORMAT_NOT_SUPPORTED) C(VK_ERROR_FRAGMENTED_POOL) C(VK_ERROR_OUT_OF_POOL_MEMORY)
        C(VK_ERROR_INVALID_SHADER_NV) C(VK_ERROR_FRAGMENTATION) C(VK_ERROR_UNKNOWN)
#undef C
    default: return "VK_ERROR_(unlisted)";
    }
}

hs_status hs_vk_result(VkResult r, const char *call, const char *file, int line, const char *detail) {
    hs_status st;
    switch (r) {
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: st = HS_ERR_VK_OUT_OF_DEVICE_MEMORY; break;
    case VK_ERROR_OUT_OF_HOST_MEMORY: st = HS_ERR_VK_OUT_OF_HOST_MEMORY; break;
    case VK_ERROR_DEVICE_LOST: st = HS_ERR_VK_DEVICE_LOST; break;
    case VK_ERROR_LAYER_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_FORMAT_NOT_SUPPORTED: st = HS_ERR_VK_UNSUPPORTED; break;
    case VK_ERROR_INITIALIZATION_FAILED: st = HS_ERR_VK_INIT; break;
    default: st = HS_ERR_VK_OTHER; break;
    }
    /* Keep only the function name of the call expression. */
    char fn[64];
    size_t n = strcspn(call, "(");
    if (n >= sizeof fn) n = sizeof fn - 1;
    memcpy(fn, call, n);
    fn[n] = '\0';
    if (detail && *detail)
        return hs_error_set(st, file, line, "%s: %s (%s)", fn, hs_vk_result_string(r), detail);
    return hs_error_set(st, file, line, "%s: %s", fn, hs_vk_result_string(r));
}

const char *hs_vk_vendor_name(uint32_t id) {
    switch (id) {
    case 0x10DE: return "NVIDIA";
    case 0x1002: return "AMD";
    case 0x8086: return "Intel";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x1010: return "ImgTec";
    case 0x106B: return "Apple";
    case 0x10005: return "Mesa";
    default: return "unknown";
    }
}

static bool env_flag(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static bool has_ext(const VkExtensionProperties *exts, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(exts[i].extensionName, name)) return true;
    return false;
}

/* Feature structs probed on every device and, where wanted, enabled. */
typedef struct feature_chain {
    VkPhysicalDeviceFeatures2 f2;
    VkPhysicalDevice16BitStorageFeatures s16;
    VkPhysicalDevice8BitStorageFeatures s8;
    VkPhysicalDeviceShaderFloat16Int8Features f16i8;
    VkPhysicalDeviceSubgroupSizeControlFeatures ssc;
    VkPhysicalDeviceShaderIntegerDotProductFeatures idot;
    bool has_s8, has_f16i8, has_ssc, has_idot, has_coopmat;
} feature_chain;

/* Links the structs whose extension (or core version) the device has. */
static void chain_features(feature_chain *fc, uint32_t api, const VkExtensionProperties *exts,
                           uint32_t n_ext) {
    memset(fc, 0, sizeof *fc);
    fc->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    fc->s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
    fc->s8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
    fc->f16i8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
    fc->ssc.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
    fc->idot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
    fc->has_s8 = api >= VK_API_VERSION_1_2 || has_ext(exts, n_ext, "VK_KHR_8bit_storage");
    fc->has_f16i8 = api >= VK_API_VERSION_1_2 || has_ext(exts, n_ext, "VK_KHR_shader_float16_int8");
    fc->has_ssc = api >= VK_API_VERSION_1_3 || has_ext(exts, n_ext, "VK_EXT_subgroup_size_control");
    fc->has_idot =
        api >= VK_API_VERSION_1_3 || has_ext(exts, n_ext, "VK_KHR_shader_integer_dot_product");
    fc->has_coopmat = has_ext(exts, n_ext, "VK_KHR_cooperative_matrix");
    void **next = &fc->f2.pNext;
    *next = &fc->s16;
    next = &fc->s16.pNext;
#define LINK(cond, s)                                                                              \
    if (cond) {                                                                                    \
        *next = &(s);                                                                              \
        next = &(s).pNext;                                                                         \
    }
    LINK(fc->has_s8, fc->s8)
    LINK(fc->has_f16i8, fc->f16i8)
    LINK(fc->has_ssc, fc->ssc)
    LINK(fc->has_idot, fc->idot)
#undef LINK
}

/* The value of "key : value" in a /proc/cpuinfo line when its key is exactly key (so "model" is not
 * "model name"), without the newline; NULL otherwise. */
static const char *cpuinfo_value(char *line, const char *key) {
    const size_t k = strlen(key);
    if (strncmp(line, key, k) != 0) return NULL;
    const char *p = line + k;
    while (*p == ' ' || *p == '\t') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ' || *p == '\t') p++;
    line[strcspn(line, "\n")] = 0;
    return p;
}

void hs_vk_host_cpu_parse(FILE *cpuinfo, long cpus, char *buf, size_t n) {
    char line[512], model[256] = "", family[32] = "", number[32] = "", impl[32] = "", part[32] = "";
    buf[0] = 0;
    /* Each key's first value: the first processor's (every processor of a machine or VM is the same one here). */
    while (cpuinfo && fgets(line, sizeof line, cpuinfo)) {
        const char *v;
        if (!model[0] && (v = cpuinfo_value(line, "model name"))) snprintf(model, sizeof model, "%s", v);
        else if (!family[0] && (v = cpuinfo_value(line, "cpu family"))) snprintf(family, sizeof family, "%s", v);
        else if (!number[0] && (v = cpuinfo_value(line, "model"))) snprintf(number, sizeof number, "%s", v);
        else if (!impl[0] && (v = cpuinfo_value(line, "CPU implementer"))) snprintf(impl, sizeof impl, "%s", v);
        else if (!part[0] && (v = cpuinfo_value(line, "CPU part"))) snprintf(part, sizeof part, "%s", v);
    }
    /* A VM's model name is often only the brand ("AMD EPYC" on Zen 3, 4 and 5 alike), so x86's family and
     * model numbers and Arm's implementer and part are part of the name too. */
    char id[96] = "";
    if (family[0] && number[0]) snprintf(id, sizeof id, " (family %s, model %s)", family, number);
    else if (impl[0] && part[0]) snprintf(id, sizeof id, " (implementer %s, part %s)", impl, part);
    if (model[0] || id[0] || cpus > 0)
        snprintf(buf, n, "%s%s x%ld", model[0] ? model : "cpu", id, cpus > 0 ? cpus : 1L);
}

/* hs_vk_caps.host_cpu of a CPU device (lavapipe), from /proc/cpuinfo (hs_vk_host_cpu_parse; HS_HOST_CPU, when
 * set, instead); "" where nothing is known. */
static void host_cpu(char *buf, size_t n) {
    const char *env = getenv("HS_HOST_CPU"); /* for tests: as if the processor were this one */
    if (env && env[0]) {
        snprintf(buf, n, "%s", env);
        return;
    }
    FILE *f = fopen("/proc/cpuinfo", "r");
    hs_vk_host_cpu_parse(f, sysconf(_SC_NPROCESSORS_ONLN), buf, n);
    if (f) fclose(f);
}

/* Fills caps for one physical device; applies HS_VK_DISABLE_* and HS_VK_MAX_BUFFER_RANGE. */
static void probe_caps(VkPhysicalDevice pd, uint32_t index, uint32_t instance_api, hs_vk_caps *c,
                       feature_chain *fc, uint32_t *queue_family) {
    memset(c, 0, sizeof *c);
    c->index = index;
    uint32_t n_ext = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n_ext, NULL);
    VkExtensionProperties *exts = calloc(n_ext ? n_ext : 1, sizeof *exts);
    if (exts) vkEnumerateDeviceExtensionProperties(pd, NULL, &n_ext, exts);
    else n_ext = 0;

    VkPhysicalDeviceProperties base;
    vkGetPhysicalDeviceProperties(pd, &base);
    uint32_t api = base.apiVersion < instance_api ? base.apiVersion : instance_api;

    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    VkPhysicalDeviceIDProperties idp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties sgp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceSubgroupSizeControlProperties sscp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT hip = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
    p2.pNext = &idp;
    idp.pNext = &sgp;
    void **next = &sgp.pNext;
    const bool has_hip = has_ext(exts, n_ext, "VK_EXT_external_memory_host");
    if (has_hip) {
        *next = &hip;
        next = &hip.pNext;
    }
    bool has_drv = api >= VK_API_VERSION_1_2 || has_ext(exts, n_ext, "VK_KHR_driver_properties");
    if (has_drv) {
        *next = &drv;
        next = &drv.pNext;
    }
    chain_features(fc, api, exts, n_ext);
    if (fc->has_ssc) *next = &sscp;
    vkGetPhysicalDeviceProperties2(pd, &p2);
    vkGetPhysicalDeviceFeatures2(pd, &fc->f2);

    const VkPhysicalDeviceProperties *p = &p2.properties;
    snprintf(c->device_name, sizeof c->device_name, "%s", p->deviceName);
    if (has_drv) {
        snprintf(c->driver_name, sizeof c->driver_name, "%s", drv.driverName);
        snprintf(c->driver_info, sizeof c->driver_info, "%s", drv.driverInfo);
    }
    c->vendor_id = p->vendorID;
    c->host_import_align = has_hip ? hip.minImportedHostPointerAlignment : 0;
    c->parts = 1;
    c->device_id = p->deviceID;
    c->driver_version = p->driverVersion;
    c->api_version = api;
    c->type = p->deviceType;
    if (c->type == VK_PHYSICAL_DEVICE_TYPE_CPU) host_cpu(c->host_cpu, sizeof c->host_cpu);
    memcpy(c->device_uuid, idp.deviceUUID, VK_UUID_SIZE);
    memcpy(c->pipeline_cache_uuid, p->pipelineCacheUUID, VK_UUID_SIZE);

    c->subgroup_size = sgp.subgroupSize;
    c->subgroup_min = c->subgroup_max = sgp.subgroupSize;
    const VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT |
                                        VK_SUBGROUP_FEATURE_ARITHMETIC_BIT |
                                        VK_SUBGROUP_FEATURE_SHUFFLE_BIT | VK_SUBGROUP_FEATURE_BALLOT_BIT;
    c->subgroup_ops = (sgp.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                      (sgp.supportedOperations & need) == need;
    c->subgroup_size_control = fc->has_ssc && fc->ssc.subgroupSizeControl &&
                               fc->ssc.computeFullSubgroups &&
                               (sscp.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
    if (c->subgroup_size_control) {
        c->subgroup_min = sscp.minSubgroupSize;
        c->subgroup_max = sscp.maxSubgroupSize;
    }
    c->fp16 = fc->has_f16i8 && fc->f16i8.shaderFloat16;
    c->storage16 = fc->s16.storageBuffer16BitAccess;
    c->storage8 = fc->has_s8 && fc->s8.storageBuffer8BitAccess && fc->has_f16i8 && fc->f16i8.shaderInt8;
    c->int8_dot = fc->has_idot && fc->idot.shaderIntegerDotProduct;
    c->coopmat = fc->has_coopmat;

    const VkPhysicalDeviceLimits *l = &p->limits;
    c->max_storage_buffer_range = l->maxStorageBufferRange;
    c->min_storage_offset_align = l->minStorageBufferOffsetAlignment;
    c->min_texel_offset_align = l->minTexelBufferOffsetAlignment;
    c->max_uniform_range = l->maxUniformBufferRange;
    c->min_uniform_offset_align = l->minUniformBufferOffsetAlignment;
    VkFormatProperties fp;
    vkGetPhysicalDeviceFormatProperties(pd, VK_FORMAT_R32G32B32A32_UINT, &fp);
    c->max_texel_elements =
        (fp.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) ? l->maxTexelBufferElements : 0;
    c->max_storage_buffers = l->maxPerStageDescriptorStorageBuffers;
    c->max_shared_memory = l->maxComputeSharedMemorySize;
    c->max_push_constants = l->maxPushConstantsSize;
    c->max_wg_invocations = l->maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; i++) {
        c->max_wg_size[i] = l->maxComputeWorkGroupSize[i];
        c->max_wg_count[i] = l->maxComputeWorkGroupCount[i];
    }
    c->max_alloc = 1ull << 30; /* Vulkan 1.1 guarantees at least 1 GiB */
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceProperties2 p2b = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
    vkGetPhysicalDeviceProperties2(pd, &p2b);
    if (m3.maxMemoryAllocationSize) c->max_alloc = m3.maxMemoryAllocationSize;
    c->timestamp_period_ns = l->timestampPeriod;

    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    for (uint32_t t = 0; t < mp.memoryTypeCount; t++) {
        VkMemoryPropertyFlags f = mp.memoryTypes[t].propertyFlags;
        uint64_t heap = mp.memoryHeaps[mp.memoryTypes[t].heapIndex].size;
        if (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) {
            if (heap > c->device_local_bytes) c->device_local_bytes = heap;
            if ((f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && heap > c->host_visible_device_local_bytes)
                c->host_visible_device_local_bytes = heap;
        }
    }
    c->unified_memory = c->host_visible_device_local_bytes > 0 &&
                        c->host_visible_device_local_bytes >= c->device_local_bytes;
    c->coherent = true;
    for (uint32_t t = 0; t < mp.memoryTypeCount; t++) {
        VkMemoryPropertyFlags f = mp.memoryTypes[t].propertyFlags;
        if ((f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && !(f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
            c->coherent = false;
    }
    c->non_coherent_atom_size = l->nonCoherentAtomSize ? l->nonCoherentAtomSize : 1;

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
    VkQueueFamilyProperties *qf = calloc(nq ? nq : 1, sizeof *qf);
    *queue_family = UINT32_MAX;
    if (qf) {
        vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf);
        /* Prefer a compute queue without graphics (async compute), else any with compute. */
        for (int pass = 0; pass < 2 && *queue_family == UINT32_MAX; pass++)
            for (uint32_t i = 0; i < nq; i++) {
                bool comp = qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT;
                bool gfx = qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT;
                if (comp && (pass == 1 || !gfx)) {
                    *queue_family = i;
                    c->timestamps = qf[i].timestampValidBits > 0 && l->timestampPeriod > 0;
                    break;
                }
            }
        free(qf);
    }

    /* Forced fallbacks. */
    if (env_flag("HS_VK_DISABLE_F16")) c->fp16 = false;
    if (env_flag("HS_VK_DISABLE_16BIT_STORAGE")) c->storage16 = false;
    if (env_flag("HS_VK_DISABLE_8BIT_STORAGE")) c->storage8 = false;
    if (env_flag("HS_VK_DISABLE_INT8_DOT")) c->int8_dot = false;
    if (env_flag("HS_VK_DISABLE_COOPMAT")) c->coopmat = false;
    if (env_flag("HS_VK_DISABLE_TEXEL_BUFFER")) c->max_texel_elements = 0;
    if (env_flag("HS_VK_DISABLE_SUBGROUP_OPS")) c->subgroup_ops = false;
    if (env_flag("HS_VK_DISABLE_SUBGROUP_SIZE_CONTROL") || !c->subgroup_ops) {
        c->subgroup_size_control = false;
        c->subgroup_min = c->subgroup_max = c->subgroup_size;
    }
    const char *mbr = getenv("HS_VK_MAX_BUFFER_RANGE");
    if (mbr && *mbr) {
        unsigned long long v = strtoull(mbr, NULL, 0);
        if (v >= 256 && v < c->max_storage_buffer_range) c->max_storage_buffer_range = v & ~255ull;
    }
    if (env_flag("HS_VK_FORCE_NONCOHERENT")) {
        /* Emulated non-coherent memory (vk_buffer.c), with an atom of at least
         * 256 bytes so that the widening of ranges is exercised beyond
         * lavapipe's 64. Atoms are powers of two, so doubling keeps the
         * emulated one a multiple of the real one: every range widened to it
         * is also valid for the real device. */
        c->coherent = false;
        while (c->non_coherent_atom_size < 256) c->non_coherent_atom_size *= 2;
    }
    const char *msb = getenv("HS_VK_MAX_STORAGE_BUFFERS");
    if (msb && *msb) {
        /* Vulkan guarantees at least 4 per stage. */
        unsigned long long v = strtoull(msb, NULL, 0);
        if (v >= 4 && v < c->max_storage_buffers) c->max_storage_buffers = (uint32_t)v;
    }
    free(exts);
}

static int pin_one(struct dl_phdr_info *info, size_t size, void *user) {
    (void)size;
    (void)user;
    /* RTLD_NOLOAD: only an object that is already loaded; RTLD_NODELETE: never
     * unmap it. The handle is not closed on purpose. */
    if (info->dlpi_name && info->dlpi_name[0]) dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    return 0;
}

/* Keeps every shared object loaded so far -- the Vulkan drivers and layers the
 * loader has just opened, and what they pulled in -- for the life of the
 * process. The loader unloads them when the last instance is destroyed, and
 * drivers keep one-time allocations in their globals (Mesa's CPU topology
 * table, util_cpu_caps.L3_affinity_mask, 128 bytes from realloc in
 * libvulkan_lvp.so): once the library is unmapped, the only pointer to such a
 * block is gone and LeakSanitizer reports it as a leak "in <unknown module>",
 * which no suppression can name. Kept loaded, the block stays reachable. A
 * process that creates several contexts also stops reloading the driver (and
 * lavapipe's LLVM) each time. */
static void pin_loaded_libraries(void) { dl_iterate_phdr(pin_one, NULL); }

static VkInstance create_instance(bool want_validation, bool *validation_on, uint32_t *api) {
    *api = VK_API_VERSION_1_1;
    PFN_vkEnumerateInstanceVersion eiv =
        (PFN_vkEnumerateInstanceVersion)vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
    if (eiv) {
        uint32_t v = 0;
        if (eiv(&v) == VK_SUCCESS && v > *api) *api = v >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : v;
    }
    const char *layers[1];
    uint32_t n_layers = 0;
    const char *exts[2];
    uint32_t n_exts = 0;
    *validation_on = false;
    if (want_validation) {
        uint32_t n = 0;
        vkEnumerateInstanceLayerProperties(&n, NULL);
        VkLayerProperties *lp = calloc(n ? n : 1, sizeof *lp);
        if (lp) {
            vkEnumerateInstanceLayerProperties(&n, lp);
            for (uint32_t i = 0; i < n; i++)
                if (!strcmp(lp[i].layerName, "VK_LAYER_KHRONOS_validation")) *validation_on = true;
            free(lp);
        }
        if (*validation_on) {
            layers[n_layers++] = "VK_LAYER_KHRONOS_validation";
            exts[n_exts++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
        }
    }
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "heterospec",
                             .pEngineName = "heterospec",
                             .apiVersion = *api};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app,
                               .enabledLayerCount = n_layers,
                               .ppEnabledLayerNames = layers,
                               .enabledExtensionCount = n_exts,
                               .ppEnabledExtensionNames = exts};
    VkInstance inst = VK_NULL_HANDLE;
    if (vkCreateInstance(&ci, NULL, &inst) != VK_SUCCESS) return VK_NULL_HANDLE;
    pin_loaded_libraries();
    return inst;
}

static int type_rank(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
    }
}

static const char *type_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

typedef struct cpu_sample cpu_sample;
/* Whether the environment leaves split execution's part count to a sample of the idle CPUs: no
 * HS_VK_SPLIT, no LP_NUM_THREADS, no switch turning split execution off. */
static bool split_sampled(void) {
    const char *want = getenv("HS_VK_SPLIT");
    return !(want && *want) && !getenv("LP_NUM_THREADS") && !env_flag("HS_VK_DISABLE_SPLIT") &&
           !env_flag("HS_VK_FORCE_NONCOHERENT");
}

/* A context's split choice, carried over the restart of its creation (LP_NUM_THREADS set to 0 then). */
typedef struct split_choice {
    long parts;
    uint32_t busy;
} split_choice;
static uint32_t split_parts(const hs_vk_caps *c, cpu_sample *sample, const split_choice *carry, bool *restart,
                            uint32_t *busy);

hs_status hs_vk_enumerate(hs_vk_caps **out, uint32_t *count) {
    *out = NULL;
    *count = 0;
    bool vo;
    uint32_t api;
    VkInstance inst = create_instance(false, &vo, &api);
    if (!inst) return HS_FAIL(HS_ERR_VK_INIT, "vkCreateInstance failed: is a Vulkan driver installed?");
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(inst, &n, NULL);
    VkPhysicalDevice *pds = calloc(n ? n : 1, sizeof *pds);
    hs_vk_caps *caps = calloc(n ? n : 1, sizeof *caps);
    if (!pds || !caps) {
        free(pds);
        free(caps);
        vkDestroyInstance(inst, NULL);
        return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_vk_enumerate: out of memory");
    }
    vkEnumeratePhysicalDevices(inst, &n, pds);
    for (uint32_t i = 0; i < n; i++) {
        feature_chain fc;
        uint32_t qf;
        probe_caps(pds[i], i, api, &caps[i], &fc, &qf);
        bool restart;
        uint32_t busy;
        caps[i].parts = split_parts(&caps[i], NULL, NULL, &restart, &busy); /* what a context would use, idle */
    }
    free(pds);
    vkDestroyInstance(inst, NULL);
    *out = caps;
    *count = n;
    return HS_OK;
}

void hs_vk_caps_line(const hs_vk_caps *c, char *buf, size_t n) {
    snprintf(buf, n,
             "%u = %s (%s) | %s | %s | vulkan %u.%u.%u | uma: %d | fp16: %d | storage16: %d | "
             "subgroup: %u (%u-%u)%s | shared memory: %u | int dot: %d | coopmat: %d | "
             "max buffer range: %llu MiB | device memory: %llu MiB | coherent: %d (atom %llu)",
             c->index, c->device_name, c->driver_name[0] ? c->driver_name : "?",
             hs_vk_vendor_name(c->vendor_id), type_name(c->type), VK_API_VERSION_MAJOR(c->api_version),
             VK_API_VERSION_MINOR(c->api_version), VK_API_VERSION_PATCH(c->api_version),
             c->unified_memory, c->fp16, c->storage16, c->subgroup_size, c->subgroup_min,
             c->subgroup_max, c->subgroup_ops ? "" : " (ops off)", c->max_shared_memory, c->int8_dot,
             c->coopmat, (unsigned long long)(c->max_storage_buffer_range >> 20),
             (unsigned long long)(c->device_local_bytes >> 20), c->coherent,
             (unsigned long long)c->non_coherent_atom_size);
    const size_t len = strlen(buf);
    if (c->parts > 1 && len < n)
        snprintf(buf + len, n - len, c->parts_busy ? " | split: %u (%u busy CPUs left out)" : " | split: %u",
                 c->parts, c->parts_busy);
    else if (c->parts_busy && len < n)
        snprintf(buf + len, n - len, " | split: off (%u of the CPUs busy; HS_VK_SPLIT=N forces it)", c->parts_busy);
    const size_t end = strlen(buf);
    if (c->host_cpu[0] && end < n) snprintf(buf + end, n - end, " | host: %s", c->host_cpu);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL debug_cb(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                               VkDebugUtilsMessageTypeFlagsEXT type,
                                               const VkDebugUtilsMessengerCallbackDataEXT *data,
                                               void *user) {
    hs_vk_ctx *ctx = user;
    if (type == VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT) return VK_FALSE; /* loader chatter */
    if (sev >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        __atomic_fetch_add(&ctx->validation_count, 1u, __ATOMIC_RELAXED); /* pipeline parts report from threads */
        fprintf(stderr, "heterospec: validation: %s\n", data->pMessage);
    }
    return VK_FALSE;
}

/* The validation layer's messages on instance -> debug_cb (counted in ctx). */
static hs_status create_messenger(hs_vk_ctx *ctx, VkInstance instance, VkDebugUtilsMessengerEXT *out) {
    hs_status st = HS_OK;
    PFN_vkCreateDebugUtilsMessengerEXT cm =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT");
    VkDebugUtilsMessengerCreateInfoEXT mi = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = debug_cb,
        .pUserData = ctx};
    if (cm) HS_VK_CALL(cm(instance, &mi, NULL, out), NULL);
fail:
    return st;
}

static void destroy_messenger(VkInstance instance, VkDebugUtilsMessengerEXT m) {
    if (!m) return;
    PFN_vkDestroyDebugUtilsMessengerEXT dm =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT");
    if (dm) dm(instance, m, NULL);
}

hs_status hs_mkdir_p(const char *path) {
    char tmp[1400];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(tmp, 0755);
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return HS_FAIL(HS_ERR_IO, "cannot create folder %s: %s", tmp, strerror(errno));
    return HS_OK;
}

hs_status hs_home_dir(char *buf, size_t n) {
    const char *home = getenv("HS_HOME");
    if (home && *home) {
        snprintf(buf, n, "%s", home);
    } else {
        const char *h = getenv("HOME");
        if (!h || !*h) h = "/tmp";
        snprintf(buf, n, "%s/.cache/heterospec", h);
    }
    return hs_mkdir_p(buf);
}

/* Why cache data (VkPipelineCacheHeaderVersionOne: header size, version,
 * vendor, device, pipelineCacheUUID) cannot be this device's, or NULL. */
static const char *pipeline_cache_header_mismatch(const hs_vk_caps *c, const void *data, size_t size) {
    uint32_t h[4];
    if (!data || size < 16 + VK_UUID_SIZE) return "shorter than a pipeline cache header";
    memcpy(h, data, sizeof h);
    if (h[0] < 16 + VK_UUID_SIZE || h[0] > size || h[1] != VK_PIPELINE_CACHE_HEADER_VERSION_ONE)
        return "not a version-one pipeline cache header";
    if (h[2] != c->vendor_id || h[3] != c->device_id) return "made for another vendor or device";
    if (memcmp((const uint8_t *)data + 16, c->pipeline_cache_uuid, VK_UUID_SIZE) != 0)
        return "made by another driver build (pipeline cache UUID)";
    return NULL;
}

static void load_pipeline_cache(hs_vk_ctx *ctx, bool use_disk) {
    void *data = NULL;
    size_t size = 0;
    char dir[900];
    if (use_disk && hs_home_dir(dir, sizeof dir) == HS_OK) {
        char uuid[2 * VK_UUID_SIZE + 1];
        for (uint32_t i = 0; i < VK_UUID_SIZE; i++) sprintf(uuid + 2 * i, "%02x", ctx->caps.device_uuid[i]);
        snprintf(ctx->pipeline_cache_path, sizeof ctx->pipeline_cache_path,
                 "%s/pipelines-%s-%08x.vkcache", dir, uuid, ctx->caps.driver_version);
        ctx->save_pipeline_cache = true;
        FILE *f = fopen(ctx->pipeline_cache_path, "rb");
        if (f) {
            if (fseek(f, 0, SEEK_END) == 0) {
                long len = ftell(f);
                if (len > 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)len))) {
                    size = fread(data, 1, (size_t)len, f);
                    if (size != (size_t)len) size = 0;
                }
            }
            fclose(f);
            const char *why = pipeline_cache_header_mismatch(&ctx->caps, data, size);
            if (why) {
                snprintf(ctx->pipeline_cache_refused, sizeof ctx->pipeline_cache_refused, "%s", why);
                size = 0;
            }
        }
    }
    /* The file name is keyed by device UUID and driver version, and the header
     * was checked above; drivers check it again and ignore data that does not
     * match, so a stale file costs nothing but a recompile. */
    VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                    .initialDataSize = size,
                                    .pInitialData = size ? data : NULL};
    if (vkCreatePipelineCache(ctx->device, &ci, NULL, &ctx->pipeline_cache) != VK_SUCCESS) {
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        if (vkCreatePipelineCache(ctx->device, &ci, NULL, &ctx->pipeline_cache) != VK_SUCCESS)
            ctx->pipeline_cache = VK_NULL_HANDLE;
        if (size) snprintf(ctx->pipeline_cache_refused, sizeof ctx->pipeline_cache_refused, "refused by the driver");
        size = 0;
    }
    ctx->pipeline_cache_loaded = ctx->pipeline_cache ? size : 0;
    free(data);
}

uint64_t hs_vk_pipeline_cache_loaded(const hs_vk_ctx *ctx, const char **path, const char **why) {
    if (path) *path = ctx->pipeline_cache_path;
    if (why) *why = ctx->pipeline_cache_refused;
    return ctx->pipeline_cache_loaded;
}

static void save_pipeline_cache(hs_vk_ctx *ctx) {
    if (!ctx->pipeline_cache || !ctx->save_pipeline_cache) return;
    size_t size = 0;
    if (vkGetPipelineCacheData(ctx->device, ctx->pipeline_cache, &size, NULL) != VK_SUCCESS || !size)
        return;
    void *data = malloc(size);
    if (!data) return;
    if (vkGetPipelineCacheData(ctx->device, ctx->pipeline_cache, &size, data) == VK_SUCCESS) {
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.%d.tmp", ctx->pipeline_cache_path, (int)getpid());
        FILE *f = fopen(tmp, "wb");
        if (f) {
            bool ok = fwrite(data, 1, size, f) == size;
            ok = (fclose(f) == 0) && ok;
            /* rename is atomic: concurrent processes never see a torn file. */
            if (!ok || rename(tmp, ctx->pipeline_cache_path) != 0) remove(tmp);
        }
    }
    free(data);
}

static int pick_device(const hs_vk_caps *caps, uint32_t n, const hs_vk_ctx_options *opt) {
    int idx = opt ? opt->device_index : -1;
    const char *name = opt ? opt->device_name : NULL;
    const char *env = getenv("HS_DEVICE");
    if (idx < 0 && !name && env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0') idx = (int)v;
        else name = env;
    }
    if (idx >= 0) return idx < (int)n ? idx : -2;
    if (name) {
        for (uint32_t i = 0; i < n; i++)
            if (strstr(caps[i].device_name, name) || strstr(caps[i].driver_name, name)) return (int)i;
        return -2;
    }
    int best = -1;
    for (uint32_t i = 0; i < n; i++)
        if (best < 0 || type_rank(caps[i].type) > type_rank(caps[best].type)) best = (int)i;
    return best;
}

int hs_vk_pick_device(const hs_vk_caps *caps, uint32_t n) { return pick_device(caps, n, NULL); }

/* Per CPU of the line "cpuN user nice system idle iowait ..." of /proc/stat:
 * total and idle (idle + iowait) ticks; false when unreadable. */
static bool cpu_ticks(unsigned long long total[CPU_SETSIZE], unsigned long long idle[CPU_SETSIZE]) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return false;
    char line[512];
    bool any = false;
    while (fgets(line, sizeof line, f)) {
        unsigned cpu;
        unsigned long long v[8] = {0};
        if (strncmp(line, "cpu", 3) || line[3] < '0' || line[3] > '9') continue;
        if (sscanf(line + 3, "%u %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1], &v[2], &v[3], &v[4],
                   &v[5], &v[6], &v[7]) < 5 ||
            cpu >= CPU_SETSIZE)
            continue;
        total[cpu] = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
        idle[cpu] = v[3] + v[4];
        any = true;
    }
    fclose(f);
    return any;
}

/* The ticks at the start of hs_vk_ctx_create, so that the sample below
 * covers the instance's creation and the device probes instead of waiting
 * the whole window. */
typedef struct cpu_sample {
    bool ok;
    double t;
    unsigned long long own; /* this process's ticks (utime + stime of /proc/self/stat) */
    unsigned long long total[CPU_SETSIZE], idle[CPU_SETSIZE];
} cpu_sample;

/* utime + stime of this process, in the ticks of /proc/stat; 0 if unreadable. */
static unsigned long long own_ticks(void) {
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return 0;
    char buf[1024];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* after the command name, which may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return 0;
    return ut + st;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void cpu_sample_take(cpu_sample *c) {
    memset(c->total, 0, sizeof c->total);
    c->t = now_s();
    c->own = own_ticks();
    c->ok = cpu_ticks(c->total, c->idle);
}

/* How many of the CPUs in `set` other programs left idle from `first` (taken
 * if not ok) over at least HS_SPLIT_SAMPLE_MS: the CPUs less the busy ticks
 * of the window that were not this process's (its own start-up runs in the
 * window), in CPUs, rounded; -1 when /proc/stat cannot tell.
 * HS_VK_TEST_SPLIT_SAMPLE_MS (tests) widens the window: 50 ms is 5 ticks of
 * a 100 Hz clock, and on a loaded machine one or two ticks of error flip the
 * rounding. */
#define HS_SPLIT_SAMPLE_MS 50
static double split_sample_s(void) {
    const char *t = getenv("HS_VK_TEST_SPLIT_SAMPLE_MS");
    const long ms = t ? strtol(t, NULL, 10) : 0;
    return (double)(ms > 0 && ms <= 5000 ? ms : HS_SPLIT_SAMPLE_MS) * 1e-3;
}
static int idle_cpus(const cpu_set_t *set, cpu_sample *first) {
    unsigned long long *t = calloc(2 * CPU_SETSIZE, sizeof *t); /* t1, i1 */
    if (!t) return -1;
    if (!first->ok) cpu_sample_take(first);
    const unsigned long long *t0 = first->total, *i0 = first->idle;
    unsigned long long *t1 = t, *i1 = t + CPU_SETSIZE;
    int idle = -1;
    if (first->ok) {
        const double wait = first->t + split_sample_s() - now_s();
        if (wait > 0) {
            const struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
            nanosleep(&ts, NULL);
        }
        const unsigned long long own = own_ticks();
        if (cpu_ticks(t1, i1)) {
            unsigned long long total = 0, busy = 0;
            int seen = 0;
            for (int k = 0; k < CPU_SETSIZE; k++) {
                if (!CPU_ISSET(k, set) || t1[k] <= t0[k]) continue;
                seen++;
                total += t1[k] - t0[k];
                busy += (t1[k] - t0[k]) - (i1[k] - i0[k]);
            }
            const unsigned long long mine = own > first->own ? own - first->own : 0;
            busy = busy > mine ? busy - mine : 0;
            if (seen && total) {
                const double per_cpu = (double)total / seen;
                const int busy_cpus = (int)((double)busy / per_cpu + 0.5);
                idle = seen > busy_cpus ? seen - busy_cpus : 0;
            }
        }
    }
    free(t);
    return idle;
}

/* How many parts split execution would use on device c (1: off), and in
 * *restart whether LP_NUM_THREADS must first be set to 0 (read by lavapipe
 * when an instance enumerates it). With `sample` (a context being made, its
 * first choice in the process: LP_NUM_THREADS not set yet), only as many CPUs
 * count as other programs left idle (idle_cpus), and *busy says how many did
 * not: a part on a CPU that another program keeps busy gets about half its time
 * slices while the other parts spin at every barrier waiting for it (lavapipe's
 * own threads share out a dispatch's workgroups as they come free instead).
 * `carry`: the choice made before a restart, kept. */
static uint32_t split_parts(const hs_vk_caps *c, cpu_sample *sample, const split_choice *carry, bool *restart,
                            uint32_t *busy) {
    /* sample: non-NULL only where split_sampled() held at the creation's start */
    *restart = false;
    *busy = 0;
    if (c->type != VK_PHYSICAL_DEVICE_TYPE_CPU || strcmp(c->driver_name, "llvmpipe") || !c->host_import_align ||
        env_flag("HS_VK_DISABLE_SPLIT") || env_flag("HS_VK_FORCE_NONCOHERENT"))
        return 1;
    /* The cores this process may run on (taskset, cpusets), not the machine's. */
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        n = CPU_COUNT(&set);
    } else {
        CPU_ZERO(&set);
        for (long k = 0; k < n && k < CPU_SETSIZE; k++) CPU_SET(k, &set);
    }
    const char *want = getenv("HS_VK_SPLIT");
    const char *lp = getenv("LP_NUM_THREADS");
    if (want && *want) {
        n = strtol(want, NULL, 10);
    } else if (carry) {
        n = carry->parts;
        *busy = carry->busy;
    } else if (sample && n >= 2) {
        const int idle = idle_cpus(&set, sample);
        if (idle >= 0 && idle < n) {
            *busy = (uint32_t)(n - idle);
            n = idle;
        }
    }
    if (n < 2) return 1;
    if (n > HS_VK_MAX_PARTS) n = HS_VK_MAX_PARTS;
    if (lp && strcmp(lp, "0")) return 1; /* the user chose the driver's threads */
    *restart = !lp;
    return (uint32_t)n;
}

/* Parts 1 .. n_parts - 1: devices like part 0 (same create info). */
static hs_status create_parts(hs_vk_ctx *ctx, const VkDeviceCreateInfo *dci, bool validation) {
    hs_status st = HS_OK;
    for (uint32_t k = 1; k < ctx->n_parts; k++) {
        hs_vk_part *pt = &ctx->part[k];
        bool val_on;
        uint32_t api, n = 0;
        pt->instance = create_instance(validation, &val_on, &api);
        if (!pt->instance) {
            st = HS_FAIL(HS_ERR_VK_INIT, "split execution: vkCreateInstance failed for a part");
            goto fail;
        }
        if (val_on) HS_TRY(create_messenger(ctx, pt->instance, &pt->messenger));
        /* The same physical device: the index and UUID of part 0's. */
        HS_VK_CALL(vkEnumeratePhysicalDevices(pt->instance, &n, NULL), NULL);
        VkPhysicalDevice pds[16];
        if (n > 16) n = 16;
        HS_VK_CALL(vkEnumeratePhysicalDevices(pt->instance, &n, pds), NULL);
        VkPhysicalDeviceIDProperties idp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &idp};
        if (ctx->caps.index < n) vkGetPhysicalDeviceProperties2(pds[ctx->caps.index], &p2);
        if (ctx->caps.index >= n || memcmp(idp.deviceUUID, ctx->caps.device_uuid, VK_UUID_SIZE)) {
            st = HS_FAIL(HS_ERR_VK_INIT, "split execution: a part's instance lists the devices differently");
            goto fail;
        }
        HS_VK_CALL(vkCreateDevice(pds[ctx->caps.index], dci, NULL, &pt->device), "split execution: a part's device");
        vkGetDeviceQueue(pt->device, ctx->queue_family, 0, &pt->queue);
        VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                       .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                       .queueFamilyIndex = ctx->queue_family};
        HS_VK_CALL(vkCreateCommandPool(pt->device, &pci, NULL, &pt->cmd_pool), NULL);
    }
    ctx->host_pointer_props = (PFN_vkGetMemoryHostPointerPropertiesEXT)vkGetInstanceProcAddr(
        ctx->instance, "vkGetMemoryHostPointerPropertiesEXT");
    if (!ctx->host_pointer_props) {
        st = HS_FAIL(HS_ERR_VK_UNSUPPORTED, "split execution: no vkGetMemoryHostPointerPropertiesEXT");
        goto fail;
    }
fail:
    return st;
}

/* The barrier counter and the spin dispatch of split execution, kept out of
 * the live-object list (the context's own). */
static hs_status create_sync(hs_vk_ctx *ctx) {
    hs_status st = HS_OK;
    HS_TRY(hs_vk_buffer_create(ctx, 64, HS_MEM_DEVICE, &ctx->sync));
    hs_vk_obj_unlink(ctx, &ctx->sync->obj);
    uint32_t *sync = ctx->sync->host; /* the spin's indirect counts: x per submit (vk_seq.c), y = z = 1 */
    sync[HS_VK_SYNC_GROUPS + 1] = sync[HS_VK_SYNC_GROUPS + 2] = 1;
    /* A workgroup fills llvmpipe's vector (shaders/spin.comp); at least 8 lanes. */
    const uint32_t lanes = ctx->caps.subgroup_size > 8 ? ctx->caps.subgroup_size : 8;
    hs_vk_pipeline_desc d = {.name = "split barrier",
                             .code = hs_spv_spin,
                             .code_size = hs_spv_spin_size,
                             .n_bindings = 1,
                             .write_mask = 1,
                             .push_size = 4,
                             .n_spec = 1,
                             .spec = {lanes},
                             .wg_size = {lanes, 1, 1}};
    HS_TRY(hs_vk_pipeline_create(ctx, &d, &ctx->spin));
    hs_vk_obj_unlink(ctx, &ctx->spin->obj);
fail:
    return st;
}

static hs_status ctx_create(const hs_vk_ctx_options *opt, hs_vk_ctx **out, const split_choice *carry) {
    hs_status st = HS_OK;
    VkPhysicalDevice *pds = NULL;
    hs_vk_caps *all = NULL;
    feature_chain *fcs = NULL;
    uint32_t *qfs = NULL;
    *out = NULL;
    /* Split execution counts the CPUs left idle from here on (split_parts), on a first choice the
     * environment leaves to it. */
    cpu_sample *sample = NULL;
    if (!carry && split_sampled()) {
        sample = calloc(1, sizeof *sample);
        if (!sample) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_vk_ctx_create: out of memory");
        cpu_sample_take(sample);
    }
    hs_vk_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        free(sample);
        return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_vk_ctx_create: out of memory");
    }
    ctx->live.prev = ctx->live.next = &ctx->live;
    ctx->next_serial = 1;

    int val = opt ? opt->validation : -1;
    bool want_val = val < 0 ? env_flag("HS_VK_VALIDATION") : val > 0;
    bool val_on;
    uint32_t api;
    ctx->instance = create_instance(want_val, &val_on, &api);
    if (!ctx->instance) {
        st = HS_FAIL(HS_ERR_VK_INIT, "vkCreateInstance failed: is a Vulkan driver installed?");
        goto fail;
    }
    if (want_val && !val_on) {
        st = HS_FAIL(HS_ERR_VK_UNSUPPORTED,
                     "validation requested but VK_LAYER_KHRONOS_validation is not installed");
        goto fail;
    }
    if (val_on) HS_TRY(create_messenger(ctx, ctx->instance, &ctx->messenger));

    uint32_t n = 0;
    HS_VK_CALL(vkEnumeratePhysicalDevices(ctx->instance, &n, NULL), NULL);
    if (n == 0) {
        st = HS_FAIL(HS_ERR_VK_NO_DEVICE, "no Vulkan device found (install a driver, e.g. mesa-vulkan-drivers)");
        goto fail;
    }
    pds = calloc(n, sizeof *pds);
    all = calloc(n, sizeof *all);
    fcs = calloc(n, sizeof *fcs);
    qfs = calloc(n, sizeof *qfs);
    if (!pds || !all || !fcs || !qfs) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_vk_ctx_create: out of memory");
        goto fail;
    }
    HS_VK_CALL(vkEnumeratePhysicalDevices(ctx->instance, &n, pds), NULL);
    for (uint32_t i = 0; i < n; i++) probe_caps(pds[i], i, api, &all[i], &fcs[i], &qfs[i]);
    int pick = pick_device(all, n, opt);
    if (pick < 0) {
        st = HS_FAIL(HS_ERR_VK_NO_DEVICE, "no Vulkan device matches HS_DEVICE / --device (%u device(s); "
                                          "see `heterospec devices`)", n);
        goto fail;
    }
    if (qfs[pick] == UINT32_MAX) {
        st = HS_FAIL(HS_ERR_VK_UNSUPPORTED, "device %s has no compute queue", all[pick].device_name);
        goto fail;
    }
    bool restart;
    uint32_t busy;
    ctx->n_parts = split_parts(&all[pick], sample, carry, &restart, &busy);
    free(sample);
    sample = NULL;
    if (restart) {
        /* lavapipe must run each part's work in its queue thread: start again with its workers off. */
        setenv("LP_NUM_THREADS", "0", 1);
        const split_choice choice = {ctx->n_parts, busy};
        free(pds);
        free(all);
        free(fcs);
        free(qfs);
        hs_vk_ctx_destroy(ctx);
        return ctx_create(opt, out, &choice);
    }
    ctx->phys = pds[pick];
    ctx->caps = all[pick];
    ctx->caps.parts = ctx->n_parts;
    ctx->caps.parts_busy = busy;
    ctx->queue_family = qfs[pick];
    vkGetPhysicalDeviceMemoryProperties(ctx->phys, &ctx->mem_props);
    ctx->emulate_noncoherent = env_flag("HS_VK_FORCE_NONCOHERENT");

    /* Enable only what the caps (after overrides) say we use. */
    feature_chain *fc = &fcs[pick];
    hs_vk_caps *c = &ctx->caps;
    feature_chain en;
    memset(&en, 0, sizeof en);
    en.f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    en.s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
    en.s8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
    en.f16i8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
    en.ssc.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
    en.idot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
    en.f2.features.shaderInt16 = fc->f2.features.shaderInt16;
    en.f2.features.shaderInt64 = fc->f2.features.shaderInt64;
    const char *dev_exts[8];
    uint32_t n_dev_exts = 0;
    void **next = &en.f2.pNext;
    if (c->storage16) {
        en.s16.storageBuffer16BitAccess = VK_TRUE;
        *next = &en.s16;
        next = &en.s16.pNext;
    }
    if (c->storage8) {
        en.s8.storageBuffer8BitAccess = VK_TRUE;
        *next = &en.s8;
        next = &en.s8.pNext;
        if (c->api_version < VK_API_VERSION_1_2) dev_exts[n_dev_exts++] = "VK_KHR_8bit_storage";
    }
    if (c->fp16 || c->storage8) {
        en.f16i8.shaderFloat16 = c->fp16;
        en.f16i8.shaderInt8 = c->storage8;
        *next = &en.f16i8;
        next = &en.f16i8.pNext;
        if (c->api_version < VK_API_VERSION_1_2) dev_exts[n_dev_exts++] = "VK_KHR_shader_float16_int8";
    }
    if (c->subgroup_size_control) {
        en.ssc.subgroupSizeControl = VK_TRUE;
        en.ssc.computeFullSubgroups = VK_TRUE;
        *next = &en.ssc;
        next = &en.ssc.pNext;
        if (c->api_version < VK_API_VERSION_1_3) dev_exts[n_dev_exts++] = "VK_EXT_subgroup_size_control";
    }
    if (c->int8_dot) {
        en.idot.shaderIntegerDotProduct = VK_TRUE;
        *next = &en.idot;
        next = &en.idot.pNext;
        if (c->api_version < VK_API_VERSION_1_3) dev_exts[n_dev_exts++] = "VK_KHR_shader_integer_dot_product";
    }
    if (ctx->n_parts > 1) dev_exts[n_dev_exts++] = "VK_EXT_external_memory_host";
    /* Cooperative matrix is probed for reporting; no kernel uses it yet, so it is not enabled. */
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = ctx->queue_family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = &en.f2,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci,
                              .enabledExtensionCount = n_dev_exts,
                              .ppEnabledExtensionNames = dev_exts};
    HS_VK_CALL(vkCreateDevice(ctx->phys, &dci, NULL, &ctx->device), ctx->caps.device_name);
    vkGetDeviceQueue(ctx->device, ctx->queue_family, 0, &ctx->queue);
    HS_TRY(create_parts(ctx, &dci, val_on));

    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = ctx->queue_family};
    HS_VK_CALL(vkCreateCommandPool(ctx->device, &pci, NULL, &ctx->cmd_pool), NULL);
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = ctx->cmd_pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    HS_VK_CALL(vkAllocateCommandBuffers(ctx->device, &cai, &ctx->xfer_cmd), NULL);
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    HS_VK_CALL(vkCreateFence(ctx->device, &fci, NULL, &ctx->xfer_fence), NULL);

    load_pipeline_cache(ctx, !(opt && opt->no_pipeline_cache));
    ctx->profiling = env_flag("HS_PROFILE") && ctx->caps.timestamps;
    stbds_sh_new_strdup(ctx->profile);
    if (ctx->n_parts > 1) HS_TRY(create_sync(ctx));

    free(pds);
    free(all);
    free(fcs);
    free(qfs);
    *out = ctx;
    return HS_OK;
fail:
    free(sample);
    free(pds);
    free(all);
    free(fcs);
    free(qfs);
    hs_vk_ctx_destroy(ctx);
    return st;
}

hs_status hs_vk_ctx_create(const hs_vk_ctx_options *opt, hs_vk_ctx **out) { return ctx_create(opt, out, NULL); }

void hs_vk_ctx_destroy(hs_vk_ctx *ctx) {
    if (!ctx) return;
    for (uint32_t k = 1; k < ctx->n_parts; k++)
        if (ctx->part[k].device) vkDeviceWaitIdle(ctx->part[k].device);
    hs_vk_buffer_destroy(ctx->sync); /* the context's own (unlinked: unlink is a no-op) */
    hs_vk_pipeline_destroy(ctx->spin);
    for (uint32_t k = 1; k < ctx->n_parts; k++) {
        hs_vk_part *pt = &ctx->part[k];
        if (!pt->device) continue;
        if (pt->cmd_pool) vkDestroyCommandPool(pt->device, pt->cmd_pool, NULL);
        vkDestroyDevice(pt->device, NULL);
    }
    for (uint32_t k = 1; k < ctx->n_parts; k++) {
        hs_vk_part *pt = &ctx->part[k];
        if (!pt->instance) continue;
        destroy_messenger(pt->instance, pt->messenger);
        vkDestroyInstance(pt->instance, NULL);
    }
    if (ctx->device) {
        vkDeviceWaitIdle(ctx->device);
        if (ctx->profiling && stbds_shlen(ctx->profile) > 0) hs_vk_profile_print(ctx, stderr);
        save_pipeline_cache(ctx);
        if (ctx->pipeline_cache) vkDestroyPipelineCache(ctx->device, ctx->pipeline_cache, NULL);
        if (ctx->xfer_fence) vkDestroyFence(ctx->device, ctx->xfer_fence, NULL);
        if (ctx->cmd_pool) vkDestroyCommandPool(ctx->device, ctx->cmd_pool, NULL);
        vkDestroyDevice(ctx->device, NULL);
    }
    destroy_messenger(ctx->instance, ctx->messenger);
    if (ctx->instance) vkDestroyInstance(ctx->instance, NULL);
    stbds_shfree(ctx->profile);
    free(ctx);
}

const hs_vk_caps *hs_vk_ctx_caps(const hs_vk_ctx *ctx) { return &ctx->caps; }
VkDevice hs_vk_ctx_device(const hs_vk_ctx *ctx) { return ctx->device; }
uint32_t hs_vk_validation_count(const hs_vk_ctx *ctx) { return __atomic_load_n(&ctx->validation_count, __ATOMIC_RELAXED); }

void hs_vk_obj_link(hs_vk_ctx *ctx, hs_vk_obj *o, hs_vk_obj_kind kind) {
    o->kind = kind;
    o->serial = ctx->next_serial++;
    o->prev = ctx->live.prev;
    o->next = &ctx->live;
    ctx->live.prev->next = o;
    ctx->live.prev = o;
}

void hs_vk_obj_unlink(hs_vk_ctx *ctx, hs_vk_obj *o) {
    (void)ctx;
    if (!o->next) return;
    o->prev->next = o->next;
    o->next->prev = o->prev;
    o->prev = o->next = NULL;
}

uint64_t hs_vk_live_mark(const hs_vk_ctx *ctx) { return ctx->next_serial; }

static void count_obj(hs_vk_live_counts *c, hs_vk_obj_kind kind) {
    switch (kind) {
    case HS_VK_OBJ_BUFFER: c->buffers++; break;
    case HS_VK_OBJ_PIPELINE: c->pipelines++; break;
    case HS_VK_OBJ_SEQ: c->seqs++; break;
    }
}

hs_vk_live_counts hs_vk_live_since(const hs_vk_ctx *ctx, uint64_t mark) {
    hs_vk_live_counts c = {0};
    for (const hs_vk_obj *o = ctx->live.next; o != &ctx->live; o = o->next)
        if (o->serial >= mark) count_obj(&c, o->kind);
    return c;
}

hs_vk_live_counts hs_vk_release_since(hs_vk_ctx *ctx, uint64_t mark) {
    hs_vk_live_counts c = {0};
    vkDeviceWaitIdle(ctx->device);
    /* Sequences first (they refer to pipelines and buffers), then pipelines,
     * then buffers; newest first within a kind. */
    static const hs_vk_obj_kind order[3] = {HS_VK_OBJ_SEQ, HS_VK_OBJ_PIPELINE, HS_VK_OBJ_BUFFER};
    for (int k = 0; k < 3; k++) {
        hs_vk_obj *o = ctx->live.prev;
        while (o != &ctx->live && o->serial >= mark) {
            hs_vk_obj *prev = o->prev;
            if (o->kind == order[k]) {
                count_obj(&c, o->kind);
                if (o->kind == HS_VK_OBJ_SEQ) hs_vk_seq_destroy((hs_vk_seq *)o);
                else if (o->kind == HS_VK_OBJ_PIPELINE) hs_vk_pipeline_destroy((hs_vk_pipeline *)o);
                else hs_vk_buffer_destroy((hs_vk_buffer *)o);
            }
            o = prev;
        }
    }
    return c;
}

hs_status hs_vk_oneshot(hs_vk_ctx *ctx, void (*rec)(VkCommandBuffer, void *), void *user) {
    hs_status st = HS_OK;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    HS_VK_CALL(vkBeginCommandBuffer(ctx->xfer_cmd, &bi), NULL);
    rec(ctx->xfer_cmd, user);
    /* Make the transfer's writes (a download's copy into staging, a fill) visible
     * to the host once the fence signals; the fence alone covers device access only. */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(ctx->xfer_cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                         0, NULL, 0, NULL);
    HS_VK_CALL(vkEndCommandBuffer(ctx->xfer_cmd), NULL);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &ctx->xfer_cmd};
    HS_VK_CALL(vkResetFences(ctx->device, 1, &ctx->xfer_fence), NULL);
    HS_VK_CALL(vkQueueSubmit(ctx->queue, 1, &si, ctx->xfer_fence), NULL);
    HS_VK_CALL(vkWaitForFences(ctx->device, 1, &ctx->xfer_fence, VK_TRUE, UINT64_MAX), NULL);
fail:
    return st;
}

int hs_vk_find_memory(const hs_vk_ctx *ctx, uint32_t type_bits, VkMemoryPropertyFlags want,
                      VkMemoryPropertyFlags prefer) {
    int fallback = -1;
    for (uint32_t i = 0; i < ctx->mem_props.memoryTypeCount; i++) {
        if (!(type_bits & (1u << i))) continue;
        VkMemoryPropertyFlags f = ctx->mem_props.memoryTypes[i].propertyFlags;
        if ((f & want) != want) continue;
        if ((f & prefer) == prefer) return (int)i;
        if (fallback < 0) fallback = (int)i;
    }
    return fallback;
}
