/* vk_internal — structures shared by the runtime/vk_*.c files. Not public. */
#ifndef HS_VK_INTERNAL_H
#define HS_VK_INTERNAL_H

#include "hs_vk.h"

/* Maps a failing VkResult to a status class and records "call: VK_ERROR_X (detail)". */
hs_status hs_vk_result(VkResult r, const char *call, const char *file, int line, const char *detail);
const char *hs_vk_result_string(VkResult r);

#define HS_VK_CALL(call, detail)                                                                   \
    do {                                                                                           \
        VkResult r_ = (call);                                                                      \
        if (r_ != VK_SUCCESS) {                                                                    \
            st = hs_vk_result(r_, #call, __FILE__, __LINE__, (detail));                            \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* Every buffer, pipeline and sequence begins with this link: a context keeps
 * its live objects in one circular list in creation order, so that what a
 * failed caller left behind can be counted and released (hs_vk_live_since,
 * hs_vk_release_since). */
typedef enum hs_vk_obj_kind { HS_VK_OBJ_BUFFER, HS_VK_OBJ_PIPELINE, HS_VK_OBJ_SEQ } hs_vk_obj_kind;
typedef struct hs_vk_obj {
    struct hs_vk_obj *prev, *next; /* NULL while not linked */
    uint64_t serial;               /* creation order, from 1 */
    hs_vk_obj_kind kind;
} hs_vk_obj;
void hs_vk_obj_link(hs_vk_ctx *ctx, hs_vk_obj *o, hs_vk_obj_kind kind);
void hs_vk_obj_unlink(hs_vk_ctx *ctx, hs_vk_obj *o);

typedef struct hs_vk_profile_entry {
    char *key; /* op name */
    double total_ns;
    uint64_t count;
} hs_vk_profile_entry;

/* Split execution (lavapipe): the work of every dispatch is divided among
 * n_parts logical devices of the one physical device, each run by its own
 * queue thread with the driver's own worker threads off (LP_NUM_THREADS=0),
 * all on the same host memory; at each barrier every part's queue waits for
 * the others in a spin dispatch (vk_seq.c). Part 0 is the context's device,
 * queue and pool; parts 1 .. n_parts - 1 are these. */
#define HS_VK_MAX_PARTS 8
#define HS_VK_SYNC_GROUPS 4 /* uint index of the split barrier's indirect arguments in ctx->sync */
typedef struct hs_vk_part {
    /* An instance of its own: lavapipe runs the devices of one instance's
     * physical device one at a time (they share its screen). */
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkDevice device;
    VkQueue queue;
    VkCommandPool cmd_pool;
} hs_vk_part;

struct hs_vk_ctx {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice phys;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    hs_vk_caps caps;
    VkPhysicalDeviceMemoryProperties mem_props;

    VkPipelineCache pipeline_cache;
    char pipeline_cache_path[1024];
    bool save_pipeline_cache;
    uint64_t pipeline_cache_loaded; /* bytes of the file given to the driver */
    char pipeline_cache_refused[128]; /* why the file was not used; "" if it was or was absent */

    /* One-shot transfers (uploads, downloads, fills). */
    VkCommandPool cmd_pool;
    VkCommandBuffer xfer_cmd;
    VkFence xfer_fence;

    hs_vk_obj live;       /* sentinel of the live-object list */
    uint64_t next_serial; /* serial of the next object */

    uint32_t validation_count;
    bool profiling;
    /* HS_VK_FORCE_NONCOHERENT: every mapped buffer gets a host shadow (see
     * struct hs_vk_buffer) and device buffers are left unmapped. */
    bool emulate_noncoherent;
    hs_vk_profile_entry *profile; /* stb_ds string hash map */

    uint32_t n_parts;                  /* 1: no split */
    hs_vk_part part[HS_VK_MAX_PARTS];  /* [1 .. n_parts) */
    PFN_vkGetMemoryHostPointerPropertiesEXT host_pointer_props;
    hs_vk_buffer *sync;                /* split: uints [0] barrier counter, [1] timed-out waits, [4..6] the spin's
                                        * indirect workgroup counts (HS_VK_SYNC_GROUPS; y and z set to 1 once) */
    hs_vk_pipeline *spin;              /* split: the barrier's dispatch */
};

static inline VkDevice hs_vk_part_device(const hs_vk_ctx *c, uint32_t k) { return k ? c->part[k].device : c->device; }

struct hs_vk_buffer {
    hs_vk_obj obj; /* first: the context's live list */
    hs_vk_ctx *ctx;
    VkBuffer buffer;
    VkDeviceMemory memory;
    uint64_t size;       /* bytes asked for */
    uint64_t alloc_size; /* bytes of the allocation (memory requirement), >= size */
    void *mapped;        /* the real mapping (whole allocation), NULL if not mapped */
    /* HS_VK_FORCE_NONCOHERENT only: the host's view of the memory, alloc_size
     * bytes, handed out by hs_vk_buffer_map instead of `mapped`. Flush copies
     * its aligned range into `mapped` (host writes reach the device),
     * invalidate copies `mapped` into it (device writes reach the host), as
     * the caches of non-coherent memory would; a missing or misaligned call
     * then gives wrong data on a device whose memory is coherent. */
    void *shadow;
    bool coherent; /* no flush or invalidate needed */
    /* RGBA32UI views of ranges bound as uniform texel buffers (stb_ds array),
     * made on first use and kept with the buffer. */
    struct hs_vk_texel_view {
        uint64_t offset, range;
        VkBufferView view[HS_VK_MAX_PARTS]; /* per part */
    } *views;
    /* Split execution: the host allocation every part imports (mapped points
     * at it; anonymous pages host_map bytes from host_base), and the buffer
     * and memory of parts 1 .. n_parts - 1. */
    void *host, *host_base;
    size_t host_map;
    VkBuffer xbuffer[HS_VK_MAX_PARTS];
    VkDeviceMemory xmemory[HS_VK_MAX_PARTS];
};

static inline VkBuffer hs_vk_part_buffer(const hs_vk_buffer *b, uint32_t k) { return k ? b->xbuffer[k] : b->buffer; }

/* The RGBA32UI views of [offset, offset + range) of b, one per part, made on first use. */
hs_status hs_vk_buffer_texel_view(hs_vk_buffer *b, uint64_t offset, uint64_t range, const VkBufferView **out);

struct hs_vk_pipeline {
    hs_vk_obj obj; /* first: the context's live list */
    hs_vk_ctx *ctx;
    char name[64];
    uint32_t n_bindings;
    uint32_t write_mask;
    uint32_t texel_mask;
    uint32_t uniform_mask;
    uint32_t push_size;
    uint32_t wg_size[3];
    uint32_t required_subgroup_size; /* 0: the driver's choice */
    /* Split execution: whether a dispatch's workgroups may be divided among
     * the parts (not when the shader reads gl_NumWorkGroups, which a part's
     * share would change). */
    bool splittable;
    /* The Vulkan objects on each part's device ([0]: the context's device). */
    struct hs_vk_pipeline_part {
        VkShaderModule module;
        VkDescriptorSetLayout set_layout;
        VkPipelineLayout layout;
        VkPipeline pipeline;
    } part[HS_VK_MAX_PARTS];
};

/* The descriptor type of binding i of p. */
static inline VkDescriptorType hs_vk_binding_type(const hs_vk_pipeline *p, uint32_t i) {
    if (p->texel_mask & (1u << i)) return VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
    if (p->uniform_mask & (1u << i)) return VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
    return VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
}

/* Runs rec(cmd, user) in the one-shot command buffer and waits. */
hs_status hs_vk_oneshot(hs_vk_ctx *ctx, void (*rec)(VkCommandBuffer, void *), void *user);
/* Index of a memory type with all `want` flags (and preferring `prefer`), or -1. */
int hs_vk_find_memory(const hs_vk_ctx *ctx, uint32_t type_bits, VkMemoryPropertyFlags want,
                      VkMemoryPropertyFlags prefer);
void hs_vk_profile_add(hs_vk_ctx *ctx, const char *name, double ns);

#endif
