/* vk_buffer: storage buffers, device-local with staging where memory is not
 * host visible, persistently mapped where it is (unified memory, lavapipe);
 * flush and invalidate of mapped ranges for memory that is not host-coherent,
 * and the emulation of such memory behind HS_VK_FORCE_NONCOHERENT. */
#include "vk_internal.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stb_ds.h"

/* Under HS_VK_FORCE_NONCOHERENT: a host-visible type without HOST_COHERENT
 * (cached if possible), so that the emulation runs on really non-coherent
 * memory where the device has some; -1 if it has none. */
static int find_noncoherent(const hs_vk_ctx *ctx, uint32_t type_bits) {
    int any = -1;
    for (uint32_t i = 0; i < ctx->mem_props.memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = ctx->mem_props.memoryTypes[i].propertyFlags;
        if (!(type_bits & (1u << i)) || !(f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) ||
            (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
            continue;
        if (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) return (int)i;
        if (any < 0) any = (int)i;
    }
    return any;
}

/* Split execution: one zeroed host allocation, imported by every part's
 * device (VK_EXT_external_memory_host) under a buffer of its own; it is the
 * mapping, and coherent. */
static hs_status import_host(hs_vk_buffer *b, const VkBufferCreateInfo *bci, VkMemoryRequirements req,
                             const char *detail) {
    hs_status st = HS_OK;
    hs_vk_ctx *ctx = b->ctx;
    const uint64_t a = ctx->caps.host_import_align > req.alignment ? ctx->caps.host_import_align : req.alignment;
    const uint64_t bytes = (req.size + a - 1) / a * a;
    /* Anonymous pages, which the kernel zeroes on first touch: a buffer mostly never written (a KV cache sized
     * for the whole context) costs nothing until used, where zeroing it here touched every page at load. */
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), extra = a > page ? a : 0;
    void *base = mmap(NULL, bytes + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return HS_FAIL(HS_ERR_VK_OUT_OF_DEVICE_MEMORY, "host memory for a buffer (%s): %llu bytes", detail,
                       (unsigned long long)(bytes + extra));
    b->host_base = base;
    b->host_map = bytes + extra;
    b->host = (void *)(((uintptr_t)base + a - 1) / a * a);
    b->alloc_size = bytes;
    for (uint32_t k = 0; k < ctx->n_parts; k++) {
        const VkDevice dev = hs_vk_part_device(ctx, k);
        VkBuffer buf = b->buffer;
        if (k) {
            HS_VK_CALL(vkCreateBuffer(dev, bci, NULL, &b->xbuffer[k]), detail);
            buf = b->xbuffer[k];
            vkGetBufferMemoryRequirements(dev, buf, &req);
        }
        VkMemoryHostPointerPropertiesEXT hp = {.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
        HS_VK_CALL(ctx->host_pointer_props(dev, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, b->host,
                                           &hp),
                   detail);
        const int type = hs_vk_find_memory(ctx, req.memoryTypeBits & hp.memoryTypeBits,
                                           VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                           0);
        if (type < 0)
            return HS_FAIL(HS_ERR_VK_UNSUPPORTED, "split execution: no coherent memory type imports host memory");
        VkImportMemoryHostPointerInfoEXT imp = {.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
                                                .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
                                                .pHostPointer = b->host};
        VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                    .pNext = &imp,
                                    .allocationSize = bytes,
                                    .memoryTypeIndex = (uint32_t)type};
        VkDeviceMemory *mem = k ? &b->xmemory[k] : &b->memory;
        HS_VK_CALL(vkAllocateMemory(dev, &mai, NULL, mem), detail);
        HS_VK_CALL(vkBindBufferMemory(dev, buf, *mem, 0), NULL);
    }
    b->mapped = b->host;
    b->coherent = true;
fail:
    return st;
}

hs_status hs_vk_buffer_create(hs_vk_ctx *ctx, uint64_t size, hs_mem mem, hs_vk_buffer **out) {
    hs_status st = HS_OK;
    char detail[160];
    *out = NULL;
    if (size == 0) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_vk_buffer_create: size 0");
    if (size > ctx->caps.max_alloc)
        return HS_FAIL(HS_ERR_VK_OUT_OF_DEVICE_MEMORY,
                       "buffer of %llu MiB exceeds maxMemoryAllocationSize (%llu MiB) of %s",
                       (unsigned long long)(size >> 20), (unsigned long long)(ctx->caps.max_alloc >> 20),
                       ctx->caps.device_name);
    hs_vk_buffer *b = calloc(1, sizeof *b);
    if (!b) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_vk_buffer_create: out of memory");
    b->ctx = ctx;
    hs_vk_obj_link(ctx, &b->obj, HS_VK_OBJ_BUFFER);
    b->size = size;
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
                 VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                 VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT | /* split execution's barrier (vk_seq.c) */
                 (ctx->caps.max_texel_elements ? VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT : 0),
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    snprintf(detail, sizeof detail, "requested %.1f MiB", size / 1048576.0);
    VkExternalMemoryBufferCreateInfo ext = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
                                            .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT};
    if (ctx->n_parts > 1) bci.pNext = &ext;
    HS_VK_CALL(vkCreateBuffer(ctx->device, &bci, NULL, &b->buffer), detail);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(ctx->device, b->buffer, &req);
    if (ctx->n_parts > 1) {
        HS_TRY(import_host(b, &bci, req, detail));
        *out = b;
        return HS_OK;
    }
    int type;
    if (mem == HS_MEM_DEVICE) {
        type = hs_vk_find_memory(ctx, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                 VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
        if (type >= 0 && !ctx->caps.unified_memory) {
            /* Discrete: keep big buffers in the fast device-only heap. */
            int dev_only = -1;
            for (uint32_t i = 0; i < ctx->mem_props.memoryTypeCount; i++) {
                VkMemoryPropertyFlags f = ctx->mem_props.memoryTypes[i].propertyFlags;
                if ((req.memoryTypeBits & (1u << i)) && (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) &&
                    !(f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) {
                    dev_only = (int)i;
                    break;
                }
            }
            if (dev_only >= 0) type = dev_only;
        }
        if (type < 0) type = hs_vk_find_memory(ctx, req.memoryTypeBits, 0, 0);
    } else {
        type = ctx->emulate_noncoherent ? find_noncoherent(ctx, req.memoryTypeBits) : -1;
        if (type < 0)
            type = hs_vk_find_memory(ctx, req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                                     VK_MEMORY_PROPERTY_HOST_CACHED_BIT |
                                         VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    }
    if (type < 0) {
        st = HS_FAIL(HS_ERR_VK_UNSUPPORTED, "no suitable memory type for a %s buffer",
                     mem == HS_MEM_DEVICE ? "device" : "host");
        goto fail;
    }
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .allocationSize = req.size,
                                .memoryTypeIndex = (uint32_t)type};
    HS_VK_CALL(vkAllocateMemory(ctx->device, &mai, NULL, &b->memory), detail);
    b->alloc_size = req.size;
    HS_VK_CALL(vkBindBufferMemory(ctx->device, b->buffer, b->memory, 0), NULL);
    VkMemoryPropertyFlags f = ctx->mem_props.memoryTypes[type].propertyFlags;
    /* Under the switch device buffers stay unmapped, as on a discrete GPU, so
     * that uploads and downloads run the staging path and its flushes. */
    bool map = (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
               !(ctx->emulate_noncoherent && mem == HS_MEM_DEVICE);
    if (map) {
        HS_VK_CALL(vkMapMemory(ctx->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped), detail);
        b->coherent = f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        if (ctx->emulate_noncoherent) {
            b->coherent = false;
            b->shadow = malloc(b->alloc_size);
            if (!b->shadow) {
                st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY,
                             "hs_vk_buffer_create: no memory for the shadow copy of HS_VK_FORCE_NONCOHERENT (%s)",
                             detail);
                goto fail;
            }
            /* What the host sees before its first invalidate: a pattern that
             * no test data has, rather than the device's contents. */
            memset(b->shadow, 0xA5, b->alloc_size);
        }
    }
    *out = b;
    return HS_OK;
fail:
    hs_vk_buffer_destroy(b);
    return st;
}

void hs_vk_buffer_destroy(hs_vk_buffer *b) {
    if (!b) return;
    for (ptrdiff_t i = 0; i < stbds_arrlen(b->views); i++)
        for (uint32_t k = 0; k < b->ctx->n_parts; k++)
            if (b->views[i].view[k]) vkDestroyBufferView(hs_vk_part_device(b->ctx, k), b->views[i].view[k], NULL);
    stbds_arrfree(b->views);
    for (uint32_t k = 1; k < b->ctx->n_parts; k++) {
        if (b->xbuffer[k]) vkDestroyBuffer(b->ctx->part[k].device, b->xbuffer[k], NULL);
        if (b->xmemory[k]) vkFreeMemory(b->ctx->part[k].device, b->xmemory[k], NULL);
    }
    VkDevice d = b->ctx->device;
    if (b->mapped && !b->host) vkUnmapMemory(d, b->memory);
    if (b->buffer) vkDestroyBuffer(d, b->buffer, NULL);
    if (b->memory) vkFreeMemory(d, b->memory, NULL);
    free(b->shadow);
    if (b->host_base) munmap(b->host_base, b->host_map); /* after every memory importing it is freed */
    hs_vk_obj_unlink(b->ctx, &b->obj);
    free(b);
}

hs_status hs_vk_buffer_texel_view(hs_vk_buffer *b, uint64_t offset, uint64_t range, const VkBufferView **out) {
    hs_status st = HS_OK;
    for (ptrdiff_t i = 0; i < stbds_arrlen(b->views); i++)
        if (b->views[i].offset == offset && b->views[i].range == range) {
            *out = b->views[i].view;
            return HS_OK;
        }
    struct hs_vk_texel_view v = {.offset = offset, .range = range};
    for (uint32_t k = 0; k < b->ctx->n_parts; k++) {
        VkBufferViewCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
                                     .buffer = hs_vk_part_buffer(b, k),
                                     .format = VK_FORMAT_R32G32B32A32_UINT,
                                     .offset = offset,
                                     .range = range};
        const VkResult r = vkCreateBufferView(hs_vk_part_device(b->ctx, k), &ci, NULL, &v.view[k]);
        if (r != VK_SUCCESS) {
            for (uint32_t j = 0; j < k; j++) vkDestroyBufferView(hs_vk_part_device(b->ctx, j), v.view[j], NULL);
            HS_VK_CALL(r, "texel buffer view");
        }
    }
    stbds_arrput(b->views, v);
    *out = b->views[stbds_arrlen(b->views) - 1].view;
fail:
    return st;
}

uint64_t hs_vk_buffer_size(const hs_vk_buffer *b) { return b->size; }
void *hs_vk_buffer_map(const hs_vk_buffer *b) { return b->shadow ? b->shadow : b->mapped; }

static hs_status check_range(const hs_vk_buffer *b, uint64_t off, uint64_t n, const char *what) {
    if (off > b->size || n > b->size - off)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "%s: range [%llu, +%llu) outside buffer of %llu bytes", what,
                       (unsigned long long)off, (unsigned long long)n, (unsigned long long)b->size);
    return HS_OK;
}

static hs_status check_mapped(const hs_vk_buffer *b, uint64_t off, uint64_t n, const char *what) {
    hs_status st = check_range(b, off, n, what);
    if (st != HS_OK) return st;
    if (!b->mapped)
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "%s: buffer of %llu bytes is not mapped (memory not host visible%s); "
                       "use hs_vk_buffer_upload/_download",
                       what, (unsigned long long)b->size,
                       b->ctx->emulate_noncoherent ? ", or a device buffer under HS_VK_FORCE_NONCOHERENT" : "");
    return HS_OK;
}

/* [off, off + n) widened to whole atoms (offset down, end up), as
 * VkMappedMemoryRange wants it: a size that is a multiple of the atom, or
 * VK_WHOLE_SIZE when the end reaches the allocation's end (the allocation
 * may be larger than the buffer, and need not be a multiple of the atom).
 * *end is where the widened range stops. */
static VkMappedMemoryRange atom_range(const hs_vk_buffer *b, uint64_t off, uint64_t n, uint64_t *end) {
    const uint64_t a = b->ctx->caps.non_coherent_atom_size;
    VkMappedMemoryRange r = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = b->memory};
    r.offset = off / a * a;
    uint64_t hi = (off + n + a - 1) / a * a;
    if (hi >= b->alloc_size) {
        hi = b->alloc_size;
        r.size = VK_WHOLE_SIZE;
    } else {
        r.size = hi - r.offset;
    }
    *end = hi;
    return r;
}

hs_status hs_vk_buffer_flush(hs_vk_buffer *b, uint64_t off, uint64_t n) {
    hs_status st = check_mapped(b, off, n, "hs_vk_buffer_flush");
    if (st != HS_OK || n == 0 || b->coherent) return st;
    uint64_t end;
    VkMappedMemoryRange r = atom_range(b, off, n, &end);
    /* Emulation: the host's writes leave its "cache" (the shadow) for the
     * memory the device reads, whole atoms at a time. */
    if (b->shadow) memcpy((char *)b->mapped + r.offset, (char *)b->shadow + r.offset, end - r.offset);
    /* Host writes in the range -> visible to the device's next submit. */
    HS_VK_CALL(vkFlushMappedMemoryRanges(b->ctx->device, 1, &r), NULL);
fail:
    return st;
}

hs_status hs_vk_buffer_invalidate(hs_vk_buffer *b, uint64_t off, uint64_t n) {
    hs_status st = check_mapped(b, off, n, "hs_vk_buffer_invalidate");
    if (st != HS_OK || n == 0 || b->coherent) return st;
    uint64_t end;
    VkMappedMemoryRange r = atom_range(b, off, n, &end);
    /* Device writes in the range (from a submit whose fence has signalled)
     * -> visible to host reads through the map. */
    HS_VK_CALL(vkInvalidateMappedMemoryRanges(b->ctx->device, 1, &r), NULL);
    /* Emulation: the host's stale copy of those atoms is replaced by what
     * the device wrote. */
    if (b->shadow) memcpy((char *)b->shadow + r.offset, (char *)b->mapped + r.offset, end - r.offset);
fail:
    return st;
}

typedef struct copy_args {
    VkBuffer src, dst;
    VkBufferCopy region;
} copy_args;

static void rec_copy(VkCommandBuffer cmd, void *user) {
    copy_args *a = user;
    vkCmdCopyBuffer(cmd, a->src, a->dst, 1, &a->region);
}

/* Staging chunk: big enough to amortise a submit, small enough for any heap. */
#define HS_STAGING_BYTES (32ull << 20)

static hs_status staged(hs_vk_buffer *b, uint64_t off, void *host, uint64_t n, bool upload) {
    hs_status st = HS_OK;
    hs_vk_ctx *ctx = b->ctx;
    uint64_t chunk = n < HS_STAGING_BYTES ? n : HS_STAGING_BYTES;
    hs_vk_buffer *stg = NULL;
    HS_TRY(hs_vk_buffer_create(ctx, chunk, HS_MEM_HOST, &stg));
    for (uint64_t done = 0; done < n; done += chunk) {
        uint64_t m = n - done < chunk ? n - done : chunk;
        copy_args a = {.region = {.size = m}};
        if (upload) {
            memcpy(hs_vk_buffer_map(stg), (char *)host + done, m);
            /* The chunk just written -> visible to the copy below. */
            HS_TRY(hs_vk_buffer_flush(stg, 0, m));
            a.src = stg->buffer;
            a.dst = b->buffer;
            a.region.dstOffset = off + done;
        } else {
            a.src = b->buffer;
            a.dst = stg->buffer;
            a.region.srcOffset = off + done;
        }
        HS_TRY(hs_vk_oneshot(ctx, rec_copy, &a));
        if (!upload) {
            /* The copy's writes into the staging buffer -> visible to the memcpy. */
            HS_TRY(hs_vk_buffer_invalidate(stg, 0, m));
            memcpy((char *)host + done, hs_vk_buffer_map(stg), m);
        }
    }
fail:
    hs_vk_buffer_destroy(stg);
    return st;
}

hs_status hs_vk_buffer_upload(hs_vk_buffer *b, uint64_t off, const void *src, uint64_t n) {
    hs_status st = check_range(b, off, n, "hs_vk_buffer_upload");
    if (st != HS_OK || n == 0) return st;
    if (b->mapped) {
        if (!b->coherent) {
            /* The flush below writes back whole atoms: first take in what the
             * device wrote to the bytes around the range that share its first
             * and last atom, so that their write-back does not undo it. */
            const uint64_t a = b->ctx->caps.non_coherent_atom_size;
            if (off % a) HS_TRY(hs_vk_buffer_invalidate(b, off, 1));
            if ((off + n) % a) HS_TRY(hs_vk_buffer_invalidate(b, off + n - 1, 1));
        }
        memcpy((char *)hs_vk_buffer_map(b) + off, src, n);
        /* The bytes just written -> visible to later submits. */
        HS_TRY(hs_vk_buffer_flush(b, off, n));
        return HS_OK;
    }
    return staged(b, off, (void *)src, n, true);
fail:
    return st;
}

hs_status hs_vk_buffer_download(hs_vk_buffer *b, uint64_t off, void *dst, uint64_t n) {
    hs_status st = check_range(b, off, n, "hs_vk_buffer_download");
    if (st != HS_OK || n == 0) return st;
    if (b->mapped) {
        /* What earlier submits wrote to the range -> visible to the memcpy. */
        HS_TRY(hs_vk_buffer_invalidate(b, off, n));
        memcpy(dst, (char *)hs_vk_buffer_map(b) + off, n);
        return HS_OK;
    }
    return staged(b, off, dst, n, false);
fail:
    return st;
}

typedef struct fill_args {
    VkBuffer dst;
    uint64_t off, n;
    uint32_t v;
} fill_args;

static void rec_fill(VkCommandBuffer cmd, void *user) {
    fill_args *a = user;
    vkCmdFillBuffer(cmd, a->dst, a->off, a->n, a->v);
}

hs_status hs_vk_buffer_fill(hs_vk_buffer *b, uint64_t off, uint64_t n, uint32_t value) {
    hs_status st = check_range(b, off, n, "hs_vk_buffer_fill");
    if (st != HS_OK || n == 0) return st;
    if (off % 4 || n % 4) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_vk_buffer_fill: offset and size must be multiples of 4");
    fill_args a = {b->buffer, off, n, value};
    return hs_vk_oneshot(b->ctx, rec_fill, &a);
}
