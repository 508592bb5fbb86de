/* hs_vk — the Vulkan compute layer: device, capabilities, buffers, pipelines
 * (with an on-disk VkPipelineCache), recorded command sequences, timestamps.
 *
 * Usage:
 *   hs_vk_ctx *vk; hs_vk_ctx_create(NULL, &vk);          // picks a device (HS_DEVICE)
 *   hs_vk_buffer *b; hs_vk_buffer_create(vk, bytes, HS_MEM_DEVICE, &b);
 *   hs_vk_buffer_upload(b, 0, host_ptr, bytes);
 *   hs_vk_buffer *io; hs_vk_buffer_create(vk, 512, HS_MEM_HOST, &io); // small per-step data
 *   int32_t *w = hs_vk_buffer_map(io); w[0] = 7; hs_vk_buffer_flush(io, 0, 4);
 *   hs_vk_pipeline *p; hs_vk_pipeline_create(vk, &desc, &p);
 *   hs_vk_seq *s; hs_vk_seq_create(vk, &s);
 *   hs_vk_seq_begin(s); hs_vk_seq_dispatch(s, p, binds, n, &push, gx, gy, gz); hs_vk_seq_end(s);
 *   hs_vk_seq_submit(s);                                  // replay as often as wanted
 *   hs_vk_buffer_invalidate(io, 256, 4); read w[64];      // what the sequence wrote
 *
 * Sequences are recorded once and replayed: buffers, push constants and
 * dispatch sizes are fixed at record time; what changes between runs (token
 * ids, positions, lengths) lives in small device buffers the host writes.
 * Barriers between dispatches are inserted automatically where a dispatch
 * reads or writes a buffer that an earlier dispatch since the last barrier
 * wrote (read-after-write, write-after-write) or read (write-after-read).
 *
 * Environment:
 *   HS_DEVICE=<index|name substring>   choose the device
 *   HS_VK_VALIDATION=1                 enable VK_LAYER_KHRONOS_validation; messages are counted
 *   HS_VK_DISABLE_SUBGROUP_OPS, HS_VK_DISABLE_SUBGROUP_SIZE_CONTROL,
 *   HS_VK_DISABLE_16BIT_STORAGE, HS_VK_DISABLE_F16, HS_VK_DISABLE_8BIT_STORAGE,
 *   HS_VK_DISABLE_INT8_DOT, HS_VK_DISABLE_COOPMAT
 *                                      turn an optional feature off (not probed, not
 *                                      enabled); which kernels use which feature, and so
 *                                      which switch selects a portable path, is
 *                                      hs_feature_uses() in hs_ops.h
 *   HS_VK_MAX_BUFFER_RANGE=<bytes>     pretend maxStorageBufferRange is this small
 *   HS_VK_FORCE_NONCOHERENT=1          emulate non-coherent host-visible memory (see
 *                                      hs_vk_buffer_flush): a missing flush or invalidate
 *                                      gives wrong data; for tests
 *   HS_VK_MAX_STORAGE_BUFFERS=<n>      pretend maxPerStageDescriptorStorageBuffers is this small
 *   HS_PROFILE=1                       time every dispatch; hs_vk_profile_print() totals per op
 *   HS_HOME=<dir>                      cache folder (default ~/.cache/heterospec)
 *
 * Ownership: *_create gives the object to the caller; *_destroy accepts NULL
 * and half-built objects. Objects must be destroyed before their context.
 * Thread-safety: a context and everything made from it belong to one thread.
 */
#ifndef HS_VK_H
#define HS_VK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <vulkan/vulkan.h>

#include "hs_status.h"

typedef struct hs_vk_ctx hs_vk_ctx;
typedef struct hs_vk_buffer hs_vk_buffer;
typedef struct hs_vk_pipeline hs_vk_pipeline;
typedef struct hs_vk_seq hs_vk_seq;

/* What the device offers, after the HS_VK_DISABLE_* overrides. */
typedef struct hs_vk_caps {
    char device_name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    char driver_name[VK_MAX_DRIVER_NAME_SIZE];
    char driver_info[VK_MAX_DRIVER_INFO_SIZE];
    /* A CPU device: the processor it runs on (hs_vk_host_cpu_parse of /proc/cpuinfo, e.g. "AMD EPYC (family
     * 26, model 2) x2"; HS_HOST_CPU instead when set); "" for other devices. lavapipe's UUID and driver say
     * which Mesa it is, not which processor, and its costs are the processor's. */
    char host_cpu[300];
    uint32_t vendor_id, device_id, driver_version, api_version;
    VkPhysicalDeviceType type;
    uint8_t device_uuid[VK_UUID_SIZE];
    uint8_t pipeline_cache_uuid[VK_UUID_SIZE]; /* what a VkPipelineCache's data must carry */
    uint32_t index; /* in vkEnumeratePhysicalDevices order */

    uint32_t subgroup_size;          /* default subgroup size */
    uint32_t subgroup_min, subgroup_max; /* with subgroup size control, else both = subgroup_size */
    bool subgroup_ops;               /* basic + arithmetic + shuffle + ballot in compute */
    bool subgroup_size_control;      /* VK_EXT_subgroup_size_control with computeFullSubgroups */
    bool fp16;                       /* shaderFloat16 arithmetic */
    bool storage16;                  /* storageBuffer16BitAccess */
    bool storage8;                   /* storageBuffer8BitAccess + shaderInt8 */
    bool int8_dot;                   /* shaderIntegerDotProduct (4x8 packed) */
    bool coopmat;                    /* VK_KHR_cooperative_matrix */
    bool timestamps;                 /* compute queue has timestamp bits */
    float timestamp_period_ns;

    uint64_t device_local_bytes;     /* largest device-local heap */
    uint64_t host_visible_device_local_bytes;
    bool unified_memory;             /* a device-local heap is host visible (integrated, CPU) */
    bool coherent;                   /* every host-visible memory type is HOST_COHERENT: flush and
                                        invalidate are no-ops (false under HS_VK_FORCE_NONCOHERENT) */
    uint64_t non_coherent_atom_size; /* granule of flush/invalidate ranges (>= 256 under the switch) */

    uint64_t max_storage_buffer_range;
    uint32_t max_storage_buffers;    /* maxPerStageDescriptorStorageBuffers: bindings of one shader */
    uint64_t max_alloc;
    uint64_t min_storage_offset_align;
    uint64_t max_texel_elements;     /* maxTexelBufferElements (0: no uniform texel buffers of RGBA32UI,
                                        or HS_VK_DISABLE_TEXEL_BUFFER) */
    uint64_t min_texel_offset_align; /* minTexelBufferOffsetAlignment */
    uint64_t max_uniform_range;      /* maxUniformBufferRange */
    uint64_t min_uniform_offset_align; /* minUniformBufferOffsetAlignment */
    uint32_t max_shared_memory;
    uint32_t max_push_constants;
    uint32_t max_wg_size[3];
    uint32_t max_wg_invocations;
    uint32_t max_wg_count[3];

    uint64_t host_import_align;      /* VK_EXT_external_memory_host: minImportedHostPointerAlignment; 0 without */
    /* Split execution (lavapipe; from hs_vk_enumerate, what a context would use): the logical devices
     * a dispatch's workgroups are divided among, each on its own CPU core
     * (runtime/vk_seq.c); 1 when off: other drivers, one CPU, LP_NUM_THREADS
     * set to other than 0, HS_VK_DISABLE_SPLIT or HS_VK_FORCE_NONCOHERENT.
     * HS_VK_SPLIT=N asks for N (2 .. 8) on lavapipe, whatever the CPU count.
     * A context counts only as many CPUs as other programs left idle when it
     * was made (runtime/vk_device.c, split_parts). */
    uint32_t parts;
    uint32_t parts_busy; /* a context's: CPUs left out of split execution as busy (0 otherwise) */
} hs_vk_caps;

typedef struct hs_vk_ctx_options {
    int device_index;      /* -1: HS_DEVICE or automatic choice */
    const char *device_name; /* substring; NULL: HS_DEVICE or automatic */
    int validation;        /* -1: HS_VK_VALIDATION, 0 off, 1 on */
    bool no_pipeline_cache; /* do not load or save the on-disk cache */
} hs_vk_ctx_options;

/* Lists every Vulkan device (caps with overrides applied). *out is malloc'ed. */
hs_status hs_vk_enumerate(hs_vk_caps **out, uint32_t *count);
/* The index among caps[0..n) of the device a context picks without options (HS_DEVICE, else the best by
 * type); -1 without devices, -2 when HS_DEVICE names none of them. */
int hs_vk_pick_device(const hs_vk_caps *caps, uint32_t n);
/* One line in the spirit of ggml_vulkan's device line. */
void hs_vk_caps_line(const hs_vk_caps *c, char *buf, size_t n);
const char *hs_vk_vendor_name(uint32_t vendor_id);
/* hs_vk_caps.host_cpu from /proc/cpuinfo's text (f; NULL: none) and the CPUs online (cpus; <= 0: unknown):
 * the first processor's model name ("cpu" without one), then x86's "(family F, model M)" or Arm's
 * "(implementer I, part P)" where the text has them, then " xCPUS": "AMD EPYC (family 25, model 17) x2". A
 * VM's model name is often only the brand, the same on processors of several generations. "" when the
 * text has none of these and cpus is unknown. */
void hs_vk_host_cpu_parse(FILE *f, long cpus, char *buf, size_t n);

hs_status hs_vk_ctx_create(const hs_vk_ctx_options *opt, hs_vk_ctx **out);
void hs_vk_ctx_destroy(hs_vk_ctx *ctx);
const hs_vk_caps *hs_vk_ctx_caps(const hs_vk_ctx *ctx);
VkDevice hs_vk_ctx_device(const hs_vk_ctx *ctx);
/* The on-disk VkPipelineCache of the context: its file
 * ($HS_HOME/pipelines-<device UUID>-<driver version>.vkcache; "" when
 * no_pipeline_cache) and how many bytes of it were given to the driver at
 * creation. 0 bytes with a non-empty *why: the file was there but refused
 * (unreadable, or its header names another vendor, device or cache UUID). */
uint64_t hs_vk_pipeline_cache_loaded(const hs_vk_ctx *ctx, const char **path, const char **why);
/* Number of validation-layer messages (warnings and errors) seen so far. */
uint32_t hs_vk_validation_count(const hs_vk_ctx *ctx);
/* Objects of a context not yet destroyed. A mark taken before some work and
 * hs_vk_live_since after it tell what the work left alive; hs_vk_release_since
 * destroys those (sequences, then pipelines, then buffers) after waiting for
 * the device. For a test harness cleaning up what a failed test left before
 * vkDestroyDevice, so the failure does not cascade into validation errors;
 * never call it while a released object is still referred to (hs_ops keeps
 * the pipelines it created: destroy it first). */
typedef struct hs_vk_live_counts {
    uint32_t buffers, pipelines, seqs;
} hs_vk_live_counts;
uint64_t hs_vk_live_mark(const hs_vk_ctx *ctx);
hs_vk_live_counts hs_vk_live_since(const hs_vk_ctx *ctx, uint64_t mark);
hs_vk_live_counts hs_vk_release_since(hs_vk_ctx *ctx, uint64_t mark);
/* Cache folder ($HS_HOME or ~/.cache/heterospec), created if missing. */
/* mkdir -p: path and its missing parents (0755). */
hs_status hs_mkdir_p(const char *path);
hs_status hs_home_dir(char *buf, size_t n);

/* ---- buffers ---- */
typedef enum hs_mem {
    HS_MEM_DEVICE = 0, /* device-local; host-visible too where memory is unified */
    HS_MEM_HOST = 1,   /* host-visible, cached when possible: uploads, readbacks */
} hs_mem;

hs_status hs_vk_buffer_create(hs_vk_ctx *ctx, uint64_t size, hs_mem mem, hs_vk_buffer **out);
void hs_vk_buffer_destroy(hs_vk_buffer *buf);
uint64_t hs_vk_buffer_size(const hs_vk_buffer *buf);
/* Persistently mapped pointer, or NULL if the memory is not host visible.
 * The memory may be host-cached but not host-coherent (many mobile GPUs):
 * whoever writes or reads through this pointer calls
 *   hs_vk_buffer_flush      after writing through it and before the submit
 *                           that reads what was written (host -> device);
 *   hs_vk_buffer_invalidate after the fence wait of the submit that wrote
 *                           (hs_vk_seq_submit returning) and before reading
 *                           through it (device -> host).
 * Ranges are in bytes from the start of the buffer; they are widened to
 * nonCoherentAtomSize internally, so a flush may also write back, and an
 * invalidate may also discard, up to atom-1 bytes on either side: keep data
 * the host writes and data the device writes in different atoms (256-byte
 * aligned slots always suffice). Both are no-ops on coherent memory (after a
 * range check). hs_vk_buffer_upload and _download do this themselves.
 *
 * HS_VK_FORCE_NONCOHERENT=1 (for tests) makes this visible on any device:
 * hs_vk_buffer_map returns a host shadow copy instead of the mapping, flush
 * copies the shadow's widened range into the memory, invalidate copies it
 * back, and the atom is raised to at least 256 (the largest the Vulkan spec
 * allows; a multiple of the real one, as both are powers of two). Buffers
 * of HS_MEM_DEVICE are then not mapped at all, so uploads and downloads take
 * the staging path, as on a discrete GPU. */
void *hs_vk_buffer_map(const hs_vk_buffer *buf);
/* Makes host writes through hs_vk_buffer_map in [offset, offset + n) visible
 * to the device. HS_ERR_OUT_OF_RANGE outside the buffer, HS_ERR_INVALID_ARG if
 * the buffer is not mapped. */
hs_status hs_vk_buffer_flush(hs_vk_buffer *buf, uint64_t offset, uint64_t n);
/* Makes device writes in [offset, offset + n) visible to the host through
 * hs_vk_buffer_map. Same errors as hs_vk_buffer_flush. */
hs_status hs_vk_buffer_invalidate(hs_vk_buffer *buf, uint64_t offset, uint64_t n);
/* Copies through a staging buffer when the buffer is not host visible. Waits. */
hs_status hs_vk_buffer_upload(hs_vk_buffer *buf, uint64_t offset, const void *src, uint64_t n);
hs_status hs_vk_buffer_download(hs_vk_buffer *buf, uint64_t offset, void *dst, uint64_t n);
hs_status hs_vk_buffer_fill(hs_vk_buffer *buf, uint64_t offset, uint64_t n, uint32_t value);

/* ---- pipelines ---- */
/* Storage-buffer bindings of one pipeline: the split KV-cache kernels bind
 * their cache as several chunks (op_elem.h, hs_kv_layer), up to 13. */
#define HS_VK_MAX_BINDINGS 16
#define HS_VK_MAX_SPEC 12

typedef struct hs_vk_pipeline_desc {
    const char *name;        /* op kind, used by the profile ("matmul_q4_0") */
    const uint32_t *code;    /* SPIR-V (hs_spv_*) */
    size_t code_size;        /* bytes */
    uint32_t n_bindings;     /* storage buffers at set 0, bindings 0..n-1 */
    uint32_t write_mask;     /* bit i: binding i is written by the shader */
    uint32_t texel_mask;     /* bit i: binding i is a read-only uniform texel buffer of RGBA32UI
                                (usamplerBuffer; needs caps.max_texel_elements) instead */
    uint32_t uniform_mask;   /* bit i: binding i is a uniform buffer instead (read-only; ranges up to
                                caps.max_uniform_range, offsets aligned to min_uniform_offset_align) */
    uint32_t push_size;      /* bytes of push constants (<= 128) */
    uint32_t n_spec;         /* uint32 specialization constants, ids 0..n_spec-1 */
    uint32_t spec[HS_VK_MAX_SPEC];
    uint32_t required_subgroup_size; /* 0: driver's choice */
    uint32_t wg_size[3];     /* local size, for dispatch-size checks (0 = 1) */
} hs_vk_pipeline_desc;

hs_status hs_vk_pipeline_create(hs_vk_ctx *ctx, const hs_vk_pipeline_desc *d, hs_vk_pipeline **out);
void hs_vk_pipeline_destroy(hs_vk_pipeline *p);
const char *hs_vk_pipeline_name(const hs_vk_pipeline *p);
/* The subgroup size the pipeline was created with (0: the driver's choice). */
uint32_t hs_vk_pipeline_required_subgroup(const hs_vk_pipeline *p);

/* ---- recorded sequences ---- */
typedef struct hs_vk_binding {
    hs_vk_buffer *buf;
    uint64_t offset;
    uint64_t range; /* 0: to the end of the buffer (capped at maxStorageBufferRange) */
} hs_vk_binding;

hs_status hs_vk_seq_create(hs_vk_ctx *ctx, hs_vk_seq **out);
void hs_vk_seq_destroy(hs_vk_seq *seq);
hs_vk_ctx *hs_vk_seq_ctx(const hs_vk_seq *seq);
/* Starts (re)recording; forgets what was recorded before. */
hs_status hs_vk_seq_begin(hs_vk_seq *seq);
hs_status hs_vk_seq_dispatch(hs_vk_seq *seq, const hs_vk_pipeline *p, const hs_vk_binding *binds,
                             uint32_t n_binds, const void *push, uint32_t gx, uint32_t gy,
                             uint32_t gz);
hs_status hs_vk_seq_copy(hs_vk_seq *seq, hs_vk_buffer *src, uint64_t src_off, hs_vk_buffer *dst,
                         uint64_t dst_off, uint64_t n);
/* rows copies of row_bytes each, row i from src_off + i src_stride to
 * dst_off + i dst_stride, as one command (a strided gather or scatter). */
hs_status hs_vk_seq_copy_rows(hs_vk_seq *seq, hs_vk_buffer *src, uint64_t src_off, uint64_t src_stride,
                              hs_vk_buffer *dst, uint64_t dst_off, uint64_t dst_stride, uint64_t row_bytes,
                              uint32_t rows);
hs_status hs_vk_seq_fill(hs_vk_seq *seq, hs_vk_buffer *dst, uint64_t off, uint64_t n, uint32_t v);
/* Full compute barrier, for dependencies the automatic tracking cannot see. */
void hs_vk_seq_barrier(hs_vk_seq *seq);
hs_status hs_vk_seq_end(hs_vk_seq *seq);
/* Submits the recorded sequence and waits for it. May be called many times. */
hs_status hs_vk_seq_submit(hs_vk_seq *seq);
uint32_t hs_vk_seq_dispatch_count(const hs_vk_seq *seq);
/* Split execution: the dispatches recorded on part k (0 .. caps.parts - 1;
 * a divided dispatch counts on each part with workgroups, one that runs whole
 * on part 0 only; the barriers' own dispatches are not counted). */
uint32_t hs_vk_seq_part_dispatches(const hs_vk_seq *s, uint32_t part);
/* Split execution: the dimension (0 .. 2) of a grid of g[0] x g[1] x g[2] workgroups that
 * hs_vk_seq_dispatch divides among `parts` parts, or 3 when it runs whole on part 0 (every
 * dimension a single workgroup, or parts < 2): the first of more than one workgroup, unless
 * the busiest part's share of it is more than 1/8 above the even share and a later dimension
 * divides more evenly. */
uint32_t hs_vk_split_dim(const uint32_t g[3], uint32_t parts);
uint32_t hs_vk_seq_barrier_count(const hs_vk_seq *seq);
/* Pipeline of the i-th recorded dispatch (NULL past the end): which kernel
 * variant an op chose, for reports and tests. */
const hs_vk_pipeline *hs_vk_seq_dispatch_pipeline(const hs_vk_seq *seq, uint32_t i);

/* ---- profile (HS_PROFILE=1) ---- */
bool hs_vk_profiling(const hs_vk_ctx *ctx);
void hs_vk_profile_enable(hs_vk_ctx *ctx, bool on); /* before recording */
void hs_vk_profile_reset(hs_vk_ctx *ctx);
/* Prints time per op kind (name), count, mean and share; sorted by total. */
void hs_vk_profile_print(const hs_vk_ctx *ctx, FILE *f);
/* Total device time in ns recorded for op name (exact match), and its count. */
double hs_vk_profile_total_ns(const hs_vk_ctx *ctx, const char *name, uint64_t *count);

#endif
