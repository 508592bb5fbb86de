/* vk_buffer: storage buffers, device-local with staging where memory is not
 * host visible, persistently mapped where it is (unified memory, lavapipe). */
#include "vk_internal.h"

#include <string.h>

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
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .size = size,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    snprintf(detail, sizeof detail, "requested %.1f MiB", size / 1048576.0);
    HS_VK_CALL(vkCreateBuffer(ctx->device, &bci, NULL, &b->buffer), detail);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(ctx->device, b->buffer, &req);
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
        type = hs_vk_find_memory(ctx, req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                                 VK_MEMORY_PROPERTY_HOST_CACHED_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
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
    HS_VK_CALL(vkBindBufferMemory(ctx->device, b->buffer, b->memory, 0), NULL);
    VkMemoryPropertyFlags f = ctx->mem_props.memoryTypes[type].propertyFlags;
    if (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
        HS_VK_CALL(vkMapMemory(ctx->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped), detail);
        b->coherent = f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    }
    *out = b;
    return HS_OK;
fail:
    hs_vk_buffer_destroy(b);
    return st;
}

void hs_vk_buffer_destroy(hs_vk_buffer *b) {
    if (!b) return;
    VkDevice d = b->ctx->device;
    if (b->mapped) vkUnmapMemory(d, b->memory);
    if (b->buffer) vkDestroyBuffer(d, b->buffer, NULL);
    if (b->memory) vkFreeMemory(d, b->memory, NULL);
    hs_vk_obj_unlink(b->ctx, &b->obj);
    free(b);
}

uint64_t hs_vk_buffer_size(const hs_vk_buffer *b) { return b->size; }
void *hs_vk_buffer_map(const hs_vk_buffer *b) { return b->mapped; }

static hs_status check_range(const hs_vk_buffer *b, uint64_t off, uint64_t n, const char *what) {
    if (off > b->size || n > b->size - off)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "%s: range [%llu, +%llu) outside buffer of %llu bytes", what,
                       (unsigned long long)off, (unsigned long long)n, (unsigned long long)b->size);
    return HS_OK;
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
            memcpy(stg->mapped, (char *)host + done, m);
            a.src = stg->buffer;
            a.dst = b->buffer;
            a.region.dstOffset = off + done;
        } else {
            a.src = b->buffer;
            a.dst = stg->buffer;
            a.region.srcOffset = off + done;
        }
        HS_TRY(hs_vk_oneshot(ctx, rec_copy, &a));
        if (!upload) memcpy((char *)host + done, stg->mapped, m);
    }
fail:
    hs_vk_buffer_destroy(stg);
    return st;
}

hs_status hs_vk_buffer_upload(hs_vk_buffer *b, uint64_t off, const void *src, uint64_t n) {
    hs_status st = check_range(b, off, n, "hs_vk_buffer_upload");
    if (st != HS_OK || n == 0) return st;
    if (b->mapped) {
        memcpy((char *)b->mapped + off, src, n);
        if (!b->coherent) {
            VkMappedMemoryRange r = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
                                     .memory = b->memory, .offset = 0, .size = VK_WHOLE_SIZE};
            HS_VK_CALL(vkFlushMappedMemoryRanges(b->ctx->device, 1, &r), NULL);
        }
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
        if (!b->coherent) {
            VkMappedMemoryRange r = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
                                     .memory = b->memory, .offset = 0, .size = VK_WHOLE_SIZE};
            HS_VK_CALL(vkInvalidateMappedMemoryRanges(b->ctx->device, 1, &r), NULL);
        }
        memcpy(dst, (char *)b->mapped + off, n);
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
