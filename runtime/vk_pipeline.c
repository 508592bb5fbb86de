/* vk_pipeline: compute pipelines from embedded SPIR-V with specialization
 * constants, created through the context's VkPipelineCache. */
#include "vk_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Whether SPIR-V decorates a variable BuiltIn NumWorkgroups (OpDecorate
 * %v BuiltIn NumWorkgroups: opcode 71, 4 words, decoration 11, value 24). */
static bool reads_num_workgroups(const uint32_t *code, size_t words) {
    for (size_t i = 5; i < words;) {
        const uint32_t op = code[i] & 0xFFFF, n = code[i] >> 16;
        if (n == 0) break;
        if (op == 71 && n == 4 && i + 3 < words && code[i + 2] == 11 && code[i + 3] == 24) return true;
        i += n;
    }
    return false;
}

/* The module, layouts and pipeline of p on part k's device. */
static hs_status create_on(hs_vk_pipeline *p, const hs_vk_pipeline_desc *d, const uint32_t wg[3], uint32_t k) {
    hs_status st = HS_OK;
    hs_vk_ctx *ctx = p->ctx;
    const hs_vk_caps *c = &ctx->caps;
    const VkDevice dev = hs_vk_part_device(ctx, k);
    VkShaderModule *module = &p->part[k].module;
    VkDescriptorSetLayout *set_layout = &p->part[k].set_layout;
    VkPipelineLayout *layout = &p->part[k].layout;
    VkPipeline *pipeline = &p->part[k].pipeline;
    VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                     .codeSize = d->code_size,
                                     .pCode = d->code};
    HS_VK_CALL(vkCreateShaderModule(dev, &smci, NULL, module), p->name);

    VkDescriptorSetLayoutBinding binds[HS_VK_MAX_BINDINGS];
    for (uint32_t i = 0; i < d->n_bindings; i++)
        binds[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                                  .descriptorType = hs_vk_binding_type(p, i),
                                                  .descriptorCount = 1,
                                                  .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dslci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                             .bindingCount = d->n_bindings,
                                             .pBindings = binds};
    HS_VK_CALL(vkCreateDescriptorSetLayout(dev, &dslci, NULL, set_layout), p->name);

    VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = d->push_size};
    VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                       .setLayoutCount = 1,
                                       .pSetLayouts = set_layout,
                                       .pushConstantRangeCount = d->push_size ? 1 : 0,
                                       .pPushConstantRanges = &pcr};
    HS_VK_CALL(vkCreatePipelineLayout(dev, &plci, NULL, layout), p->name);

    VkSpecializationMapEntry entries[HS_VK_MAX_SPEC];
    for (uint32_t i = 0; i < d->n_spec; i++)
        entries[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    VkSpecializationInfo si = {.mapEntryCount = d->n_spec,
                               .pMapEntries = entries,
                               .dataSize = 4 * d->n_spec,
                               .pData = d->spec};
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rss = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
        .requiredSubgroupSize = d->required_subgroup_size};
    VkPipelineShaderStageCreateInfo stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                             .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                                             .module = *module,
                                             .pName = "main",
                                             .pSpecializationInfo = d->n_spec ? &si : NULL};
    if (d->required_subgroup_size) {
        if (!c->subgroup_size_control || d->required_subgroup_size < c->subgroup_min ||
            d->required_subgroup_size > c->subgroup_max) {
            return HS_FAIL(HS_ERR_VK_UNSUPPORTED, "pipeline %s: subgroup size %u not available (%u-%u%s)",
                           p->name, d->required_subgroup_size, c->subgroup_min, c->subgroup_max,
                           c->subgroup_size_control ? "" : ", no size control");
        }
        stage.pNext = &rss;
        /* Full subgroups: every lane of every subgroup is live, which the
         * subgroup reductions of the kernels rely on. */
        if (wg[0] % d->required_subgroup_size == 0)
            stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
    }
    VkComputePipelineCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                        .flags = ctx->n_parts > 1 ? VK_PIPELINE_CREATE_DISPATCH_BASE_BIT : 0,
                                        .stage = stage,
                                        .layout = *layout};
    HS_VK_CALL(vkCreateComputePipelines(dev, k ? VK_NULL_HANDLE : ctx->pipeline_cache, 1, &cpci, NULL, pipeline),
               p->name);
fail:
    return st;
}

/* One part's creation on a thread of its own (create_parts). */
typedef struct {
    hs_vk_pipeline *p;
    const hs_vk_pipeline_desc *d;
    const uint32_t *wg;
    uint32_t k;
    hs_status st;
    char msg[1024]; /* its error message: hs_last_error is per thread */
} part_job;

static void *create_job(void *arg) {
    part_job *j = arg;
    j->st = create_on(j->p, j->d, j->wg, j->k);
    if (j->st != HS_OK) snprintf(j->msg, sizeof j->msg, "%s", hs_last_error());
    return NULL;
}

/* p on every part's device. With split execution each part is a device of
 * its own, and a driver that compiles at creation (lavapipe translates and
 * optimizes the shader on the calling thread, every time: its pipeline cache
 * keeps nothing) would take n_parts times one device's time, so the other
 * parts are created on threads beside part 0 (one core per part). */
static hs_status create_parts(hs_vk_pipeline *p, const hs_vk_pipeline_desc *d, const uint32_t wg[3]) {
    hs_status st = HS_OK;
    const uint32_t n = p->ctx->n_parts;
    part_job jobs[HS_VK_MAX_PARTS];
    pthread_t threads[HS_VK_MAX_PARTS];
    bool started[HS_VK_MAX_PARTS] = {false};
    for (uint32_t k = 1; k < n; k++) {
        jobs[k] = (part_job){.p = p, .d = d, .wg = wg, .k = k};
        started[k] = pthread_create(&threads[k], NULL, create_job, &jobs[k]) == 0;
        if (!started[k]) create_job(&jobs[k]); /* no thread: in turn */
    }
    st = create_on(p, d, wg, 0);
    for (uint32_t k = 1; k < n; k++) {
        if (started[k]) pthread_join(threads[k], NULL);
        if (st == HS_OK && jobs[k].st != HS_OK) st = HS_FAIL(jobs[k].st, "%s (part %u)", jobs[k].msg, k);
    }
    return st;
}

hs_status hs_vk_pipeline_create(hs_vk_ctx *ctx, const hs_vk_pipeline_desc *d, hs_vk_pipeline **out) {
    hs_status st = HS_OK;
    *out = NULL;
    const hs_vk_caps *c = &ctx->caps;
    if (!d->code || !d->code_size || d->code_size % 4)
        return HS_FAIL(HS_ERR_INVALID_ARG, "pipeline %s: no SPIR-V", d->name);
    if (d->n_bindings > HS_VK_MAX_BINDINGS || d->n_spec > HS_VK_MAX_SPEC)
        return HS_FAIL(HS_ERR_INVALID_ARG, "pipeline %s: too many bindings or constants", d->name);
    if (d->n_bindings > c->max_storage_buffers)
        return HS_FAIL(HS_ERR_VK_UNSUPPORTED,
                       "pipeline %s needs %u storage buffers, over maxPerStageDescriptorStorageBuffers %u", d->name,
                       d->n_bindings, c->max_storage_buffers);
    if (d->push_size > c->max_push_constants || d->push_size % 4)
        return HS_FAIL(HS_ERR_VK_UNSUPPORTED, "pipeline %s: %u bytes of push constants (device limit %u)",
                       d->name, d->push_size, c->max_push_constants);
    uint32_t wg[3];
    for (int i = 0; i < 3; i++) wg[i] = d->wg_size[i] ? d->wg_size[i] : 1;
    if (wg[0] > c->max_wg_size[0] || wg[1] > c->max_wg_size[1] || wg[2] > c->max_wg_size[2] ||
        (uint64_t)wg[0] * wg[1] * wg[2] > c->max_wg_invocations)
        return HS_FAIL(HS_ERR_VK_UNSUPPORTED, "pipeline %s: workgroup %ux%ux%u exceeds the device limits",
                       d->name, wg[0], wg[1], wg[2]);

    if (d->texel_mask && !c->max_texel_elements)
        return HS_FAIL(HS_ERR_VK_UNSUPPORTED, "pipeline %s: the device has no uniform texel buffers of RGBA32UI",
                       d->name);
    if (d->texel_mask & d->write_mask)
        return HS_FAIL(HS_ERR_INVALID_ARG, "pipeline %s: a texel buffer binding cannot be written", d->name);
    if (d->uniform_mask & (d->write_mask | d->texel_mask))
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "pipeline %s: a uniform buffer binding cannot be written or a texel buffer", d->name);
    hs_vk_pipeline *p = calloc(1, sizeof *p);
    if (!p) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_vk_pipeline_create: out of memory");
    p->ctx = ctx;
    hs_vk_obj_link(ctx, &p->obj, HS_VK_OBJ_PIPELINE);
    snprintf(p->name, sizeof p->name, "%s", d->name ? d->name : "?");
    p->n_bindings = d->n_bindings;
    p->write_mask = d->write_mask;
    p->texel_mask = d->texel_mask;
    p->uniform_mask = d->uniform_mask;
    p->push_size = d->push_size;
    p->required_subgroup_size = d->required_subgroup_size;
    memcpy(p->wg_size, wg, sizeof wg);

    p->splittable = !reads_num_workgroups(d->code, d->code_size / 4);
    HS_TRY(create_parts(p, d, wg));
    *out = p;
    return HS_OK;
fail:
    hs_vk_pipeline_destroy(p);
    return st;
}

void hs_vk_pipeline_destroy(hs_vk_pipeline *p) {
    if (!p) return;
    for (uint32_t k = 0; k < p->ctx->n_parts; k++) {
        VkDevice d = hs_vk_part_device(p->ctx, k);
        const struct hs_vk_pipeline_part *x = &p->part[k];
        if (x->pipeline) vkDestroyPipeline(d, x->pipeline, NULL);
        if (x->layout) vkDestroyPipelineLayout(d, x->layout, NULL);
        if (x->set_layout) vkDestroyDescriptorSetLayout(d, x->set_layout, NULL);
        if (x->module) vkDestroyShaderModule(d, x->module, NULL);
    }
    hs_vk_obj_unlink(p->ctx, &p->obj);
    free(p);
}

const char *hs_vk_pipeline_name(const hs_vk_pipeline *p) { return p->name; }
uint32_t hs_vk_pipeline_required_subgroup(const hs_vk_pipeline *p) { return p->required_subgroup_size; }
