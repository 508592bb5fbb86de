/* vk_seq: command sequences recorded once and replayed, with automatic
 * barriers from buffer hazard tracking, and per-dispatch timestamps.
 *
 * Split execution (ctx->n_parts > 1, lavapipe): a sequence is recorded once
 * per part, each part's command buffer on its own logical device. A
 * dispatch's workgroups are divided among the parts along its first
 * dimension of more than one workgroup, or a later one where that divides
 * unevenly (hs_vk_split_dim; vkCmdDispatchBase; a shader that
 * reads gl_NumWorkGroups runs whole on part 0); copies and fills run on part
 * 0. Every barrier is, on every part, the barrier plus one spin dispatch
 * (shaders/spin.comp) that waits until all parts have reached it, so what
 * any part wrote before a barrier is there for every part after it. With
 * lavapipe's worker threads off, each part runs in its device's queue
 * thread: the dispatches cost no thread wake-ups, and the parts run on
 * separate cores. Workgroups compute the same values whichever part runs
 * them, so results are bitwise those of one device. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "vk_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STBDS_NO_SHORT_NAMES
#include "stb_ds.h"

/* Empties an stb_ds array, keeping its storage. */
#define HS_ARR_CLEAR(a)                                                                            \
    do {                                                                                           \
        if (a) stbds_header(a)->length = 0;                                                        \
    } while (0)

#define HS_SEQ_SETS_PER_POOL 256
/* Workgroups of a split barrier's wait (shaders/spin.comp), each waiting up
 * to llvmpipe's loop limit (4: 3-6 s or half a second, by the machine): on a
 * sequence's first submit, where a part may stall compiling shader variants,
 * and after. */
#define HS_VK_SPIN_GROUPS_FIRST 64
#define HS_VK_SPIN_GROUPS 4
#define HS_SEQ_QUERIES_PER_POOL 512

struct hs_vk_seq {
    hs_vk_obj obj; /* first: the context's live list */
    hs_vk_ctx *ctx;
    uint32_t n_parts;
    VkCommandBuffer cmd[HS_VK_MAX_PARTS]; /* per part (the context's n_parts) */
    VkFence fence[HS_VK_MAX_PARTS];
    VkDescriptorPool *pools[HS_VK_MAX_PARTS]; /* stb_ds arrays; all reset on begin */
    uint32_t n_sets[HS_VK_MAX_PARTS];         /* sets allocated since begin */
    uint32_t n_spin;                          /* split barriers since begin */
    uint32_t n_submit;                        /* submits since begin */
    uint32_t part_dispatches[HS_VK_MAX_PARTS]; /* dispatches recorded per part (barriers' not counted) */
    VkBuffer *written;       /* written since the last barrier */
    VkBuffer *read;          /* read since the last barrier */
    bool recording, ready;
    bool failed; /* a split barrier could not be recorded (reported by end) */
    uint32_t n_dispatch, n_barrier;
    /* Profiling: one timestamp before the first dispatch and after each one. */
    VkQueryPool *qpools;
    uint32_t n_queries;
    const hs_vk_pipeline **pipes; /* pipeline of each dispatch (names for the profile, variants for tests) */
};

hs_status hs_vk_seq_create(hs_vk_ctx *ctx, hs_vk_seq **out) {
    hs_status st = HS_OK;
    *out = NULL;
    hs_vk_seq *s = calloc(1, sizeof *s);
    if (!s) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_vk_seq_create: out of memory");
    s->ctx = ctx;
    s->n_parts = ctx->n_parts;
    hs_vk_obj_link(ctx, &s->obj, HS_VK_OBJ_SEQ);
    for (uint32_t k = 0; k < s->n_parts; k++) {
        VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                           .commandPool = k ? ctx->part[k].cmd_pool : ctx->cmd_pool,
                                           .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                           .commandBufferCount = 1};
        HS_VK_CALL(vkAllocateCommandBuffers(hs_vk_part_device(ctx, k), &cai, &s->cmd[k]), NULL);
        VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        HS_VK_CALL(vkCreateFence(hs_vk_part_device(ctx, k), &fci, NULL, &s->fence[k]), NULL);
    }
    *out = s;
    return HS_OK;
fail:
    hs_vk_seq_destroy(s);
    return st;
}

void hs_vk_seq_destroy(hs_vk_seq *s) {
    if (!s) return;
    for (uint32_t k = 0; k < s->n_parts; k++) {
        VkDevice d = hs_vk_part_device(s->ctx, k);
        if (s->cmd[k]) vkFreeCommandBuffers(d, k ? s->ctx->part[k].cmd_pool : s->ctx->cmd_pool, 1, &s->cmd[k]);
        if (s->fence[k]) vkDestroyFence(d, s->fence[k], NULL);
        for (ptrdiff_t i = 0; i < stbds_arrlen(s->pools[k]); i++) vkDestroyDescriptorPool(d, s->pools[k][i], NULL);
        stbds_arrfree(s->pools[k]);
    }
    VkDevice d = s->ctx->device;
    for (ptrdiff_t i = 0; i < stbds_arrlen(s->qpools); i++) vkDestroyQueryPool(d, s->qpools[i], NULL);
    stbds_arrfree(s->qpools);
    stbds_arrfree(s->written);
    stbds_arrfree(s->read);
    stbds_arrfree(s->pipes);
    hs_vk_obj_unlink(s->ctx, &s->obj);
    free(s);
}

hs_vk_ctx *hs_vk_seq_ctx(const hs_vk_seq *s) { return s->ctx; }
uint32_t hs_vk_seq_dispatch_count(const hs_vk_seq *s) { return s->n_dispatch; }
uint32_t hs_vk_seq_barrier_count(const hs_vk_seq *s) { return s->n_barrier; }
uint32_t hs_vk_seq_part_dispatches(const hs_vk_seq *s, uint32_t part) {
    return part < s->n_parts ? s->part_dispatches[part] : 0;
}
const hs_vk_pipeline *hs_vk_seq_dispatch_pipeline(const hs_vk_seq *s, uint32_t i) {
    return i < (uint32_t)stbds_arrlen(s->pipes) ? s->pipes[i] : NULL;
}

hs_status hs_vk_seq_begin(hs_vk_seq *s) {
    hs_status st = HS_OK;
    for (uint32_t k = 0; k < s->n_parts; k++) {
        VkDevice d = hs_vk_part_device(s->ctx, k);
        for (ptrdiff_t i = 0; i < stbds_arrlen(s->pools[k]); i++)
            HS_VK_CALL(vkResetDescriptorPool(d, s->pools[k][i], 0), NULL);
        s->n_sets[k] = 0;
    }
    HS_ARR_CLEAR(s->written);
    HS_ARR_CLEAR(s->read);
    HS_ARR_CLEAR(s->pipes);
    s->n_dispatch = s->n_barrier = s->n_spin = s->n_submit = 0;
    memset(s->part_dispatches, 0, sizeof s->part_dispatches);
    s->n_queries = 0;
    s->ready = false;
    for (uint32_t k = 0; k < s->n_parts; k++) {
        HS_VK_CALL(vkResetCommandBuffer(s->cmd[k], 0), NULL);
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        HS_VK_CALL(vkBeginCommandBuffer(s->cmd[k], &bi), NULL);
    }
    s->recording = true;
    return HS_OK;
fail:
    return st;
}

/* Allocates the next descriptor set of part k; pools fill in order and are
 * kept (reset, not freed) across recordings. */
static hs_status next_set(hs_vk_seq *s, uint32_t k, VkDescriptorSetLayout layout, VkDescriptorSet *set) {
    hs_status st = HS_OK;
    const VkDevice dev = hs_vk_part_device(s->ctx, k);
    uint32_t pool_index = s->n_sets[k] / HS_SEQ_SETS_PER_POOL;
    if (pool_index >= (uint32_t)stbds_arrlen(s->pools[k])) {
        VkDescriptorPoolSize ps[3] = {
            {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, HS_SEQ_SETS_PER_POOL * HS_VK_MAX_BINDINGS},
            {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, HS_SEQ_SETS_PER_POOL * HS_VK_MAX_BINDINGS},
            {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, HS_SEQ_SETS_PER_POOL * HS_VK_MAX_BINDINGS}};
        VkDescriptorPoolCreateInfo dpci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                           .maxSets = HS_SEQ_SETS_PER_POOL,
                                           .poolSizeCount = s->ctx->caps.max_texel_elements ? 3 : 2,
                                           .pPoolSizes = ps};
        VkDescriptorPool pool;
        HS_VK_CALL(vkCreateDescriptorPool(dev, &dpci, NULL, &pool), NULL);
        stbds_arrput(s->pools[k], pool);
    }
    VkDescriptorSetAllocateInfo dsai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                        .descriptorPool = s->pools[k][pool_index],
                                        .descriptorSetCount = 1,
                                        .pSetLayouts = &layout};
    HS_VK_CALL(vkAllocateDescriptorSets(dev, &dsai, set), NULL);
    s->n_sets[k]++;
fail:
    return st;
}

/* Binds p on part k: a descriptor set of the bindings (part k's buffer, over
 * ranges[i], or its texel view views[i][k]) and the push constants. */
static hs_status bind_part(hs_vk_seq *s, uint32_t k, const hs_vk_pipeline *p, const hs_vk_binding *binds,
                           const uint64_t *ranges, VkBufferView (*views)[HS_VK_MAX_PARTS], const void *push) {
    hs_status st = HS_OK;
    const struct hs_vk_pipeline_part *x = &p->part[k];
    VkDescriptorBufferInfo infos[HS_VK_MAX_BINDINGS];
    VkWriteDescriptorSet writes[HS_VK_MAX_BINDINGS];
    VkDescriptorSet set;
    HS_TRY(next_set(s, k, x->set_layout, &set));
    for (uint32_t i = 0; i < p->n_bindings; i++) {
        writes[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                           .dstSet = set,
                                           .dstBinding = i,
                                           .descriptorCount = 1,
                                           .descriptorType = hs_vk_binding_type(p, i)};
        if (p->texel_mask & (1u << i)) {
            writes[i].pTexelBufferView = &views[i][k];
        } else {
            infos[i] = (VkDescriptorBufferInfo){hs_vk_part_buffer(binds[i].buf, k), binds[i].offset, ranges[i]};
            writes[i].pBufferInfo = &infos[i];
        }
    }
    vkUpdateDescriptorSets(hs_vk_part_device(s->ctx, k), p->n_bindings, writes, 0, NULL);
    vkCmdBindPipeline(s->cmd[k], VK_PIPELINE_BIND_POINT_COMPUTE, x->pipeline);
    vkCmdBindDescriptorSets(s->cmd[k], VK_PIPELINE_BIND_POINT_COMPUTE, x->layout, 0, 1, &set, 0, NULL);
    if (p->push_size) {
        HS_ASSERT(push);
        vkCmdPushConstants(s->cmd[k], x->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_size, push);
    }
fail:
    return st;
}

/* Records p on part k (bind_part) over the workgroups base .. base + cnt
 * (vkCmdDispatchBase where there are parts). */
static hs_status record_part(hs_vk_seq *s, uint32_t k, const hs_vk_pipeline *p, const hs_vk_binding *binds,
                             const uint64_t *ranges, VkBufferView (*views)[HS_VK_MAX_PARTS], const void *push,
                             const uint32_t base[3], const uint32_t cnt[3]) {
    hs_status st = bind_part(s, k, p, binds, ranges, views, push);
    if (st != HS_OK) return st;
    if (s->n_parts > 1) vkCmdDispatchBase(s->cmd[k], base[0], base[1], base[2], cnt[0], cnt[1], cnt[2]);
    else vkCmdDispatch(s->cmd[k], cnt[0], cnt[1], cnt[2]);
    return HS_OK;
}

static bool contains(VkBuffer *arr, VkBuffer b) {
    for (ptrdiff_t i = 0; i < stbds_arrlen(arr); i++)
        if (arr[i] == b) return true;
    return false;
}

static void emit_barrier(hs_vk_seq *s) {
    /* Orders every earlier compute-shader or transfer write before every later
     * compute-shader or transfer access (and later writes after earlier reads). */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    for (uint32_t k = 0; k < s->n_parts; k++)
        vkCmdPipelineBarrier(s->cmd[k], stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
    HS_ARR_CLEAR(s->written);
    HS_ARR_CLEAR(s->read);
    s->n_barrier++;
    if (s->n_parts > 1) {
        /* Split: every part waits for the others (spin.comp), then the barrier again on each. */
        const hs_vk_pipeline *p = s->ctx->spin;
        /* HS_VK_TEST_SPLIT_LATE (tests): the first barrier waits for a part too many. */
        s->n_spin++;
        const uint32_t target = s->n_spin * s->n_parts + (s->n_spin == 1 && getenv("HS_VK_TEST_SPLIT_LATE"));
        const hs_vk_binding sync = {s->ctx->sync, 0, 0};
        const uint64_t range = VK_WHOLE_SIZE;
        for (uint32_t k = 0; k < s->n_parts; k++) {
            if (bind_part(s, k, p, &sync, &range, NULL, &target) != HS_OK) {
                s->failed = true;
                return;
            }
            /* Indirect: its workgroup count is set per submit. lavapipe keeps the base of the last
             * vkCmdDispatchBase for an indirect dispatch (seen: a part's workgroup 0 never counted in),
             * so an empty dispatch at base 0 first. */
            vkCmdDispatchBase(s->cmd[k], 0, 0, 0, 0, 1, 1);
            vkCmdDispatchIndirect(s->cmd[k], hs_vk_part_buffer(s->ctx->sync, k), 4 * HS_VK_SYNC_GROUPS);
            vkCmdPipelineBarrier(s->cmd[k], stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
        }
    }
}

void hs_vk_seq_barrier(hs_vk_seq *s) {
    HS_ASSERT(s->recording);
    emit_barrier(s);
}

/* Inserts a barrier if the access conflicts with what ran since the last one,
 * then records the access. */
static void track(hs_vk_seq *s, const VkBuffer *reads, uint32_t nr, const VkBuffer *writes, uint32_t nw) {
    bool hazard = false;
    for (uint32_t i = 0; i < nr && !hazard; i++) hazard = contains(s->written, reads[i]);
    for (uint32_t i = 0; i < nw && !hazard; i++)
        hazard = contains(s->written, writes[i]) || contains(s->read, writes[i]);
    if (hazard) emit_barrier(s);
    for (uint32_t i = 0; i < nr; i++)
        if (!contains(s->read, reads[i])) stbds_arrput(s->read, reads[i]);
    for (uint32_t i = 0; i < nw; i++)
        if (!contains(s->written, writes[i])) stbds_arrput(s->written, writes[i]);
}

static hs_status timestamp(hs_vk_seq *s) {
    hs_status st = HS_OK;
    uint32_t pool = s->n_queries / HS_SEQ_QUERIES_PER_POOL, q = s->n_queries % HS_SEQ_QUERIES_PER_POOL;
    if (pool >= (uint32_t)stbds_arrlen(s->qpools)) {
        VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                     .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                     .queryCount = HS_SEQ_QUERIES_PER_POOL};
        VkQueryPool qp;
        HS_VK_CALL(vkCreateQueryPool(s->ctx->device, &qci, NULL, &qp), NULL);
        stbds_arrput(s->qpools, qp);
    }
    if (q == 0) vkCmdResetQueryPool(s->cmd[0], s->qpools[pool], 0, HS_SEQ_QUERIES_PER_POOL);
    vkCmdWriteTimestamp(s->cmd[0], VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, s->qpools[pool], q);
    s->n_queries++;
fail:
    return st;
}

/* ceil(g / parts) parts: the busiest part's share of g workgroups, times parts (g when even). */
static uint64_t split_over(uint32_t g, uint64_t parts) { return (g + parts - 1) / parts * parts; }

/* An attention grid of 3 head blocks by 16 query blocks is cut along the queries, not 2 : 1 along
 * the heads, while a product's grid stays cut along its rows even where they divide a little
 * unevenly (along its columns every part would read every weight). */
uint32_t hs_vk_split_dim(const uint32_t g[3], uint32_t parts) {
    if (parts < 2) return 3;
    uint32_t dim = 0;
    while (dim < 3 && g[dim] < 2) dim++;
    if (dim == 3 || 8 * split_over(g[dim], parts) <= 9 * (uint64_t)g[dim]) return dim;
    /* a later dimension whose busiest share, split_over(g[d]) / g[d], is below dim's */
    for (uint32_t d = dim + 1; d < 3; d++)
        if (g[d] >= 2 && split_over(g[d], parts) * g[dim] < split_over(g[dim], parts) * (uint64_t)g[d]) dim = d;
    return dim;
}

hs_status hs_vk_seq_dispatch(hs_vk_seq *s, const hs_vk_pipeline *p, const hs_vk_binding *binds,
                             uint32_t n_binds, const void *push, uint32_t gx, uint32_t gy, uint32_t gz) {
    hs_status st = HS_OK;
    const hs_vk_caps *c = &s->ctx->caps;
    HS_ASSERT(s->recording);
    if (n_binds != p->n_bindings)
        return HS_FAIL(HS_ERR_INVALID_ARG, "dispatch %s: %u bindings given, pipeline has %u", p->name,
                       n_binds, p->n_bindings);
    if (gx == 0 || gy == 0 || gz == 0) return HS_OK; /* empty work: nothing to record */
    if (gx > c->max_wg_count[0] || gy > c->max_wg_count[1] || gz > c->max_wg_count[2])
        return HS_FAIL(HS_ERR_VK_UNSUPPORTED, "dispatch %s: %ux%ux%u workgroups exceed the device limit %ux%ux%u",
                       p->name, gx, gy, gz, c->max_wg_count[0], c->max_wg_count[1], c->max_wg_count[2]);

    /* Per binding: its range, and per part its buffer or texel view. */
    uint64_t ranges[HS_VK_MAX_BINDINGS];
    VkBufferView views[HS_VK_MAX_BINDINGS][HS_VK_MAX_PARTS];
    VkBuffer rd[HS_VK_MAX_BINDINGS], wr[HS_VK_MAX_BINDINGS];
    uint32_t nr = 0, nw = 0;
    for (uint32_t i = 0; i < n_binds; i++) {
        const hs_vk_binding *b = &binds[i];
        if (!b->buf) return HS_FAIL(HS_ERR_INVALID_ARG, "dispatch %s: binding %u has no buffer", p->name, i);
        uint64_t size = b->buf->size;
        if (b->offset >= size)
            return HS_FAIL(HS_ERR_OUT_OF_RANGE, "dispatch %s: binding %u offset %llu past buffer end %llu",
                           p->name, i, (unsigned long long)b->offset, (unsigned long long)size);
        if (p->texel_mask & (1u << i)) {
            /* a uniform texel buffer: RGBA32UI texels, a view per range */
            uint64_t range = b->range ? b->range : (size - b->offset) & ~(uint64_t)15;
            if (!b->range && range / 16 > c->max_texel_elements) range = c->max_texel_elements * 16;
            if (b->offset % c->min_texel_offset_align || range % 16 || !range || range > size - b->offset ||
                range / 16 > c->max_texel_elements)
                return HS_FAIL(HS_ERR_INVALID_ARG,
                               "dispatch %s: texel binding %u [%llu, +%llu): offset must be a multiple of %llu, "
                               "range of 16 and at most %llu texels inside the buffer",
                               p->name, i, (unsigned long long)b->offset, (unsigned long long)range,
                               (unsigned long long)c->min_texel_offset_align,
                               (unsigned long long)c->max_texel_elements);
            const VkBufferView *v;
            HS_TRY(hs_vk_buffer_texel_view(b->buf, b->offset, range, &v));
            memcpy(views[i], v, sizeof views[i]); /* v moves when the buffer gets another view */
            rd[nr++] = b->buf->buffer;
            continue;
        }
        /* a storage or uniform buffer */
        const bool ubo = p->uniform_mask & (1u << i);
        const uint64_t align = ubo ? c->min_uniform_offset_align : c->min_storage_offset_align;
        const uint64_t max_range = ubo ? c->max_uniform_range : c->max_storage_buffer_range;
        if (align && b->offset % align)
            return HS_FAIL(HS_ERR_INVALID_ARG, "dispatch %s: binding %u offset %llu not aligned to %llu",
                           p->name, i, (unsigned long long)b->offset, (unsigned long long)align);
        uint64_t range = b->range ? b->range : size - b->offset;
        if (!b->range && range > max_range) range = max_range;
        if (range > size - b->offset)
            return HS_FAIL(HS_ERR_OUT_OF_RANGE, "dispatch %s: binding %u range past buffer end", p->name, i);
        if (range > max_range)
            return HS_FAIL(HS_ERR_VK_UNSUPPORTED,
                           "dispatch %s: binding %u range %llu exceeds max%sBufferRange %llu", p->name, i,
                           (unsigned long long)range, ubo ? "Uniform" : "Storage",
                           (unsigned long long)max_range);
        ranges[i] = range;
        if (p->write_mask & (1u << i)) wr[nw++] = b->buf->buffer;
        else rd[nr++] = b->buf->buffer;
    }
    track(s, rd, nr, wr, nw);
    if (s->ctx->profiling && s->n_queries == 0) HS_TRY(timestamp(s));
    /* Split: part k's share of one dimension (hs_vk_split_dim). */
    const uint32_t g[3] = {gx, gy, gz};
    const uint32_t dim = p->splittable ? hs_vk_split_dim(g, s->n_parts) : 3; /* 3: whole on part 0 */
    for (uint32_t k = 0; k < s->n_parts; k++) {
        uint32_t base[3] = {0, 0, 0}, cnt[3] = {gx, gy, gz};
        if (dim < 3) {
            base[dim] = (uint32_t)((uint64_t)g[dim] * k / s->n_parts);
            cnt[dim] = (uint32_t)((uint64_t)g[dim] * (k + 1) / s->n_parts) - base[dim];
        } else if (k) {
            continue; /* whole on part 0 */
        }
        if (dim < 3 && !cnt[dim]) continue;
        HS_TRY(record_part(s, k, p, binds, ranges, views, push, base, cnt));
        s->part_dispatches[k]++;
    }
    s->n_dispatch++;
    stbds_arrput(s->pipes, p);
    if (s->ctx->profiling) HS_TRY(timestamp(s));
fail:
    return st;
}

hs_status hs_vk_seq_copy(hs_vk_seq *s, hs_vk_buffer *src, uint64_t src_off, hs_vk_buffer *dst,
                         uint64_t dst_off, uint64_t n) {
    HS_ASSERT(s->recording);
    if (src_off > src->size || n > src->size - src_off || dst_off > dst->size || n > dst->size - dst_off)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "hs_vk_seq_copy: range outside a buffer");
    if (!n) return HS_OK;
    track(s, &src->buffer, 1, &dst->buffer, 1);
    VkBufferCopy r = {src_off, dst_off, n};
    vkCmdCopyBuffer(s->cmd[0], src->buffer, dst->buffer, 1, &r);
    return HS_OK;
}

hs_status hs_vk_seq_copy_rows(hs_vk_seq *s, hs_vk_buffer *src, uint64_t src_off, uint64_t src_stride,
                              hs_vk_buffer *dst, uint64_t dst_off, uint64_t dst_stride, uint64_t row_bytes,
                              uint32_t rows) {
    HS_ASSERT(s->recording);
    if (!rows || !row_bytes) return HS_OK;
    const uint64_t src_end = src_off + (rows - 1) * src_stride + row_bytes;
    const uint64_t dst_end = dst_off + (rows - 1) * dst_stride + row_bytes;
    if (src_end > src->size || dst_end > dst->size || src_end < src_off || dst_end < dst_off)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "hs_vk_seq_copy_rows: %u rows of %llu bytes outside a buffer", rows,
                       (unsigned long long)row_bytes);
    if (src == dst) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_vk_seq_copy_rows: source and destination are one buffer");
    VkBufferCopy *r = malloc(sizeof *r * rows);
    if (!r) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_vk_seq_copy_rows: out of memory");
    for (uint32_t i = 0; i < rows; i++) r[i] = (VkBufferCopy){src_off + i * src_stride, dst_off + i * dst_stride, row_bytes};
    track(s, &src->buffer, 1, &dst->buffer, 1);
    vkCmdCopyBuffer(s->cmd[0], src->buffer, dst->buffer, rows, r);
    free(r);
    return HS_OK;
}

hs_status hs_vk_seq_fill(hs_vk_seq *s, hs_vk_buffer *dst, uint64_t off, uint64_t n, uint32_t v) {
    HS_ASSERT(s->recording);
    if (off % 4 || n % 4 || off > dst->size || n > dst->size - off)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "hs_vk_seq_fill: bad range");
    if (!n) return HS_OK;
    track(s, NULL, 0, &dst->buffer, 1);
    vkCmdFillBuffer(s->cmd[0], dst->buffer, off, n, v);
    return HS_OK;
}

hs_status hs_vk_seq_end(hs_vk_seq *s) {
    hs_status st = HS_OK;
    HS_ASSERT(s->recording);
    /* Make the sequence's writes visible to the host once the fence signals. */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    s->recording = false;
    for (uint32_t k = 0; k < s->n_parts; k++) {
        vkCmdPipelineBarrier(s->cmd[k], VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
        HS_VK_CALL(vkEndCommandBuffer(s->cmd[k]), NULL);
    }
    if (s->failed) return HS_FAIL(HS_ERR_VK_OTHER, "hs_vk_seq_end: a split barrier could not be recorded");
    s->ready = true;
fail:
    return st;
}

hs_status hs_vk_seq_submit(hs_vk_seq *s) {
    hs_status st = HS_OK;
    if (!s->ready) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_vk_seq_submit: sequence not ended");
    VkDevice d = s->ctx->device;
    uint32_t *sync = s->n_parts > 1 ? s->ctx->sync->host : NULL;
    if (sync) { /* no part runs: the barriers count from 0 */
        sync[0] = sync[1] = 0;
        /* HS_VK_TEST_SPLIT_LATE (tests): the short wait, so that the late barrier fails soon. */
        const bool first = s->n_submit == 0 && !getenv("HS_VK_TEST_SPLIT_LATE");
        sync[HS_VK_SYNC_GROUPS] = first ? HS_VK_SPIN_GROUPS_FIRST : HS_VK_SPIN_GROUPS;
    }
    s->n_submit++;
    /* HS_VK_TEST_SPLIT_STALL_MS (tests): part 0 starts that late, the others waiting for it at the barriers. */
    const char *stall = sync ? getenv("HS_VK_TEST_SPLIT_STALL_MS") : NULL;
    for (uint32_t k = s->n_parts; k-- > 0;) {
        VkSubmitInfo si = {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &s->cmd[k]};
        if (k == 0 && stall) {
            const long ms = atol(stall);
            nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000L}, NULL);
        }
        HS_VK_CALL(vkResetFences(hs_vk_part_device(s->ctx, k), 1, &s->fence[k]), NULL);
        HS_VK_CALL(vkQueueSubmit(k ? s->ctx->part[k].queue : s->ctx->queue, 1, &si, s->fence[k]), NULL);
    }
    for (uint32_t k = 0; k < s->n_parts; k++)
        HS_VK_CALL(vkWaitForFences(hs_vk_part_device(s->ctx, k), 1, &s->fence[k], VK_TRUE, UINT64_MAX), NULL);
    if (sync && __atomic_load_n(&sync[1], __ATOMIC_ACQUIRE))
        return HS_FAIL(HS_ERR_VK_DEVICE_LOST,
                       "split execution: a part did not reach a barrier in time (set HS_VK_DISABLE_SPLIT=1)");
    if (s->ctx->profiling && s->n_queries > 1) {
        uint64_t *ts = malloc(sizeof(uint64_t) * s->n_queries);
        if (!ts) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "profile: out of memory");
        for (uint32_t base = 0; base < s->n_queries; base += HS_SEQ_QUERIES_PER_POOL) {
            uint32_t n = s->n_queries - base;
            if (n > HS_SEQ_QUERIES_PER_POOL) n = HS_SEQ_QUERIES_PER_POOL;
            VkResult r = vkGetQueryPoolResults(d, s->qpools[base / HS_SEQ_QUERIES_PER_POOL], 0, n,
                                               sizeof(uint64_t) * n, ts + base, sizeof(uint64_t),
                                               VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
            if (r != VK_SUCCESS) {
                free(ts);
                return hs_vk_result(r, "vkGetQueryPoolResults", __FILE__, __LINE__, NULL);
            }
        }
        for (uint32_t i = 0; i + 1 < s->n_queries; i++)
            hs_vk_profile_add(s->ctx, s->pipes[i]->name, (double)(ts[i + 1] - ts[i]) * s->ctx->caps.timestamp_period_ns);
        free(ts);
    }
fail:
    return st;
}

bool hs_vk_profiling(const hs_vk_ctx *ctx) { return ctx->profiling; }
void hs_vk_profile_enable(hs_vk_ctx *ctx, bool on) { ctx->profiling = on && ctx->caps.timestamps; }

void hs_vk_profile_reset(hs_vk_ctx *ctx) {
    stbds_shfree(ctx->profile);
    stbds_sh_new_strdup(ctx->profile);
}

void hs_vk_profile_add(hs_vk_ctx *ctx, const char *name, double ns) {
    ptrdiff_t i = stbds_shgeti(ctx->profile, name);
    if (i < 0) {
        hs_vk_profile_entry e = {.key = (char *)name, .total_ns = 0, .count = 0};
        stbds_shputs(ctx->profile, e);
        i = stbds_shgeti(ctx->profile, name);
    }
    ctx->profile[i].total_ns += ns;
    ctx->profile[i].count++;
}

double hs_vk_profile_total_ns(const hs_vk_ctx *cctx, const char *name, uint64_t *count) {
    hs_vk_ctx *ctx = (hs_vk_ctx *)cctx; /* stb_ds lookups write a temporary into the map header */
    ptrdiff_t i = stbds_shgeti(ctx->profile, name);
    if (count) *count = i < 0 ? 0 : ctx->profile[i].count;
    return i < 0 ? 0.0 : ctx->profile[i].total_ns;
}

static int by_total(const void *a, const void *b) {
    double x = ((const hs_vk_profile_entry *)a)->total_ns, y = ((const hs_vk_profile_entry *)b)->total_ns;
    return x < y ? 1 : x > y ? -1 : 0;
}

void hs_vk_profile_print(const hs_vk_ctx *ctx, FILE *f) {
    ptrdiff_t n = stbds_shlen(ctx->profile);
    if (!n) return;
    hs_vk_profile_entry *v = malloc(sizeof *v * (size_t)n);
    if (!v) return;
    double total = 0;
    for (ptrdiff_t i = 0; i < n; i++) {
        v[i] = ctx->profile[i];
        total += v[i].total_ns;
    }
    qsort(v, (size_t)n, sizeof *v, by_total);
    fprintf(f, "%-28s %10s %12s %10s %7s\n", "op", "count", "total ms", "mean us", "share");
    for (ptrdiff_t i = 0; i < n; i++)
        fprintf(f, "%-28s %10llu %12.3f %10.2f %6.1f%%\n", v[i].key, (unsigned long long)v[i].count,
                v[i].total_ns / 1e6, v[i].total_ns / 1e3 / (double)v[i].count,
                total > 0 ? 100.0 * v[i].total_ns / total : 0.0);
    fprintf(f, "%-28s %10s %12.3f\n", "total", "", total / 1e6);
    free(v);
}
