#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "op_matmul.h"

/* The context of the running group (one at a time), what it had said and
 * held when the current test started, and whether the group teardown failed. */
static hs_vk_ctx *g_vk;
static uint32_t g_msgs_at_start;
static bool g_group_teardown_failed;

static int per_test_setup(void **state) {
    (void)state;
    if (g_vk) g_msgs_at_start = hs_vk_validation_count(g_vk);
    return 0;
}

static int per_test_teardown(void **state) {
    (void)state;
    if (!g_vk) return 0;
    int r = 0;
    uint32_t msgs = hs_vk_validation_count(g_vk) - g_msgs_at_start;
    if (msgs) {
        fprintf(stderr, "[  ERROR   ] the validation layer reported %u message(s) during this test\n", msgs);
        r = -1;
    }
    return r;
}

/* Whether name matches one of the comma-separated fnmatch patterns of list. */
static bool name_in_list(const char *name, const char *list) {
    char pat[256];
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len >= sizeof pat) {
            fprintf(stderr, "HS_TEST_FILTER / HS_TEST_EXCLUDE: a pattern of %zu characters (at most %zu)\n", len,
                    sizeof pat - 1);
            exit(2);
        }
        if (len) {
            memcpy(pat, p, len);
            pat[len] = '\0';
            if (!fnmatch(pat, name, 0)) return true;
        }
        p += len + (end ? 1 : 0);
    }
    return false;
}

int hs_test_run_group_(const char *name, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                       CMFixtureFunction teardown) {
    /* HS_TEST_FILTER: run only the tests whose names match one of these comma-separated patterns (fnmatch's
     * * and ?); HS_TEST_EXCLUDE: leave out the tests that match one of its patterns. CTest runs one binary in
     * shards that way (tests/CMakeLists.txt): a list and its exclusion, so that every test is in one shard. A
     * group none of whose tests is left runs no setup. */
    const char *filter = getenv("HS_TEST_FILTER"), *exclude = getenv("HS_TEST_EXCLUDE");
    struct CMUnitTest *wrapped = calloc(n ? n : 1, sizeof *wrapped);
    if (!wrapped) return 1;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if ((filter && *filter && !name_in_list(tests[i].name, filter)) ||
            (exclude && *exclude && name_in_list(tests[i].name, exclude)))
            continue;
        struct CMUnitTest *w = &wrapped[kept++];
        *w = tests[i];
        if (tests[i].setup_func || tests[i].teardown_func) {
            fprintf(stderr, "hs_test_run_group: %s has its own fixtures, which the runner does not chain\n",
                    tests[i].name);
            free(wrapped);
            return 1;
        }
        w->setup_func = per_test_setup;
        w->teardown_func = per_test_teardown;
    }
    if (!kept) {
        fprintf(stderr, "[==========] %s: no test left by HS_TEST_FILTER / HS_TEST_EXCLUDE\n", name);
        free(wrapped);
        return 0;
    }
    g_group_teardown_failed = false;
    g_vk = NULL;
    int fails = _cmocka_run_group_tests(name, wrapped, kept, setup, teardown);
    free(wrapped);
    if (g_group_teardown_failed) {
        fprintf(stderr, "[  FAILED  ] %s: group teardown (counted as a failure)\n", name);
        fails++;
    }
    g_vk = NULL;
    return fails;
}

void hs_test_skip(const char *file, int line) {
    const char *ci = getenv("CI");
    if (ci && !strcmp(ci, "true")) {
        print_error("skip() at %s:%d: a skipped test is a failure under CI=true\n", file, line);
        _fail(file, line);
    }
    _skip(file, line);
}

int hs_test_setup(void **state) {
    hs_test_env *env = calloc(1, sizeof *env);
    if (!env) return -1;
    hs_vk_ctx_options opt = {.device_index = -1, .validation = -1};
    if (hs_vk_ctx_create(&opt, &env->vk) != HS_OK) {
        fprintf(stderr, "hs_test_setup: %s\n", hs_last_error());
        free(env);
        return -1;
    }
    /* HS_TEST_SUBGROUP=N: the run is meant for a device of N-lane subgroups
     * (tests/CMakeLists.txt's 512-bit llvmpipe runs); any other fails setup,
     * so a setting that did not reach the driver is not a silent pass. */
    const char *want = getenv("HS_TEST_SUBGROUP");
    const uint32_t lanes = hs_vk_ctx_caps(env->vk)->subgroup_size;
    if (want && *want && strtoul(want, NULL, 10) != lanes) {
        fprintf(stderr, "hs_test_setup: HS_TEST_SUBGROUP=%s but the device runs subgroups of %u lanes\n", want,
                lanes);
        hs_vk_ctx_destroy(env->vk);
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
    g_vk = env->vk;
    return 0;
}

unsigned long hs_test_split_range(unsigned long base, unsigned long row_bytes) {
    void *state = NULL;
    if (hs_test_setup(&state)) return 0;
    const unsigned long group = hs_weight_group_rows(((hs_test_env *)state)->ops) * row_bytes;
    if (hs_test_teardown(&state)) return 0;
    return group + 1024 <= base ? base : (group + 1024 + 4095) / 4096 * 4096;
}

int hs_test_setup_range(void **state, unsigned long bytes) {
    return hs_test_setup_env(state, bytes, NULL, NULL);
}

char *hs_test_env_override(const char *name, const char *value) {
    const char *old = getenv(name);
    char *saved = old ? strdup(old) : NULL;
    setenv(name, value, 1);
    return saved;
}

void hs_test_env_restore(const char *name, char *saved) {
    if (saved) setenv(name, saved, 1);
    else unsetenv(name);
    free(saved);
}

int hs_test_setup_env(void **state, unsigned long range, const char *name, const char *value) {
    char v[32];
    snprintf(v, sizeof v, "%lu", range);
    char *saved_range = range ? hs_test_env_override("HS_VK_MAX_BUFFER_RANGE", v) : NULL;
    char *saved = name ? hs_test_env_override(name, value) : NULL;
    int r = hs_test_setup(state);
    if (name) hs_test_env_restore(name, saved);
    if (range) hs_test_env_restore("HS_VK_MAX_BUFFER_RANGE", saved_range);
    return r;
}

int hs_test_teardown(void **state) {
    hs_test_env *env = *state;
    if (!env) return 0;
    hs_ops_destroy(env->ops);
    uint32_t msgs = hs_vk_validation_count(env->vk);
    /* Whatever a test left (a leak, or a test that failed half-way) is
     * released before vkDestroyDevice, and fails the group. */
    hs_vk_live_counts left = hs_vk_release_since(env->vk, 0);
    hs_vk_ctx_destroy(env->vk);
    free(env);
    g_vk = NULL;
    int r = 0;
    if (left.buffers || left.pipelines || left.seqs) {
        fprintf(stderr, "group teardown: %u buffer(s), %u pipeline(s), %u sequence(s) were still alive (released)\n",
                left.buffers, left.pipelines, left.seqs);
        r = -1;
    }
    if (msgs) {
        fprintf(stderr, "group teardown: the validation layer reported %u message(s) in this group\n", msgs);
        r = -1;
    }
    if (r) g_group_teardown_failed = true;
    return r;
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

int hs_test_golden_ids(int line, const char *key, int32_t *out, int cap) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K/golden_greedy.txt", hs_test_shared_dir());
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[1 << 16];
    for (int i = 0; i <= line; i++) assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    char *p = strstr(buf, key);
    assert_non_null(p);
    p = strchr(p, '[');
    assert_non_null(p);
    int n = 0;
    for (p++; *p && *p != ']' && n < cap;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) {
            p++;
            continue;
        }
        out[n++] = (int32_t)v;
        p = end;
    }
    return n;
}

bool hs_test_model_path(const char *file, char *path, size_t size) {
    const char *models = getenv("HS_TEST_MODELS"), *home = getenv("HS_HOME"), *user = getenv("HOME");
    for (int i = 0; i < 3; i++) {
        const char *root = i == 0 ? models : i == 1 ? home : user;
        if (!root || !*root) continue;
        static const char *const fmt[3] = {"%s/%s", "%s/models/%s", "%s/.cache/heterospec/models/%s"};
        snprintf(path, size, fmt[i], root, file);
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) return true;
    }
    if (size) path[0] = '\0';
    return false;
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

bool hs_test_make_temp(char *buf, size_t n, const char *stem, bool dir) {
    const char *tmp = getenv("TMPDIR");
    /* The six X are mkstemp's and mkdtemp's template: they replace them with a unique suffix. */
    const int len = snprintf(buf, n, "%s/%s_XXXXXX", tmp && *tmp ? tmp : "/tmp", stem);
    if (len < 0 || (size_t)len >= n) {
        fprintf(stderr, "hs_test_make_temp: the path of %s does not fit %zu bytes\n", stem, n);
        return false;
    }
    int fd = -1;
    if (dir ? !mkdtemp(buf) : (fd = mkstemp(buf)) < 0) {
        fprintf(stderr, "hs_test_make_temp: %s: %s\n", buf, strerror(errno));
        return false;
    }
    if (fd >= 0) close(fd);
    return true;
}

bool hs_test_remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "hs_test_remove_dir: %s: %s\n", dir, strerror(errno));
        return false;
    }
    bool ok = true;
    char path[1024];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path)) {
            fprintf(stderr, "hs_test_remove_dir: %s: %s\n", path, strerror(errno));
            ok = false;
        }
    }
    closedir(d);
    if (ok && rmdir(dir)) {
        fprintf(stderr, "hs_test_remove_dir: %s: %s\n", dir, strerror(errno));
        ok = false;
    }
    return ok;
}
