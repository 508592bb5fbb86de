#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int hs_test_setup(void **state) {
    hs_test_env *env = calloc(1, sizeof *env);
    if (!env) return -1;
    hs_vk_ctx_options opt = {.device_index = -1, .validation = -1};
    if (hs_vk_ctx_create(&opt, &env->vk) != HS_OK) {
        fprintf(stderr, "hs_test_setup: %s\n", hs_last_error());
        free(env);
        return -1;
    }
    if (hs_ops_create(env->vk, &env->ops) != HS_OK) {
        fprintf(stderr, "hs_test_setup: %s\n", hs_last_error());
        hs_vk_ctx_destroy(env->vk);
        free(env);
        return -1;
    }
    *state = env;
    return 0;
}

int hs_test_setup_range(void **state, unsigned long bytes) {
    char v[32];
    snprintf(v, sizeof v, "%lu", bytes);
    setenv("HS_VK_MAX_BUFFER_RANGE", v, 1);
    int r = hs_test_setup(state);
    unsetenv("HS_VK_MAX_BUFFER_RANGE");
    return r;
}

int hs_test_teardown(void **state) {
    hs_test_env *env = *state;
    if (!env) return 0;
    hs_ops_destroy(env->ops);
    uint32_t msgs = hs_vk_validation_count(env->vk);
    hs_vk_ctx_destroy(env->vk);
    free(env);
    if (msgs) {
        fprintf(stderr, "validation layer reported %u message(s)\n", msgs);
        return -1;
    }
    return 0;
}

void hs_rng_seed(hs_rng *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ull + 1; }

uint32_t hs_rng_u32(hs_rng *r) {
    uint64_t x = r->s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    r->s = x;
    return (uint32_t)(x >> 32);
}

float hs_rng_uniform(hs_rng *r) { return (hs_rng_u32(r) >> 8) * (1.0f / 16777216.0f); }

float hs_rng_range(hs_rng *r, float lo, float hi) { return lo + (hi - lo) * hs_rng_uniform(r); }

void hs_rng_fill(hs_rng *r, float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = hs_rng_range(r, lo, hi);
}

double hs_nmse(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

double hs_max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m || isnan(d)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

hs_vk_buffer *hs_test_buffer(hs_test_env *env, const void *data, size_t n) {
    hs_vk_buffer *b = NULL;
    HS_CHECK(hs_vk_buffer_create(env->vk, n, HS_MEM_DEVICE, &b));
    if (data)
        HS_CHECK(hs_vk_buffer_upload(b, 0, data, n));
    else
        HS_CHECK(hs_vk_buffer_fill(b, 0, (n + 3) & ~(size_t)3, 0));
    return b;
}

void *hs_test_download(hs_vk_buffer *b, size_t n) {
    void *p = malloc(n);
    assert_non_null(p);
    HS_CHECK(hs_vk_buffer_download(b, 0, p, n));
    return p;
}

const char *hs_test_shared_dir(void) {
    const char *e = getenv("HS_SHARED_DIR");
    return e && *e ? e : HS_SHARED_DIR;
}

uint16_t hs_test_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xFF) - 127 + 15;
    uint32_t mant = x & 0x7FFFFF;
    if (((x >> 23) & 0xFF) == 0xFF) return (uint16_t)(sign | 0x7C00 | (mant ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7C00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t h = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)h;
}

float hs_test_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF, x;
    if (exp == 0) {
        if (mant == 0) {
            x = sign;
        } else {
            exp = 127 - 15 + 1;
            while (!(mant & 0x400)) {
                mant <<= 1;
                exp--;
            }
            x = sign | (exp << 23) | ((mant & 0x3FF) << 13);
        }
    } else if (exp == 31) {
        x = sign | 0x7F800000 | (mant << 13);
    } else {
        x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

hs_vk_seq *hs_test_seq_begin(hs_test_env *env) {
    hs_vk_seq *s = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &s));
    HS_CHECK(hs_vk_seq_begin(s));
    return s;
}

void hs_test_seq_run(hs_vk_seq *s) {
    HS_CHECK(hs_vk_seq_end(s));
    HS_CHECK(hs_vk_seq_submit(s));
    hs_vk_seq_destroy(s);
}

float *hs_test_rand_array(hs_rng *r, size_t n, float lo, float hi) {
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    hs_rng_fill(r, x, n, lo, hi);
    return x;
}
