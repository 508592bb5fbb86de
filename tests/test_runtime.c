/* Tests of the Vulkan layer: context, buffers, pipelines, recorded sequences
 * (replay, automatic barriers, argument checks), pipeline cache, profile. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hs_bench_ops.h"
#include "hs_shaders.h"
#include "op_attn.h"
#include "op_elem.h"
#include "op_matmul.h"
#include "op_select.h"
#include "testutil.h"

static int setup(void **state) { return hs_test_setup(state); }
static int teardown(void **state) { return hs_test_teardown(state); }

static void test_caps(void **state) {
    hs_test_env *env = *state;
    const hs_vk_caps *c = hs_vk_ctx_caps(env->vk);
    assert_true(strlen(c->device_name) > 0);
    assert_true(c->subgroup_size >= 1);
    assert_true(c->max_storage_buffer_range >= 1u << 16);
    assert_true(c->max_push_constants >= 128);
    assert_true(c->max_wg_invocations >= 128);
    char line[768];
    hs_vk_caps_line(c, line, sizeof line);
    assert_non_null(strstr(line, c->device_name));
    /* A CPU device names its processor (lavapipe's name is the same on every one). */
    assert_int_equal(c->host_cpu[0] != 0, c->type == VK_PHYSICAL_DEVICE_TYPE_CPU);
    if (c->host_cpu[0]) {
        char host[320];
        snprintf(host, sizeof host, " | host: %s", c->host_cpu);
        assert_non_null(strstr(line, host));
    }
    /* nonCoherentAtomSize is a power of two of at most 256 (Vulkan limits). */
    const uint64_t atom = c->non_coherent_atom_size;
    assert_true(atom >= 1 && atom <= 256 && (atom & (atom - 1)) == 0);
    if (getenv("HS_VK_FORCE_NONCOHERENT")) {
        assert_false(c->coherent);
        assert_int_equal(atom, 256);
    }
    assert_non_null(strstr(line, c->coherent ? "coherent: 1" : "coherent: 0"));
}

/* A context created with var=value set (var NULL: as the run is); the
 * variable is put back after (a pass of tools/test.sh may have set it). */
static hs_vk_ctx *ctx_with(const char *var, const char *value) {
    char *saved = var ? hs_test_env_override(var, value) : NULL;
    hs_vk_ctx *vk = NULL;
    hs_vk_ctx_options opt = {.device_index = -1, .validation = -1};
    hs_status st = hs_vk_ctx_create(&opt, &vk);
    if (var) hs_test_env_restore(var, saved);
    HS_CHECK(st);
    return vk;
}

/* What the kernels chose on one context: the argmax variant and the subgroup
 * size it pinned, and the RoPE + KV-write variant for an f16 cache. */
typedef struct variants {
    hs_vk_caps caps;
    char argmax[64], rope_f16[64], matmul[64], attn_f32[64], attn_f16[64];
    uint32_t texel_tuning; /* the tuning asks for texel-buffer weights */
    uint32_t argmax_sg;
    uint32_t validation;
} variants;

/* Creates a context with var=value set (var NULL: none), records one argmax,
 * one RoPE + KV write into an f16 cache and one q4_1 product, and notes the
 * pipelines chosen. */
static void probe_variants(const char *var, const char *value, variants *out) {
    memset(out, 0, sizeof *out);
    hs_vk_ctx *vk = ctx_with(var, value);
    hs_ops *ops = NULL;
    HS_CHECK(hs_ops_create(vk, &ops));
    out->caps = *hs_vk_ctx_caps(vk);
    hs_vk_buffer *logits = NULL, *idx = NULL, *qkv = NULL, *q = NULL, *k = NULL, *v = NULL;
    HS_CHECK(hs_vk_buffer_create(vk, 256 * 4, HS_MEM_DEVICE, &logits));
    HS_CHECK(hs_vk_buffer_create(vk, 16, HS_MEM_DEVICE, &idx));
    HS_CHECK(hs_vk_buffer_create(vk, 4 * 8 * 4, HS_MEM_DEVICE, &qkv)); /* 2 q heads + k + v, head_dim 8 */
    HS_CHECK(hs_vk_buffer_create(vk, 2 * 8 * 4, HS_MEM_DEVICE, &q));
    HS_CHECK(hs_vk_buffer_create(vk, 4 * 8 * 2, HS_MEM_DEVICE, &k)); /* 4 rows of f16 */
    HS_CHECK(hs_vk_buffer_create(vk, 4 * 8 * 2, HS_MEM_DEVICE, &v));
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    hs_vk_binding L = {logits, 0, 0}, I = {idx, 0, 4}, X = {qkv, 0, 0}, P = {idx, 0, 4}, R = {idx, 4, 4},
                  Q = {q, 0, 0};
    HS_CHECK(hs_op_argmax(ops, seq, &L, 1, 256, &I));
    const uint32_t n_argmax = hs_vk_seq_dispatch_count(seq);
    hs_kv_layer kv = {.k = {k, 0, 0}, .v = {v, 0, 0}, .type = HS_TYPE_F16, .n_ctx = 4, .n_kv_head = 1, .head_dim = 8};
    hs_rope_params rp = {.n_rot = 8, .mode = HS_ROPE_NORMAL, .freq_base = 10000.0f, .freq_scale = 1.0f};
    HS_CHECK(hs_op_rope_kv(ops, seq, &X, &P, &R, &Q, &kv, 1, 2, &rp));
    const uint32_t n_rope = hs_vk_seq_dispatch_count(seq);
    uint8_t wdata[32 * 20]; /* 32 rows of one q4_1 block: zero scales, any nibbles */
    memset(wdata, 0, sizeof wdata);
    hs_weight *w = NULL;
    HS_CHECK(hs_weight_create(ops, HS_TYPE_Q4_1, 32, 32, wdata, &w));
    HS_CHECK(hs_op_matmul(ops, seq, w, (hs_vk_binding){logits, 0, 128}, 1, (hs_vk_binding){logits, 512, 128},
                          NULL));
    const hs_vk_pipeline *pm = hs_vk_seq_dispatch_pipeline(seq, hs_vk_seq_dispatch_count(seq) - 1);
    /* attention over an f32 cache (4 rows of 1 head x 8), one query, in logits */
    hs_kv_layer kv32 = {.k = {logits, 256, 128},
                        .v = {logits, 384, 128},
                        .type = HS_TYPE_F32,
                        .n_ctx = 4,
                        .n_kv_head = 1,
                        .head_dim = 8};
    const hs_vk_binding aq = {logits, 0, 32}, ainfo = {logits, 64, 16}, amask = {logits, 96, 4},
                        aout = {logits, 128, 32};
    HS_CHECK(hs_op_attention(ops, seq, &aq, &kv32, 1, &ainfo, &amask, 1, 1.0f, &aout));
    const hs_vk_pipeline *pt = hs_vk_seq_dispatch_pipeline(seq, hs_vk_seq_dispatch_count(seq) - 1);
    snprintf(out->attn_f32, sizeof out->attn_f32, "%s", hs_vk_pipeline_name(pt));
    /* ... and over the f16 cache of the RoPE above */
    HS_CHECK(hs_op_attention(ops, seq, &aq, &kv, 1, &ainfo, &amask, 1, 1.0f, &aout));
    pt = hs_vk_seq_dispatch_pipeline(seq, hs_vk_seq_dispatch_count(seq) - 1);
    snprintf(out->attn_f16, sizeof out->attn_f16, "%s", hs_vk_pipeline_name(pt));
    HS_CHECK(hs_vk_seq_end(seq));
    snprintf(out->matmul, sizeof out->matmul, "%s", hs_vk_pipeline_name(pm));
    out->texel_tuning = hs_ops_tuning(ops)->texel_weights;
    const hs_vk_pipeline *pa = hs_vk_seq_dispatch_pipeline(seq, n_argmax - 1);
    const hs_vk_pipeline *pr = hs_vk_seq_dispatch_pipeline(seq, n_rope - 1);
    assert_non_null(pa);
    assert_non_null(pr);
    assert_null(hs_vk_seq_dispatch_pipeline(seq, hs_vk_seq_dispatch_count(seq)));
    snprintf(out->argmax, sizeof out->argmax, "%s", hs_vk_pipeline_name(pa));
    snprintf(out->rope_f16, sizeof out->rope_f16, "%s", hs_vk_pipeline_name(pr));
    out->argmax_sg = hs_vk_pipeline_required_subgroup(pa);
    hs_vk_seq_destroy(seq);
    hs_weight_destroy(w);
    hs_vk_buffer *bufs[] = {logits, idx, qkv, q, k, v};
    for (size_t i = 0; i < 6; i++) hs_vk_buffer_destroy(bufs[i]);
    hs_ops_destroy(ops);
    out->validation = hs_vk_validation_count(vk);
    hs_vk_ctx_destroy(vk);
}

/* Every HS_VK_DISABLE_* switch turns its feature off, and the switch of each
 * feature a kernel uses (hs_feature_uses) selects that kernel's other variant;
 * the features no kernel uses are reported as such, and their switches change
 * no kernel, so no test pass presents them as a tested fallback. Done on
 * contexts of its own, so it holds in every pass of the suite. */
static void test_feature_switches(void **state) {
    (void)state;
    variants base, off;
    probe_variants(NULL, NULL, &base);
    assert_int_equal(base.validation, 0);
    hs_feature_use uses[HS_FEATURE_COUNT];
    hs_feature_uses(&base.caps, uses);
    /* Where the process itself runs with switches (a pass of tools/test.sh),
     * "base" already has them off; only what the device offers here can be
     * shown to change. */
    /* argmax reads its logits (whole texels here) through a texel buffer where the products' weights do */
    const bool tx = base.caps.max_texel_elements > 0 && base.texel_tuning;
    const char *atx = tx ? "_tx" : "";
    char want[64];
    if (base.caps.subgroup_ops) {
        snprintf(want, sizeof want, "argmax_sg%s", atx);
        assert_string_equal(base.argmax, want);
        probe_variants("HS_VK_DISABLE_SUBGROUP_OPS", "1", &off);
        assert_false(off.caps.subgroup_ops);
        assert_false(off.caps.subgroup_size_control);
        snprintf(want, sizeof want, "argmax_nosg%s", atx);
        assert_string_equal(off.argmax, want);
        assert_int_equal(off.argmax_sg, 0);
        assert_int_equal(off.validation, 0);
    } else {
        snprintf(want, sizeof want, "argmax_nosg%s", atx);
        assert_string_equal(base.argmax, want);
    }
    if (base.caps.subgroup_size_control) {
        assert_int_equal(base.argmax_sg, base.caps.subgroup_size);
        probe_variants("HS_VK_DISABLE_SUBGROUP_SIZE_CONTROL", "1", &off);
        assert_false(off.caps.subgroup_size_control);
        assert_string_equal(off.argmax, base.argmax);
        assert_int_equal(off.argmax_sg, 0);
        assert_int_equal(off.validation, 0);
    } else {
        assert_int_equal(base.argmax_sg, 0);
    }
    /* an f16 cache's RoPE + KV write packs pairs of halves into words, with or without 16-bit storage */
    assert_string_equal(base.rope_f16, "rope_kv_f16");
    /* Texel buffers: the products' weights and attention's f32 cache, where
     * the tuning asks for them. */
    assert_int_equal(strstr(base.matmul, "_tx") != NULL, tx);
    /* ... with, where its lanes are one subgroup, their merge through shuffles (test_attn checks where) */
    const bool attn_sg = strcmp(base.attn_f32, "attention_f32_tx_sg") == 0;
    if (!attn_sg) assert_string_equal(base.attn_f32, tx ? "attention_f32_tx" : "attention_f32");
    /* an f16 cache too, eight halves per texel */
    assert_string_equal(base.attn_f16, attn_sg ? "attention_f16x8_tx_sg" : tx ? "attention_f16x8_tx" : "attention_f16x8");
    if (attn_sg) {
        assert_true(tx && base.caps.subgroup_ops && base.caps.subgroup_size_control);
        probe_variants("HS_VK_DISABLE_SUBGROUP_OPS", "1", &off);
        assert_string_equal(off.attn_f32, "attention_f32_tx");
        assert_string_equal(off.attn_f16, "attention_f16x8_tx");
        probe_variants("HS_VK_DISABLE_SUBGROUP_SIZE_CONTROL", "1", &off);
        assert_string_equal(off.attn_f32, "attention_f32_tx");
        assert_string_equal(off.attn_f16, "attention_f16x8_tx");
        assert_int_equal(off.validation, 0);
    }
    if (base.caps.max_texel_elements) {
        probe_variants("HS_VK_DISABLE_TEXEL_BUFFER", "1", &off);
        assert_int_equal(off.caps.max_texel_elements, 0);
        assert_null(strstr(off.matmul, "_tx"));
        assert_string_equal(off.attn_f32, "attention_f32");
        assert_string_equal(off.attn_f16, "attention_f16x8");
        if (tx) {
            /* the same kernel but for the weights' loads: the name without "_tx" */
            const char *at = strstr(base.matmul, "_tx");
            snprintf(want, sizeof want, "%.*s%s", (int)(at - base.matmul), base.matmul, at + 3);
            assert_string_equal(off.matmul, want);
        }
        /* ... and argmax its storage-buffer twin */
        snprintf(want, sizeof want, "%.*s", (int)(strlen(base.argmax) - strlen(atx)), base.argmax);
        assert_string_equal(off.argmax, want);
        assert_int_equal(off.validation, 0);
    }
    /* Features no kernel uses: the switch clears the cap, nothing else moves. */
    static const struct {
        const char *env;
        size_t cap;
    } unused[] = {{"HS_VK_DISABLE_16BIT_STORAGE", offsetof(hs_vk_caps, storage16)},
                  {"HS_VK_DISABLE_F16", offsetof(hs_vk_caps, fp16)},
                  {"HS_VK_DISABLE_8BIT_STORAGE", offsetof(hs_vk_caps, storage8)},
                  {"HS_VK_DISABLE_INT8_DOT", offsetof(hs_vk_caps, int8_dot)},
                  {"HS_VK_DISABLE_COOPMAT", offsetof(hs_vk_caps, coopmat)}};
    for (size_t i = 0; i < sizeof unused / sizeof unused[0]; i++) {
        bool found = false;
        for (uint32_t j = 0; j < HS_FEATURE_COUNT; j++)
            if (!strcmp(uses[j].env, unused[i].env)) {
                found = true;
                assert_null(uses[j].used_by);
            }
        assert_true(found);
        probe_variants(unused[i].env, "1", &off);
        assert_false(*(const bool *)((const char *)&off.caps + unused[i].cap));
        assert_string_equal(off.argmax, base.argmax);
        assert_string_equal(off.rope_f16, base.rope_f16);
        assert_string_equal(off.matmul, base.matmul);
        assert_int_equal(off.argmax_sg, base.argmax_sg);
        assert_int_equal(off.validation, 0);
    }
    /* Three features have kernels today; a kernel using another must update
     * hs_feature_uses and this test. */
    uint32_t with_kernels = 0;
    for (uint32_t j = 0; j < HS_FEATURE_COUNT; j++) with_kernels += uses[j].used_by != NULL;
    assert_int_equal(with_kernels, 3);
    /* HS_VK_MAX_BUFFER_RANGE: rounded down to 256 bytes, never above the
     * device's own limit (base may itself run under a smaller override). */
    probe_variants("HS_VK_MAX_BUFFER_RANGE", "70000", &off);
    assert_int_equal(off.caps.max_storage_buffer_range, 70000 & ~255u);
    probe_variants("HS_VK_MAX_BUFFER_RANGE", "99999999999999", &off);
    assert_true(off.caps.max_storage_buffer_range >= base.caps.max_storage_buffer_range);
    assert_true(off.caps.max_storage_buffer_range <= UINT32_MAX);
}

static void test_buffer_roundtrip(void **state) {
    hs_test_env *env = *state;
    for (int mem = 0; mem < 2; mem++) {
        hs_vk_buffer *b = NULL;
        const size_t n = 100003 * 4;
        HS_CHECK(hs_vk_buffer_create(env->vk, n, (hs_mem)mem, &b));
        uint32_t *src = malloc(n), *dst = malloc(n);
        for (size_t i = 0; i < n / 4; i++) src[i] = (uint32_t)(i * 2654435761u);
        HS_CHECK(hs_vk_buffer_upload(b, 0, src, n));
        HS_CHECK(hs_vk_buffer_download(b, 0, dst, n));
        assert_memory_equal(src, dst, n);
        HS_CHECK(hs_vk_buffer_fill(b, 16, 32, 0xDEADBEEFu));
        HS_CHECK(hs_vk_buffer_download(b, 0, dst, 64));
        assert_int_equal(dst[3], src[3]);
        assert_int_equal(dst[4], 0xDEADBEEFu);
        assert_int_equal(dst[11], 0xDEADBEEFu);
        assert_int_equal(dst[12], src[12]);
        /* Out-of-range access is an error with a message, not a crash. */
        assert_int_equal(hs_vk_buffer_upload(b, n - 4, src, 8), HS_ERR_OUT_OF_RANGE);
        assert_non_null(strstr(hs_last_error(), "outside buffer"));
        /* Flush and invalidate check their range on coherent memory too, where
         * they do nothing else: a bad range fails on every device. */
        if (hs_vk_buffer_map(b)) {
            assert_int_equal(hs_vk_buffer_flush(b, n - 4, 8), HS_ERR_OUT_OF_RANGE);
            assert_non_null(strstr(hs_last_error(), "hs_vk_buffer_flush: range [400008, +8) outside buffer"));
            assert_int_equal(hs_vk_buffer_invalidate(b, n + 1, 0), HS_ERR_OUT_OF_RANGE);
            HS_CHECK(hs_vk_buffer_flush(b, n, 0));
        }
        free(src);
        free(dst);
        hs_vk_buffer_destroy(b);
    }
    hs_vk_buffer *b = NULL;
    assert_int_equal(hs_vk_buffer_create(env->vk, 0, HS_MEM_DEVICE, &b), HS_ERR_INVALID_ARG);
    assert_null(b);
    hs_vk_buffer_destroy(NULL);
}

static void test_huge_alloc_fails_cleanly(void **state) {
    hs_test_env *env = *state;
    hs_vk_buffer *b = NULL;
    uint64_t too_big = hs_vk_ctx_caps(env->vk)->max_alloc + 4096;
    assert_int_equal(hs_vk_buffer_create(env->vk, too_big, HS_MEM_DEVICE, &b), HS_ERR_VK_OUT_OF_DEVICE_MEMORY);
    assert_null(b);
    assert_non_null(strstr(hs_last_error(), "maxMemoryAllocationSize"));
}

typedef struct read_push {
    uint32_t n_vec4, stride;
} read_push;

static hs_vk_pipeline *read_pipeline(hs_test_env *env, uint32_t wg) {
    hs_vk_pipeline_desc d = {.name = "read_bw",
                             .code = hs_spv_read_bw,
                             .code_size = hs_spv_read_bw_size,
                             .n_bindings = 2,
                             .write_mask = 2,
                             .push_size = sizeof(read_push),
                             .n_spec = 1,
                             .spec = {wg},
                             .wg_size = {wg, 1, 1}};
    hs_vk_pipeline *p = NULL;
    HS_CHECK(hs_ops_pipeline(env->ops, &d, &p));
    return p;
}

/* The read kernel XORs a strided slice: check it on the host, replay the
 * sequence after changing the input, and check the automatic barriers. */
static void test_seq_replay_and_barriers(void **state) {
    hs_test_env *env = *state;
    const uint32_t wg = 8, groups = 3, threads = wg * groups, n_vec4 = 1000;
    hs_vk_pipeline *p = read_pipeline(env, wg);
    uint32_t *data = malloc(n_vec4 * 16);
    hs_rng rng;
    hs_rng_seed(&rng, 7);
    for (uint32_t i = 0; i < n_vec4 * 4; i++) data[i] = hs_rng_u32(&rng);
    hs_vk_buffer *in = hs_test_buffer(env, data, n_vec4 * 16);
    hs_vk_buffer *out = hs_test_buffer(env, NULL, threads * 4);
    hs_vk_buffer *out2 = hs_test_buffer(env, NULL, threads * 4);
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    read_push pc = {n_vec4, threads};
    hs_vk_binding b1[2] = {{in, 0, 0}, {out, 0, 0}};
    hs_vk_binding b2[2] = {{in, 0, 0}, {out2, 0, 0}};
    HS_CHECK(hs_vk_seq_dispatch(seq, p, b1, 2, &pc, groups, 1, 1));
    HS_CHECK(hs_vk_seq_dispatch(seq, p, b2, 2, &pc, groups, 1, 1)); /* independent: no barrier */
    assert_int_equal(hs_vk_seq_barrier_count(seq), 0);
    hs_vk_binding b3[2] = {{out, 0, 0}, {out2, 0, 0}}; /* reads out, writes out2: RAW + WAW */
    read_push pc3 = {threads / 4, threads};
    HS_CHECK(hs_vk_seq_dispatch(seq, p, b3, 2, &pc3, groups, 1, 1));
    assert_int_equal(hs_vk_seq_barrier_count(seq), 1);
    assert_int_equal(hs_vk_seq_dispatch_count(seq), 3);
    HS_CHECK(hs_vk_seq_end(seq));

    for (int round = 0; round < 2; round++) {
        HS_CHECK(hs_vk_seq_submit(seq));
        uint32_t *got = hs_test_download(out, threads * 4), *got2 = hs_test_download(out2, threads * 4);
        uint32_t expect[64];
        for (uint32_t t = 0; t < threads; t++) {
            uint32_t acc[4] = {0, 0, 0, 0};
            for (uint32_t j = t; j < n_vec4; j += threads)
                for (int k = 0; k < 4; k++) acc[k] ^= data[4 * j + k];
            expect[t] = acc[0] ^ acc[1] ^ acc[2] ^ acc[3];
            assert_int_equal(got[t], expect[t]);
        }
        /* Third dispatch read `out` as uvec4s: threads/4 vec4s. */
        for (uint32_t t = 0; t < threads; t++) {
            uint32_t e = 0;
            for (uint32_t j = t; j < threads / 4; j += threads)
                e ^= expect[4 * j] ^ expect[4 * j + 1] ^ expect[4 * j + 2] ^ expect[4 * j + 3];
            assert_int_equal(got2[t], e);
        }
        free(got);
        free(got2);
        /* Replay with new input data: same recording, new results. */
        for (uint32_t i = 0; i < n_vec4 * 4; i++) data[i] = hs_rng_u32(&rng);
        HS_CHECK(hs_vk_buffer_upload(in, 0, data, n_vec4 * 16));
    }
    hs_vk_seq_destroy(seq);
    hs_vk_buffer_destroy(in);
    hs_vk_buffer_destroy(out);
    hs_vk_buffer_destroy(out2);
    free(data);
}

/* split_run's shapes: a product of SPLIT_ROWS rows by SPLIT_K, then one of
 * SPLIT_K rows by SPLIT_ROWS, over SPLIT_N columns. A product workgroup
 * computes subgroup x 4 rows on lavapipe (32 at 8 lanes, 64 at 16), so both
 * products have at least three workgroups (every part of three gets some) at
 * up to 16 lanes, and the first divides unevenly among three parts. */
enum { SPLIT_K = 192, SPLIT_ROWS = 160, SPLIT_N = 5 };

/* Runs, on a context made with var=value (var NULL: as the run is), a q4_1
 * product of SPLIT_ROWS rows by SPLIT_K over SPLIT_N columns, adds the
 * product to itself in place (eltwise reads gl_NumWorkGroups: it runs whole
 * on part 0), a second product of that (SPLIT_K rows by SPLIT_ROWS), and
 * doubles 65536 numbers in place (checked here); returns the SPLIT_K x
 * SPLIT_N result, the context's parts and the dispatches each part recorded
 * (parts[0..3]), or NULL with *status set when the submit failed. */
static float *split_run(const char *var, const char *value, uint32_t *parts, uint32_t per_part[4],
                        hs_status *status) {
    enum { K = SPLIT_K, ROWS = SPLIT_ROWS, N = SPLIT_N };
    hs_vk_ctx *vk = ctx_with(var, value);
    *parts = hs_vk_ctx_caps(vk)->parts;
    hs_ops *ops = NULL;
    HS_CHECK(hs_ops_create(vk, &ops));
    uint8_t w1[ROWS * (K / 32) * 20], w2[K * (ROWS / 32) * 20]; /* q4_1 blocks: d, m (f16), 16 nibble bytes */
    hs_rng rng;
    hs_rng_seed(&rng, 11);
    for (size_t i = 0; i < sizeof w1; i++) w1[i] = (uint8_t)hs_rng_u32(&rng);
    for (size_t i = 0; i < sizeof w2; i++) w2[i] = (uint8_t)hs_rng_u32(&rng);
    for (size_t b = 0; b < sizeof w1 / 20; b++) { /* d = 2^-6, m = -2^-4 */
        w1[20 * b] = 0x00, w1[20 * b + 1] = 0x24, w1[20 * b + 2] = 0x00, w1[20 * b + 3] = 0xAC;
    }
    for (size_t b = 0; b < sizeof w2 / 20; b++) {
        w2[20 * b] = 0x00, w2[20 * b + 1] = 0x24, w2[20 * b + 2] = 0x00, w2[20 * b + 3] = 0xAC;
    }
    hs_weight *wa = NULL, *wb = NULL;
    HS_CHECK(hs_weight_create(ops, HS_TYPE_Q4_1, ROWS, K, w1, &wa));
    HS_CHECK(hs_weight_create(ops, HS_TYPE_Q4_1, K, ROWS, w2, &wb));
    float x[K * N];
    for (int i = 0; i < K * N; i++) x[i] = (float)((int)(hs_rng_u32(&rng) % 200) - 100) / 50.0f;
    enum { BIG = 1 << 16 }; /* an add of many workgroups, each looping with a gl_NumWorkGroups stride */
    float *big = malloc(BIG * 4);
    for (int i = 0; i < BIG; i++) big[i] = (float)(hs_rng_u32(&rng) % 1000);
    hs_vk_buffer *bx = NULL, *by = NULL, *bz = NULL, *bb = NULL;
    HS_CHECK(hs_vk_buffer_create(vk, BIG * 4, HS_MEM_DEVICE, &bb));
    HS_CHECK(hs_vk_buffer_upload(bb, 0, big, BIG * 4));
    HS_CHECK(hs_vk_buffer_create(vk, sizeof x, HS_MEM_DEVICE, &bx));
    HS_CHECK(hs_vk_buffer_create(vk, ROWS * N * 4, HS_MEM_DEVICE, &by));
    HS_CHECK(hs_vk_buffer_create(vk, K * N * 4, HS_MEM_DEVICE, &bz));
    HS_CHECK(hs_vk_buffer_upload(bx, 0, x, sizeof x));
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    const hs_vk_binding X = {bx, 0, 0}, Y = {by, 0, 0}, Z = {bz, 0, 0};
    HS_CHECK(hs_op_matmul(ops, seq, wa, X, N, Y, NULL));
    HS_CHECK(hs_op_add(ops, seq, &Y, &Y, &Y, ROWS * N));
    HS_CHECK(hs_op_matmul(ops, seq, wb, Y, N, Z, NULL));
    const hs_vk_binding B = {bb, 0, 0};
    HS_CHECK(hs_op_add(ops, seq, &B, &B, &B, BIG));
    HS_CHECK(hs_vk_seq_end(seq));
    for (uint32_t k = 0; k < 4; k++) per_part[k] = hs_vk_seq_part_dispatches(seq, k);
    float *out = NULL;
    *status = hs_vk_seq_submit(seq);
    if (*status == HS_OK) {
        out = malloc(K * N * 4);
        HS_CHECK(hs_vk_buffer_download(bz, 0, out, K * N * 4));
        float *got = malloc(BIG * 4);
        HS_CHECK(hs_vk_buffer_download(bb, 0, got, BIG * 4));
        for (int i = 0; i < BIG; i++) assert_true(got[i] == 2 * big[i]); /* exact: small integers */
        free(got);
    }
    free(big);
    hs_vk_buffer_destroy(bb);
    assert_int_equal(hs_vk_validation_count(vk), 0);
    hs_vk_seq_destroy(seq);
    hs_weight_destroy(wa);
    hs_weight_destroy(wb);
    hs_vk_buffer_destroy(bx);
    hs_vk_buffer_destroy(by);
    hs_vk_buffer_destroy(bz);
    hs_ops_destroy(ops);
    hs_vk_ctx_destroy(vk);
    return out;
}

/* Two in-place adds of 65536 numbers with a barrier between, on ctx's parts. */
static hs_vk_seq *stall_seq(hs_vk_ctx *vk, hs_ops *ops, hs_vk_buffer *bb) {
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    const hs_vk_binding B = {bb, 0, 0};
    HS_CHECK(hs_op_add(ops, seq, &B, &B, &B, 1 << 16)); /* whole on part 0 (gl_NumWorkGroups) */
    HS_CHECK(hs_op_add(ops, seq, &B, &B, &B, 1 << 16)); /* after a barrier */
    HS_CHECK(hs_vk_seq_end(seq));
    assert_true(hs_vk_seq_barrier_count(seq) >= 1);
    return seq;
}

/* The wait of a split barrier on two parts. First how long a wait that
 * cannot end lasts after the first submit (HS_VK_TEST_SPLIT_LATE: t, about
 * half a second to a few seconds, by the machine). Then part 0 of another
 * sequence starts 3 t after part 1 (HS_VK_TEST_SPLIT_STALL_MS), which waits
 * for it at the barrier: the sequence's first submit waits 16 times longer
 * (a part compiling shader variants on first use stalls the same way) and
 * gives the result; its second fails with the error; without the stall it
 * runs again. */
static void split_stall(void) {
    enum { BIG = 1 << 16 };
    hs_vk_ctx *vk = ctx_with("HS_VK_SPLIT", "2");
    assert_int_equal(hs_vk_ctx_caps(vk)->parts, 2);
    hs_ops *ops = NULL;
    HS_CHECK(hs_ops_create(vk, &ops));
    float *big = malloc(BIG * 4), *got = malloc(BIG * 4);
    for (int i = 0; i < BIG; i++) big[i] = (float)(i % 1000);
    hs_vk_buffer *bb = NULL;
    HS_CHECK(hs_vk_buffer_create(vk, BIG * 4, HS_MEM_DEVICE, &bb));
    char *saved = hs_test_env_override("HS_VK_TEST_SPLIT_LATE", "1");
    hs_vk_seq *late = stall_seq(vk, ops, bb);
    double t = hs_now_s();
    const hs_status late_st = hs_vk_seq_submit(late);
    t = hs_now_s() - t;
    hs_test_env_restore("HS_VK_TEST_SPLIT_LATE", saved);
    assert_int_equal(late_st, HS_ERR_VK_DEVICE_LOST);
    hs_vk_seq_destroy(late);
    char stall[32];
    snprintf(stall, sizeof stall, "%d", (int)(3000 * t) + 1);
    hs_vk_seq *seq = stall_seq(vk, ops, bb);
    for (int run = 0; run < 3; run++) {
        HS_CHECK(hs_vk_buffer_upload(bb, 0, big, BIG * 4));
        saved = run < 2 ? hs_test_env_override("HS_VK_TEST_SPLIT_STALL_MS", stall) : NULL;
        const hs_status st = hs_vk_seq_submit(seq);
        if (run < 2) hs_test_env_restore("HS_VK_TEST_SPLIT_STALL_MS", saved);
        if (run == 1) {
            assert_int_equal(st, HS_ERR_VK_DEVICE_LOST);
            assert_non_null(strstr(hs_last_error(), "did not reach a barrier"));
            continue;
        }
        HS_CHECK(st);
        HS_CHECK(hs_vk_buffer_download(bb, 0, got, BIG * 4));
        for (int i = 0; i < BIG; i++) assert_true(got[i] == 4 * big[i]);
    }
    assert_int_equal(hs_vk_validation_count(vk), 0);
    hs_vk_seq_destroy(seq);
    hs_vk_buffer_destroy(bb);
    free(big);
    free(got);
    hs_ops_destroy(ops);
    hs_vk_ctx_destroy(vk);
}

/* Which grid dimension split execution divides (hs_vk_split_dim; device-free): the first of
 * more than one workgroup, a later one only where the first gives the busiest part more than
 * 1/8 above an even share and the later one divides better. */
static void test_split_dim(void **state) {
    (void)state;
    static const struct {
        uint32_t g[3], parts, want;
    } cases[] = {
        {{3, 16, 1}, 2, 1},   /* attention: 3 head blocks 2 : 1, 16 query blocks 8 : 8 */
        {{3, 1, 1}, 2, 0},    /* decode's attention: nothing better */
        {{144, 16, 1}, 2, 0}, /* a product: its rows */
        {{9, 2, 1}, 2, 0},    /* rows 5 : 4 (1/9 above even) stay */
        {{5, 4, 1}, 2, 1},    /* rows 3 : 2 (1/5 above) give way to 2 : 2 */
        {{3, 3, 1}, 2, 0},    /* as uneven: the first */
        {{4, 16, 1}, 3, 1},   /* three parts: 2 : 1 : 1 against 5 : 5 : 6 */
        {{1, 3, 16}, 2, 2},   /* from the first dimension of more than one workgroup on */
        {{1, 7, 1}, 2, 1},
        {{1, 1, 1}, 2, 3},    /* one workgroup: whole on part 0 */
        {{3, 16, 1}, 1, 3},   /* no split */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint32_t got = hs_vk_split_dim(cases[i].g, cases[i].parts);
        if (got != cases[i].want)
            fail_msg("grid %u x %u x %u on %u parts: dimension %u, expected %u", cases[i].g[0], cases[i].g[1],
                     cases[i].g[2], cases[i].parts, got, cases[i].want);
    }
}

/* Split execution's device (lavapipe), and its switches (off, or off as non-coherent memory turns it), read
 * as runtime/vk_device.c's split_parts reads them: set, not empty and not "0". */
static bool is_lavapipe(const hs_vk_caps *c) {
    return c->type == VK_PHYSICAL_DEVICE_TYPE_CPU && !strcmp(c->driver_name, "llvmpipe");
}
static bool env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}
static bool split_switched_off(void) {
    return env_on("HS_VK_DISABLE_SPLIT") || env_on("HS_VK_FORCE_NONCOHERENT");
}

/* Split execution (lavapipe): on with two or more CPUs unless switched off,
 * its parts named in the device line; a sequence on three parts (dividing
 * products of SPLIT_ROWS and SPLIT_K rows, the in-place add whole on part 0,
 * barriers between) gives bitwise the result of one device. */
static void test_split(void **state) {
    hs_test_env *env = *state;
    const hs_vk_caps *c = hs_vk_ctx_caps(env->vk);
    const bool lavapipe = is_lavapipe(c), off = split_switched_off();
    char line[768];
    hs_vk_caps_line(c, line, sizeof line);
    cpu_set_t cpus; /* the cores this process may run on */
    const int n_cpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    if (!lavapipe || off || n_cpu < 2) {
        assert_int_equal(c->parts, 1);
        assert_int_equal(c->parts_busy, 0);
        assert_null(strstr(line, "split:"));
    } else if (c->parts_busy) { /* CPUs another program kept busy when the context was made */
        const int left = n_cpu - (int)c->parts_busy;
        assert_int_equal(c->parts, left >= 2 ? (uint32_t)(left > 8 ? 8 : left) : 1u);
        assert_non_null(strstr(line, "busy"));
    } else {
        assert_true(c->parts >= 2);
        char want[32];
        snprintf(want, sizeof want, "| split: %u", c->parts);
        assert_non_null(strstr(line, want));
    }
    /* The device list says what a context gets (on idle CPUs). */
    hs_vk_caps *all = NULL;
    uint32_t n_dev = 0;
    HS_CHECK(hs_vk_enumerate(&all, &n_dev));
    assert_true(c->index < n_dev);
    if (!c->parts_busy) assert_int_equal(all[c->index].parts, c->parts);
    free(all);
    uint32_t p1, p3, d1[4], d3[4];
    hs_status st;
    float *one = split_run("HS_VK_DISABLE_SPLIT", "1", &p1, d1, &st);
    HS_CHECK(st);
    assert_int_equal(p1, 1);
    float *three = split_run("HS_VK_SPLIT", "3", &p3, d3, &st);
    HS_CHECK(st);
    if (lavapipe && !off) {
        assert_int_equal(p3, 3);
        /* Products on every part; the adds on part 0 alone. */
        assert_true(d3[1] >= 2 && d3[2] == d3[1]);
        assert_int_equal(d3[0], d3[1] + 2);
        assert_int_equal(d3[3], 0);
    }
    assert_int_equal(d1[1], 0);
    assert_memory_equal(one, three, SPLIT_K * SPLIT_N * 4);
    /* The result is not trivially equal: it changes with the input. */
    bool nonzero = false;
    for (int i = 0; i < SPLIT_K * SPLIT_N; i++) nonzero |= one[i] != 0;
    assert_true(nonzero);
    free(one);
    free(three);
}

/* Split execution's barriers (lavapipe, split on): a part that does not reach
 * a barrier makes the submit fail with an error, not a result, and the first
 * submit of a sequence waits longer (split_stall). Apart from test_split, so
 * that the 512-bit run, which checks split execution's shares of workgroups at
 * 16 lanes, leaves out these waits (seconds each): they do not depend on the
 * subgroup. Where split execution is off, the contexts made here must say so. */
static void test_split_barrier_wait(void **state) {
    hs_test_env *env = *state;
    const hs_vk_caps *c = hs_vk_ctx_caps(env->vk);
    const bool lavapipe = is_lavapipe(c), off = split_switched_off();
    uint32_t parts, per_part[4];
    hs_status st;
    char *saved = hs_test_env_override("HS_VK_TEST_SPLIT_LATE", "1");
    float *late = split_run("HS_VK_SPLIT", "2", &parts, per_part, &st);
    hs_test_env_restore("HS_VK_TEST_SPLIT_LATE", saved);
    if (!lavapipe || off) { /* one device: no barrier between parts to miss */
        assert_int_equal(parts, 1);
        HS_CHECK(st);
        assert_non_null(late);
        free(late);
        return;
    }
    assert_int_equal(parts, 2);
    assert_null(late);
    assert_int_equal(st, HS_ERR_VK_DEVICE_LOST);
    assert_non_null(strstr(hs_last_error(), "did not reach a barrier"));
    split_stall();
}

/* A context made while another program keeps a CPU busy leaves that CPU out
 * of split execution (a part there would get half its time slices, the others
 * spinning at every barrier meanwhile): here a child process spins on the last
 * CPU of this one. With LP_NUM_THREADS unset and no HS_VK_SPLIT, as a first
 * context in a process has them. (This process's own work, the context's
 * start-up, does not count as busy: a spinning thread of this process
 * instead of the child would not be seen.) The sample is a tick count of
 * /proc/stat, which other tests running beside this one disturb: the window is
 * widened to 300 ms (HS_VK_TEST_SPLIT_SAMPLE_MS) and up to three attempts are
 * made, each with a new child; a context that never sees the child fails all
 * three. */
static void busy_attempt(int last, uint32_t *parts, uint32_t *busy, char *line, size_t n_line) {
    fflush(NULL);
    const pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) { /* spins on CPU `last` until killed */
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(last, &one);
        sched_setaffinity(0, sizeof one, &one);
        volatile unsigned long x = 0;
        for (;;) x++;
    }
    usleep(20000);
    char *lp = getenv("LP_NUM_THREADS") ? strdup(getenv("LP_NUM_THREADS")) : NULL;
    unsetenv("LP_NUM_THREADS");
    char *want = hs_test_env_override("HS_VK_SPLIT", "");
    char *window = hs_test_env_override("HS_VK_TEST_SPLIT_SAMPLE_MS", "300");
    hs_vk_ctx *vk = NULL;
    hs_vk_ctx_options opt = {.device_index = -1, .validation = -1};
    const hs_status st = hs_vk_ctx_create(&opt, &vk);
    hs_test_env_restore("HS_VK_TEST_SPLIT_SAMPLE_MS", window);
    hs_test_env_restore("HS_VK_SPLIT", want);
    kill(child, SIGKILL); /* before any assertion, which would leave it spinning */
    waitpid(child, NULL, 0);
    if (st != HS_OK) hs_test_env_restore("LP_NUM_THREADS", lp);
    HS_CHECK(st);
    const hs_vk_caps *c = hs_vk_ctx_caps(vk);
    *parts = c->parts;
    *busy = c->parts_busy;
    hs_vk_caps_line(c, line, n_line);
    hs_vk_ctx_destroy(vk);
    hs_test_env_restore("LP_NUM_THREADS", lp);
}

static void test_split_skips_busy_cpus(void **state) {
    hs_test_env *env = *state;
    const hs_vk_caps *c0 = hs_vk_ctx_caps(env->vk);
    cpu_set_t cpus;
    const int n_cpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    if (!is_lavapipe(c0) || split_switched_off() || n_cpu < 2) {
        assert_int_equal(c0->parts_busy, 0); /* nothing sampled where split execution is off */
        return;
    }
    int last = -1;
    for (int k = 0; k < CPU_SETSIZE; k++)
        if (CPU_ISSET(k, &cpus)) last = k;
    uint32_t parts = 0, busy = 0;
    char line[768];
    for (int attempt = 0; attempt < 3 && busy == 0; attempt++) {
        busy_attempt(last, &parts, &busy, line, sizeof line);
        if (busy == 0) print_message("attempt %d: the spinning child was not seen (%s)\n", attempt + 1, line);
    }
    assert_true(busy >= 1);
    assert_true(parts == 1 || (int)parts <= n_cpu - 1);
    assert_non_null(strstr(line, "busy"));
}

static void test_dispatch_errors(void **state) {
    hs_test_env *env = *state;
    const hs_vk_caps *c = hs_vk_ctx_caps(env->vk);
    hs_vk_pipeline *p = read_pipeline(env, 8);
    hs_vk_buffer *a = hs_test_buffer(env, NULL, 256), *b = hs_test_buffer(env, NULL, 256);
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    read_push pc = {1, 8};
    hs_vk_binding ok[2] = {{a, 0, 0}, {b, 0, 0}};
    assert_int_equal(hs_vk_seq_dispatch(seq, p, ok, 1, &pc, 1, 1, 1), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_vk_seq_dispatch(seq, p, ok, 2, &pc, c->max_wg_count[0] + 1u, 1, 1),
                     c->max_wg_count[0] == UINT32_MAX ? HS_OK : HS_ERR_VK_UNSUPPORTED);
    hs_vk_binding past[2] = {{a, 512, 0}, {b, 0, 0}};
    assert_int_equal(hs_vk_seq_dispatch(seq, p, past, 2, &pc, 1, 1, 1), HS_ERR_OUT_OF_RANGE);
    if (c->min_storage_offset_align > 1) {
        hs_vk_binding mis[2] = {{a, 1, 0}, {b, 0, 0}};
        assert_int_equal(hs_vk_seq_dispatch(seq, p, mis, 2, &pc, 1, 1, 1), HS_ERR_INVALID_ARG);
        assert_non_null(strstr(hs_last_error(), "not aligned"));
    }
    hs_vk_binding big[2] = {{a, 0, 4096}, {b, 0, 0}};
    assert_int_equal(hs_vk_seq_dispatch(seq, p, big, 2, &pc, 1, 1, 1), HS_ERR_OUT_OF_RANGE);
    HS_CHECK(hs_vk_seq_end(seq));
    HS_CHECK(hs_vk_seq_submit(seq));
    hs_vk_seq_destroy(seq);
    hs_vk_buffer_destroy(a);
    hs_vk_buffer_destroy(b);

    /* Pipeline limits are checked before Vulkan sees them. */
    hs_vk_pipeline_desc d = {.name = "read_bw_too_much_push", .code = hs_spv_read_bw,
                             .code_size = hs_spv_read_bw_size, .n_bindings = 2,
                             .push_size = c->max_push_constants + 4, .n_spec = 1, .spec = {8}};
    hs_vk_pipeline *bad = NULL;
    assert_int_equal(hs_vk_pipeline_create(env->vk, &d, &bad), HS_ERR_VK_UNSUPPORTED);
    assert_null(bad);
}

static void test_copy_fill_in_seq(void **state) {
    hs_test_env *env = *state;
    uint32_t src[64];
    for (int i = 0; i < 64; i++) src[i] = (uint32_t)i * 3u;
    hs_vk_buffer *a = hs_test_buffer(env, src, sizeof src), *b = hs_test_buffer(env, NULL, sizeof src);
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    HS_CHECK(hs_vk_seq_fill(seq, b, 0, sizeof src, 7u));
    HS_CHECK(hs_vk_seq_copy(seq, a, 16, b, 32, 64)); /* WAW on b: needs a barrier */
    assert_int_equal(hs_vk_seq_barrier_count(seq), 1);
    HS_CHECK(hs_vk_seq_end(seq));
    HS_CHECK(hs_vk_seq_submit(seq));
    uint32_t *got = hs_test_download(b, sizeof src);
    for (int i = 0; i < 64; i++) assert_int_equal(got[i], (i >= 8 && i < 24) ? src[i - 4] : 7u);
    free(got);
    hs_vk_seq_destroy(seq);
    hs_vk_buffer_destroy(a);
    hs_vk_buffer_destroy(b);
}

/* Creates a context, compiles one pipeline, destroys both: the context saves
 * its pipeline cache. Returns the bytes it had loaded and the refusal reason. */
static uint64_t cache_round(char *path, size_t path_size, char *why, size_t why_size) {
    hs_vk_ctx *vk = NULL;
    hs_vk_ctx_options opt = {.device_index = -1, .validation = -1};
    HS_CHECK(hs_vk_ctx_create(&opt, &vk));
    const char *p = NULL, *w = NULL;
    uint64_t loaded = hs_vk_pipeline_cache_loaded(vk, &p, &w);
    snprintf(path, path_size, "%s", p);
    snprintf(why, why_size, "%s", w);
    hs_vk_pipeline_desc d = {.name = "noop", .code = hs_spv_noop, .code_size = hs_spv_noop_size, .n_bindings = 1};
    hs_vk_pipeline *pl = NULL;
    HS_CHECK(hs_vk_pipeline_create(vk, &d, &pl));
    hs_vk_pipeline_destroy(pl);
    uint32_t msgs = hs_vk_validation_count(vk);
    hs_vk_ctx_destroy(vk);
    assert_int_equal(msgs, 0);
    return loaded;
}

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* The pipeline cache file is keyed by device UUID and driver version; a second
 * context loads what the first saved; a file made for another device or driver
 * build is refused (and replaced on save), never handed to the driver. */
static void test_pipeline_cache_file(void **state) {
    (void)state;
    char dir[1024], path[1100], why[160];
    HS_CHECK(hs_home_dir(dir, sizeof dir));
    cache_round(path, sizeof path, why, sizeof why);
    hs_vk_ctx *vk = NULL;
    HS_CHECK(hs_vk_ctx_create(&(hs_vk_ctx_options){.device_index = -1, .validation = -1, .no_pipeline_cache = true},
                              &vk));
    const hs_vk_caps *c = hs_vk_ctx_caps(vk);
    char expect[1400], uuid[33];
    for (int i = 0; i < 16; i++) sprintf(uuid + 2 * i, "%02x", c->device_uuid[i]);
    snprintf(expect, sizeof expect, "%s/pipelines-%s-%08x.vkcache", dir, uuid, c->driver_version);
    const char *none = NULL;
    assert_int_equal(hs_vk_pipeline_cache_loaded(vk, &none, NULL), 0);
    assert_string_equal(none, "");
    hs_vk_ctx_destroy(vk);
    assert_string_equal(path, expect);
    long size = file_size(path);
    assert_true(size > 0);

    /* A second context loads all of it. */
    assert_int_equal(cache_round(path, sizeof path, why, sizeof why), (uint64_t)size);
    assert_string_equal(why, "");

    /* Another driver build (pipeline cache UUID byte flipped), then another
     * device id, then a truncated file: refused with the reason, and the next
     * save writes a good file again. */
    static const struct {
        long at; /* byte to flip; -1: truncate to 10 bytes */
        const char *why;
    } bad[] = {{16, "pipeline cache UUID"}, {12, "another vendor or device"}, {-1, "shorter than"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *f = fopen(path, "r+b");
        assert_non_null(f);
        if (bad[i].at >= 0) {
            assert_int_equal(fseek(f, bad[i].at, SEEK_SET), 0);
            int b = fgetc(f);
            assert_int_equal(fseek(f, bad[i].at, SEEK_SET), 0);
            fputc(b ^ 0x5A, f);
            fclose(f);
        } else {
            fclose(f);
            assert_int_equal(truncate(path, 10), 0);
        }
        assert_int_equal(cache_round(path, sizeof path, why, sizeof why), 0);
        if (!strstr(why, bad[i].why)) fail_msg("case %zu: refusal '%s', expected '%s'", i, why, bad[i].why);
        long again = file_size(path);
        assert_true(again > 10);
        assert_int_equal(cache_round(path, sizeof path, why, sizeof why), (uint64_t)again);
    }
}

/* HS_PROFILE's machinery: timestamps around each dispatch, totals per op name. */
static void test_profile(void **state) {
    hs_test_env *env = *state;
    if (!hs_vk_ctx_caps(env->vk)->timestamps) skip();
    hs_vk_profile_enable(env->vk, true);
    hs_vk_profile_reset(env->vk);
    hs_vk_pipeline *p = read_pipeline(env, 8);
    hs_vk_buffer *in = hs_test_buffer(env, NULL, 4096), *out = hs_test_buffer(env, NULL, 256);
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    read_push pc = {256, 64};
    hs_vk_binding b[2] = {{in, 0, 0}, {out, 0, 0}};
    for (int i = 0; i < 3; i++) HS_CHECK(hs_vk_seq_dispatch(seq, p, b, 2, &pc, 8, 1, 1));
    HS_CHECK(hs_vk_seq_end(seq));
    HS_CHECK(hs_vk_seq_submit(seq));
    HS_CHECK(hs_vk_seq_submit(seq));
    uint64_t count = 0;
    double ns = hs_vk_profile_total_ns(env->vk, "read_bw", &count);
    assert_int_equal(count, 6);
    assert_true(ns > 0);
    hs_vk_profile_enable(env->vk, false);
    hs_vk_profile_reset(env->vk);
    hs_vk_seq_destroy(seq);
    hs_vk_buffer_destroy(in);
    hs_vk_buffer_destroy(out);
}

/* The validation layer is really on and its messages are counted: a buffer
 * of size 0 is invalid usage (VUID-VkBufferCreateInfo-size-00912). */
static void test_validation_is_counted(void **state) {
    (void)state;
    if (!getenv("HS_VK_VALIDATION")) skip();
    hs_vk_ctx *vk = NULL;
    hs_vk_ctx_options opt = {.device_index = -1, .validation = 1, .no_pipeline_cache = true};
    HS_CHECK(hs_vk_ctx_create(&opt, &vk));
    assert_int_equal(hs_vk_validation_count(vk), 0);
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .size = 0,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
    VkBuffer b = VK_NULL_HANDLE;
    fprintf(stderr, "(an intentional validation error follows)\n");
    VkResult r = vkCreateBuffer(hs_vk_ctx_device(vk), &bci, NULL, &b);
    if (r == VK_SUCCESS && b) vkDestroyBuffer(hs_vk_ctx_device(vk), b, NULL);
    assert_true(hs_vk_validation_count(vk) > 0);
    hs_vk_ctx_destroy(vk);
}

/* The tuning table's rows by vendor, driver and host CPU (worked out from the
 * table by hand): lavapipe on an AMD processor takes 8-bit tiles of 8 columns,
 * elsewhere 16, with the rest of the row the same; GPUs ignore the host. */
static void test_tuning_rows(void **state) {
    (void)state;
    hs_vk_caps c;
    memset(&c, 0, sizeof c);
    c.vendor_id = 0x10005;
    snprintf(c.driver_name, sizeof c.driver_name, "llvmpipe");
    snprintf(c.host_cpu, sizeof c.host_cpu, "AMD EPYC x2");
    const hs_tuning amd = hs_tuning_for(&c);
    snprintf(c.host_cpu, sizeof c.host_cpu, "Intel(R) Xeon(R) Platinum 8488C x2");
    const hs_tuning intel = hs_tuning_for(&c);
    assert_string_equal(amd.name, "lavapipe-amd");
    assert_string_equal(intel.name, "lavapipe");
    assert_int_equal(amd.x8_cols, 8);
    assert_int_equal(intel.x8_cols, 16);
    hs_tuning a = amd;
    a.name = intel.name;
    a.x8_cols = intel.x8_cols;
    assert_memory_equal(&a, &intel, sizeof a);
    c.vendor_id = 0x1002; /* an AMD GPU on an AMD host: the GPU's row */
    assert_string_equal(hs_tuning_for(&c).name, "amd");
}

/* host_cpu from /proc/cpuinfo texts (the expected names written out by hand): a
 * VM's bare "AMD EPYC" on Zen 4 and Zen 5 are two processors by family and
 * model; only the first processor's block counts; Arm names its implementer
 * and part; nothing known gives "". */
static const char *host_cpu_of(const char *text, long cpus, char *buf, size_t n) {
    FILE *f = text ? fmemopen((void *)text, strlen(text), "r") : NULL;
    if (text) assert_non_null(f);
    hs_vk_host_cpu_parse(f, cpus, buf, n);
    if (f) fclose(f);
    return buf;
}

static void test_host_cpu_parse(void **state) {
    (void)state;
    char b[300];
    const char *zen4 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                       "model name\t: AMD EPYC\nstepping\t: 0\n\n"
                       "processor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 99\nmodel\t\t: 98\n"
                       "model name\t: Other\n\n";
    const char *zen5 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
                       "model name\t: AMD EPYC\nstepping\t: 1\n\n";
    const char *xeon = "processor\t: 0\ncpu family\t: 6\nmodel\t\t: 143\n"
                       "model name\t: Intel(R) Xeon(R) Platinum 8488C\n";
    const char *arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n"
                      "CPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n"
                      "processor\t: 1\nCPU implementer\t: 0x51\nCPU part\t: 0x001\n\n";
    assert_string_equal(host_cpu_of(zen4, 2, b, sizeof b), "AMD EPYC (family 25, model 17) x2");
    assert_string_equal(host_cpu_of(zen5, 2, b, sizeof b), "AMD EPYC (family 26, model 2) x2");
    assert_string_equal(host_cpu_of(xeon, 4, b, sizeof b), "Intel(R) Xeon(R) Platinum 8488C (family 6, model 143) x4");
    assert_string_equal(host_cpu_of(arm, 8, b, sizeof b), "cpu (implementer 0x41, part 0xd0c) x8");
    assert_string_equal(host_cpu_of("model name\t: Some CPU\n", 0, b, sizeof b), "Some CPU x1");
    assert_string_equal(host_cpu_of(NULL, 3, b, sizeof b), "cpu x3");
    assert_string_equal(host_cpu_of("", 0, b, sizeof b), "");
    assert_string_equal(host_cpu_of(NULL, 0, b, sizeof b), "");
}

/* HS_TUNING overrides the tuning table; a bad value is a clear error, never a
 * silently ignored setting. */
static void test_tuning_env(void **state) {
    hs_test_env *env = *state;
    hs_ops *ops = NULL;
    const hs_tuning base = *hs_ops_tuning(env->ops);
    setenv("HS_TUNING", "cols=2,rows=3,x8cols=11", 1);
    HS_CHECK(hs_ops_create(env->vk, &ops));
    assert_int_equal(hs_ops_tuning(ops)->matvec_rows_per_wg, 3);
    assert_int_equal(hs_ops_tuning(ops)->matmul_cols_per_wg, 2);
    assert_int_equal(hs_ops_tuning(ops)->x8_cols, 11);
    assert_int_equal(hs_ops_tuning(ops)->reduce_wg_size, base.reduce_wg_size);
    assert_non_null(strstr(hs_ops_tuning(ops)->name, "+env"));
    hs_ops_destroy(ops);
    static const char *bad[] = {"rows=0",   "rows=9",  "cols=",         "speed=3", "rows=2;cols=2",
                                "reduce=0", "rows=2,", "rows=8,cols=8", "texel=2",
                                "x8cols=17", "rows=8,x8cols=16"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("HS_TUNING", bad[i], 1);
        ops = NULL;
        assert_int_equal(hs_ops_create(env->vk, &ops), HS_ERR_INVALID_ARG);
        assert_null(ops);
        assert_true(strstr(hs_last_error(), "tuning") || strstr(hs_last_error(), "HS_TUNING"));
    }
    unsetenv("HS_TUNING");
    /* hs_ops_set_tuning checks against the device: a reduction workgroup that
     * is not a multiple of the subgroup, or larger than the device allows. */
    hs_tuning t = base;
    t.reduce_wg_size = hs_ops_caps(env->ops)->max_wg_invocations + hs_ops_subgroup(env->ops);
    assert_int_equal(hs_ops_set_tuning(env->ops, &t), HS_ERR_INVALID_ARG);
    if (hs_ops_subgroup(env->ops) > 1) {
        t.reduce_wg_size = hs_ops_subgroup(env->ops) + 1;
        assert_int_equal(hs_ops_set_tuning(env->ops, &t), HS_ERR_INVALID_ARG);
    }
    assert_memory_equal(hs_ops_tuning(env->ops), &base, sizeof base);
}

static void test_status_messages(void **state) {
    (void)state;
    hs_status st = HS_FAIL(HS_ERR_VK_DEVICE_LOST, "vkQueueSubmit: %s", "VK_ERROR_DEVICE_LOST");
    assert_int_equal(st, HS_ERR_VK_DEVICE_LOST);
    assert_string_equal(hs_status_string(st), "HS_ERR_VK_DEVICE_LOST");
    assert_non_null(strstr(hs_last_error(), "vkQueueSubmit: VK_ERROR_DEVICE_LOST at tests/test_runtime.c:"));
}

/* ---- non-coherent memory, emulated (HS_VK_FORCE_NONCOHERENT) ----
 * The group's context is created with the switch on: hs_vk_buffer_map hands
 * out a host shadow, and only flush and invalidate move data between it and
 * the memory the device uses, whole atoms (256 bytes) at a time. */

static int setup_noncoherent(void **state) {
    return hs_test_setup_env(state, 0, "HS_VK_FORCE_NONCOHERENT", "1");
}

/* Bytes 0..n-1 of b as the device sees them: copied on the device into a
 * device buffer and downloaded from there (b's host view is not touched). */
static uint8_t *device_view(hs_test_env *env, hs_vk_buffer *b, size_t n) {
    hs_vk_buffer *c = hs_test_buffer(env, NULL, n);
    hs_vk_seq *s = hs_test_seq_begin(env);
    HS_CHECK(hs_vk_seq_copy(s, b, 0, c, 0, n));
    hs_test_seq_run(s);
    uint8_t *v = hs_test_download(c, n);
    hs_vk_buffer_destroy(c);
    return v;
}

static void test_nc_caps(void **state) {
    hs_test_env *env = *state;
    const hs_vk_caps *c = hs_vk_ctx_caps(env->vk);
    assert_false(c->coherent);
    assert_int_equal(c->non_coherent_atom_size, 256);
    /* Device buffers are not mapped: they take the staging path. */
    hs_vk_buffer *d = hs_test_buffer(env, NULL, 64);
    assert_null(hs_vk_buffer_map(d));
    hs_vk_buffer_destroy(d);
}

/* Host writes at unaligned offsets and sizes reach the device after a flush
 * of just their range, and the device's bytes reach the host after an
 * invalidate of just the range read. */
static void test_nc_map_roundtrip(void **state) {
    hs_test_env *env = *state;
    const size_t n = 3000; /* not a multiple of the atom: the last range ends at the allocation */
    static const struct {
        uint64_t off, len;
    } r[] = {{0, 1}, {1, 1}, {255, 2}, {37, 301}, {256, 256}, {513, 700}, {2900, 100}, {2999, 1}, {0, 3000}};
    hs_vk_buffer *b = NULL;
    HS_CHECK(hs_vk_buffer_create(env->vk, n, HS_MEM_HOST, &b));
    uint8_t *host = hs_vk_buffer_map(b);
    assert_non_null(host);
    HS_CHECK(hs_vk_buffer_fill(b, 0, n / 4 * 4, 0));
    HS_CHECK(hs_vk_buffer_invalidate(b, 0, n));
    uint8_t expect[3000];
    memset(expect, 0, sizeof expect);
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        for (uint64_t k = 0; k < r[i].len; k++)
            host[r[i].off + k] = expect[r[i].off + k] = (uint8_t)(i * 31 + k + 1);
        HS_CHECK(hs_vk_buffer_flush(b, r[i].off, r[i].len));
        uint8_t *dev = device_view(env, b, n);
        for (size_t k = 0; k < n; k++)
            if (dev[k] != expect[k])
                fail_msg("after flush of [%llu, +%llu): device byte %zu is %u, expected %u",
                         (unsigned long long)r[i].off, (unsigned long long)r[i].len, k, dev[k], expect[k]);
        free(dev);
    }
    /* Device -> host: a dispatch-free copy from another buffer writes b, and
     * each invalidated range shows the new bytes. */
    uint8_t src[3000];
    for (size_t k = 0; k < n; k++) src[k] = (uint8_t)(k * 7 + 3);
    hs_vk_buffer *a = hs_test_buffer(env, src, n);
    hs_vk_seq *s = hs_test_seq_begin(env);
    HS_CHECK(hs_vk_seq_copy(s, a, 0, b, 0, n));
    hs_test_seq_run(s);
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        HS_CHECK(hs_vk_buffer_invalidate(b, r[i].off, r[i].len));
        if (memcmp(host + r[i].off, src + r[i].off, r[i].len) != 0)
            fail_msg("after invalidate of [%llu, +%llu): host bytes differ from the device's",
                     (unsigned long long)r[i].off, (unsigned long long)r[i].len);
    }
    hs_vk_buffer_destroy(a);
    hs_vk_buffer_destroy(b);
}

/* A flush writes back exactly the atoms that hold its range: device writes in
 * the atoms around it survive (the layout rule of hs_vk_buffer_map, which
 * llama's step buffer relies on: host data and argmax in different atoms). */
static void test_nc_flush_leaves_other_atoms(void **state) {
    hs_test_env *env = *state;
    const uint64_t atom = hs_vk_ctx_caps(env->vk)->non_coherent_atom_size;
    const size_t n = 4096;
    static const struct {
        uint64_t off, len;
    } r[] = {{300, 100}, {256, 256}, {255, 2}, {4000, 96}, {0, 1}};
    hs_vk_buffer *b = NULL;
    HS_CHECK(hs_vk_buffer_create(env->vk, n, HS_MEM_HOST, &b));
    uint8_t *host = hs_vk_buffer_map(b);
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        const uint64_t lo = r[i].off / atom * atom, hi = (r[i].off + r[i].len + atom - 1) / atom * atom;
        /* Device writes 0x11 everywhere; the host takes it in, writes its
         * range and flushes; then the device writes 0x22 outside the range's
         * atoms, and the host writes its range again and flushes again. */
        HS_CHECK(hs_vk_buffer_fill(b, 0, n, 0x11111111u));
        HS_CHECK(hs_vk_buffer_invalidate(b, 0, n));
        memset(host + r[i].off, 0x33, r[i].len);
        HS_CHECK(hs_vk_buffer_flush(b, r[i].off, r[i].len));
        if (lo > 0) HS_CHECK(hs_vk_buffer_fill(b, 0, lo, 0x22222222u));
        if (hi < n) HS_CHECK(hs_vk_buffer_fill(b, hi, n - hi, 0x22222222u));
        memset(host + r[i].off, 0x44, r[i].len);
        HS_CHECK(hs_vk_buffer_flush(b, r[i].off, r[i].len));
        uint8_t *dev = device_view(env, b, n);
        for (uint64_t k = 0; k < n; k++) {
            const bool inside = k >= r[i].off && k < r[i].off + r[i].len;
            const uint8_t want = inside ? 0x44 : (k >= lo && k < hi) ? 0x11 : 0x22;
            if (dev[k] != want)
                fail_msg("flush of [%llu, +%llu): device byte %llu is 0x%02x, expected 0x%02x",
                         (unsigned long long)r[i].off, (unsigned long long)r[i].len, (unsigned long long)k,
                         dev[k], want);
        }
        free(dev);
    }
    hs_vk_buffer_destroy(b);
}

/* What the device writes (a transfer fill, a dispatch) is seen by the host
 * only after an invalidate, and only in the invalidated atoms. */
static void test_nc_device_write_needs_invalidate(void **state) {
    hs_test_env *env = *state;
    const uint64_t atom = hs_vk_ctx_caps(env->vk)->non_coherent_atom_size;
    const size_t n = 1024;
    hs_vk_buffer *b = NULL;
    HS_CHECK(hs_vk_buffer_create(env->vk, n, HS_MEM_HOST, &b));
    uint32_t *host = hs_vk_buffer_map(b);
    for (size_t i = 0; i < n / 4; i++) host[i] = 7;
    HS_CHECK(hs_vk_buffer_flush(b, 0, n));
    HS_CHECK(hs_vk_buffer_fill(b, 0, n, 9));
    assert_int_equal(host[0], 7); /* not yet: the host still sees its own copy */
    HS_CHECK(hs_vk_buffer_invalidate(b, 100, 8)); /* the first atom */
    for (size_t i = 0; i < n / 4; i++) assert_int_equal(host[i], i * 4 < atom ? 9u : 7u);
    HS_CHECK(hs_vk_buffer_invalidate(b, 0, n));
    for (size_t i = 0; i < n / 4; i++) assert_int_equal(host[i], 9u);

    /* A dispatch reads host-written input and writes an output the host reads:
     * out[t] = XOR of the four words of in's vec4 t. */
    const uint32_t wg = 8, threads = 64;
    hs_vk_pipeline *p = read_pipeline(env, wg);
    hs_vk_buffer *out = NULL;
    HS_CHECK(hs_vk_buffer_create(env->vk, threads * 4, HS_MEM_HOST, &out));
    uint32_t *in = host, *res = hs_vk_buffer_map(out);
    hs_rng rng;
    hs_rng_seed(&rng, 11);
    for (uint32_t i = 0; i < threads * 4; i++) in[i] = hs_rng_u32(&rng);
    HS_CHECK(hs_vk_buffer_flush(b, 0, threads * 16));
    hs_vk_seq *s = hs_test_seq_begin(env);
    read_push pc = {threads, threads};
    hs_vk_binding binds[2] = {{b, 0, 0}, {out, 0, 0}};
    HS_CHECK(hs_vk_seq_dispatch(s, p, binds, 2, &pc, threads / wg, 1, 1));
    hs_test_seq_run(s);
    uint32_t first = in[0] ^ in[1] ^ in[2] ^ in[3];
    assert_true(res[0] != first); /* the shadow's initial pattern, not the result */
    HS_CHECK(hs_vk_buffer_invalidate(out, 0, threads * 4));
    for (uint32_t t = 0; t < threads; t++)
        assert_int_equal(res[t], in[4 * t] ^ in[4 * t + 1] ^ in[4 * t + 2] ^ in[4 * t + 3]);
    hs_vk_buffer_destroy(out);
    hs_vk_buffer_destroy(b);
}

/* hs_vk_buffer_upload into part of an atom keeps what the device wrote to the
 * rest of that atom (it invalidates the edge atoms before writing). */
static void test_nc_upload_keeps_neighbours(void **state) {
    hs_test_env *env = *state;
    const size_t n = 1024;
    /* Across an atom boundary, at an atom's start, inside one atom, one whole
     * atom, and over several atoms with partial ones at both ends. */
    static const struct {
        uint64_t off, len;
    } r[] = {{250, 10}, {0, 10}, {300, 10}, {256, 256}, {500, 600 - 500 + 400}};
    uint8_t src[1024];
    for (size_t k = 0; k < sizeof src; k++) src[k] = (uint8_t)(k % 251 + 1);
    hs_vk_buffer *b = NULL;
    HS_CHECK(hs_vk_buffer_create(env->vk, n, HS_MEM_HOST, &b));
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        HS_CHECK(hs_vk_buffer_fill(b, 0, n, 0x55555555u));
        HS_CHECK(hs_vk_buffer_upload(b, r[i].off, src, r[i].len));
        uint8_t *got = device_view(env, b, n);
        for (uint64_t k = 0; k < n; k++) {
            const bool inside = k >= r[i].off && k < r[i].off + r[i].len;
            const uint8_t want = inside ? src[k - r[i].off] : 0x55;
            if (got[k] != want)
                fail_msg("upload of [%llu, +%llu): device byte %llu is 0x%02x, expected 0x%02x",
                         (unsigned long long)r[i].off, (unsigned long long)r[i].len, (unsigned long long)k,
                         got[k], want);
        }
        free(got);
    }
    hs_vk_buffer_destroy(b);
}

static void test_nc_bad_ranges(void **state) {
    hs_test_env *env = *state;
    hs_vk_buffer *b = NULL, *d = hs_test_buffer(env, NULL, 256);
    HS_CHECK(hs_vk_buffer_create(env->vk, 1000, HS_MEM_HOST, &b));
    assert_int_equal(hs_vk_buffer_flush(b, 996, 8), HS_ERR_OUT_OF_RANGE);
    assert_non_null(
        strstr(hs_last_error(), "hs_vk_buffer_flush: range [996, +8) outside buffer of 1000 bytes"));
    assert_int_equal(hs_vk_buffer_invalidate(b, 1001, 0), HS_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(hs_last_error(), "hs_vk_buffer_invalidate: range [1001, +0) outside buffer"));
    assert_int_equal(hs_vk_buffer_flush(b, 8, UINT64_MAX), HS_ERR_OUT_OF_RANGE); /* no wrap-around */
    assert_int_equal(hs_vk_buffer_invalidate(b, UINT64_MAX, 2), HS_ERR_OUT_OF_RANGE);
    HS_CHECK(hs_vk_buffer_flush(b, 1000, 0));
    HS_CHECK(hs_vk_buffer_flush(b, 999, 1));
    /* An unmapped buffer has nothing to flush: an error naming the way out. */
    assert_int_equal(hs_vk_buffer_flush(d, 0, 4), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "not mapped"));
    assert_non_null(strstr(hs_last_error(), "hs_vk_buffer_upload"));
    assert_int_equal(hs_vk_buffer_invalidate(d, 0, 4), HS_ERR_INVALID_ARG);
    hs_vk_buffer_destroy(b);
    hs_vk_buffer_destroy(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_feature_switches),
        cmocka_unit_test(test_buffer_roundtrip),
        cmocka_unit_test(test_huge_alloc_fails_cleanly),
        cmocka_unit_test(test_seq_replay_and_barriers),
        cmocka_unit_test(test_dispatch_errors),
        cmocka_unit_test(test_split_dim),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_split_barrier_wait),
        cmocka_unit_test(test_split_skips_busy_cpus),
        cmocka_unit_test(test_copy_fill_in_seq),
        cmocka_unit_test(test_pipeline_cache_file),
        cmocka_unit_test(test_profile),
        cmocka_unit_test(test_validation_is_counted),
        cmocka_unit_test(test_status_messages),
        cmocka_unit_test(test_tuning_rows),
        cmocka_unit_test(test_host_cpu_parse),
        cmocka_unit_test(test_tuning_env),
    };
    const struct CMUnitTest noncoherent[] = {
        cmocka_unit_test(test_nc_caps),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_buffer_roundtrip), /* upload/download: mapped and staging paths */
        cmocka_unit_test(test_nc_map_roundtrip),
        cmocka_unit_test(test_nc_flush_leaves_other_atoms),
        cmocka_unit_test(test_nc_device_write_needs_invalidate),
        cmocka_unit_test(test_nc_upload_keeps_neighbours),
        cmocka_unit_test(test_nc_bad_ranges),
        cmocka_unit_test(test_seq_replay_and_barriers),
        cmocka_unit_test(test_copy_fill_in_seq),
    };
    /* This run's pipeline caches go to a folder of its own (HS_HOME), removed
     * after: tests of other programs running beside it save theirs to the
     * shared one, and one did between a corruption in test_pipeline_cache_file
     * and its reload (a failure seen once with two tests at a time). */
    char home[512];
    if (!hs_test_make_temp(home, sizeof home, "hs_test_runtime", true)) return 1; /* it said why */
    if (setenv("HS_HOME", home, 1)) {
        perror("test_runtime: HS_HOME");
        hs_test_remove_dir(home);
        return 1;
    }
    int fails = hs_test_run_group("runtime", tests, setup, teardown);
    fails += hs_test_run_group("runtime_noncoherent", noncoherent, setup_noncoherent, teardown);
    if (!hs_test_remove_dir(home)) fails++;
    return fails;
}
