/* testutil — shared helpers of the cmocka tests: one Vulkan context per test
 * group (validation on through HS_VK_VALIDATION=1, set by CTest), the group
 * runner, a seeded random generator, error measures, and upload/download
 * shortcuts.
 *
 * Usage in a test file:
 *   static int setup(void **state) { return hs_test_setup(state); }
 *   static int teardown(void **state) { return hs_test_teardown(state); }
 *   ... hs_test_env *env = *state; env->vk, env->ops ...
 *   int main(void) { ...; return hs_test_run_group("name", tests, setup, teardown); }
 *
 * What makes a test fail besides its own assertions (hs_test_run_group wraps
 * every test of the group in a per-test setup and teardown; cmocka 1.1.5
 * counts a failing per-test teardown as a failed test, but prints
 * "[ FAILED ] GROUP TEARDOWN" and still exits 0 for a failing group teardown,
 * so the runner adds that failure to its return value itself):
 *   - a validation-layer message while the test ran (the test that caused it
 *     fails, naming the count);
 *   - in the group teardown: a validation message, or buffers, pipelines or
 *     sequences still alive once hs_ops is destroyed (a leak, or what a test
 *     that failed half-way left; per test they cannot be judged, as models
 *     and hs_ops cache graphs and pipelines across tests); they are released
 *     before vkDestroyDevice, so the failure does not cascade into
 *     validation errors;
 *   - skip() when the environment has CI=true: coverage must not vanish
 *     silently on CI (testutil.h redefines cmocka's skip()).
 */
#ifndef HS_TESTUTIL_H
#define HS_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hs_ops.h"

typedef struct hs_test_env {
    hs_vk_ctx *vk;
    hs_ops *ops;
} hs_test_env;

/* Runs one group like cmocka_run_group_tests_name, with the checks above.
 * Returns the number of failed tests, plus one for a failed group setup or
 * teardown: non-zero means the executable must fail. */
#define hs_test_run_group(name, tests, setup, teardown)                                            \
    hs_test_run_group_((name), (tests), sizeof(tests) / sizeof((tests)[0]), (setup), (teardown))
int hs_test_run_group_(const char *name, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                       CMFixtureFunction teardown);

/* cmocka's skip(), failing instead when CI=true. */
void hs_test_skip(const char *file, int line);
#undef skip
#define skip() hs_test_skip(__FILE__, __LINE__)

int hs_test_setup(void **state);
/* hs_test_setup with maxStorageBufferRange forced down to `bytes`
 * (HS_VK_MAX_BUFFER_RANGE), so the ops must split their tensors. */
int hs_test_setup_range(void **state, unsigned long bytes);
/* hs_test_setup with maxStorageBufferRange forced down to `range` (0: as
 * is) and one more environment override name=value (NULL: none), e.g.
 * HS_VK_DISABLE_SUBGROUP_OPS or HS_VK_FORCE_NONCOHERENT. Both are put back
 * afterwards (previous value or absence), so a switch forced for one group
 * neither leaks into the next nor drops what the whole run was started with. */
int hs_test_setup_env(void **state, unsigned long range, const char *name, const char *value);
int hs_test_teardown(void **state);
/* The maxStorageBufferRange a split group forces: `base` where one row group
 * of the products (hs_weight_group_rows, of row_bytes each on the
 * device) fits it, else that group plus 1 KiB rounded up to 4 KiB (a group
 * must fit one binding). Probes the device with a context of its own; 0 when
 * none can be made. */
unsigned long hs_test_split_range(unsigned long base, unsigned long row_bytes);

/* Fails the current test with the last error message unless st == HS_OK. */
#define HS_CHECK(expr)                                                                             \
    do {                                                                                           \
        hs_status st_ = (expr);                                                                    \
        if (st_ != HS_OK) fail_msg("%s -> %s: %s", #expr, hs_status_string(st_), hs_last_error()); \
    } while (0)

/* Deterministic xorshift generator. */
typedef struct hs_rng {
    uint64_t s;
} hs_rng;
void hs_rng_seed(hs_rng *r, uint64_t seed);
uint32_t hs_rng_u32(hs_rng *r);
float hs_rng_uniform(hs_rng *r);           /* [0, 1) */
float hs_rng_range(hs_rng *r, float lo, float hi);
void hs_rng_fill(hs_rng *r, float *x, size_t n, float lo, float hi);

/* Normalised mean squared error sum((a-b)^2) / sum(b^2) (b = reference). */
double hs_nmse(const float *a, const float *ref, size_t n);
double hs_max_abs_diff(const float *a, const float *b, size_t n);

/* Creates a device buffer holding n bytes of data (or zeroes if data is NULL). */
hs_vk_buffer *hs_test_buffer(hs_test_env *env, const void *data, size_t n);
/* Downloads n bytes from a buffer into a new malloc'ed array. */
void *hs_test_download(hs_vk_buffer *b, size_t n);

/* Binding of a whole buffer from offset on. */
static inline hs_vk_binding hs_test_bind(hs_vk_buffer *b, uint64_t offset) { return (hs_vk_binding){b, offset, 0}; }
/* A new sequence, recording. */
hs_vk_seq *hs_test_seq_begin(hs_test_env *env);
/* Ends, submits (waits) and destroys a sequence. */
void hs_test_seq_run(hs_vk_seq *s);
/* n uniform random floats in [lo, hi) (malloc'ed). */
float *hs_test_rand_array(hs_rng *r, size_t n, float lo, float hi);

/* Parses the bracketed id list after `key` on line `line` (0-based) of
 * stories260K's golden_greedy.txt (computed independently, see its README)
 * into out (at most cap); returns the count. */
int hs_test_golden_ids(int line, const char *key, int32_t *out, int cap);

/* Sets environment variable name to value and returns what it was before
 * (malloc'ed, NULL when unset) for hs_test_env_restore, which puts it back and
 * frees it: a switch forced for one context neither leaks into the next nor
 * drops what the whole run was started with. */
char *hs_test_env_override(const char *name, const char *value);
void hs_test_env_restore(const char *name, char *saved);

/* Makes a new empty file (dir false) or folder (dir true) "$TMPDIR/<stem>_" plus six characters that
 * mkstemp / mkdtemp choose (TMPDIR unset or empty: /tmp), with its path in buf; false, saying why, if the path
 * does not fit in n bytes or it could not be made. */
bool hs_test_make_temp(char *buf, size_t n, const char *stem, bool dir);
/* Removes the files in dir (it holds no folders) and dir; false, saying why, if that failed. */
bool hs_test_remove_dir(const char *dir);

/* Shared data folder (../shared beside the source tree by default). */
const char *hs_test_shared_dir(void);
/* Path of a downloaded model file (tools/fetch_model.sh), looked up in
 * $HS_TEST_MODELS (set by tools/test.sh to where it fetched the models, since
 * CTest points HS_HOME at the build tree), then $HS_HOME/models, then
 * ~/.cache/heterospec/models. Returns false, leaving path empty, when none
 * holds it: the caller skips, which CI=true turns into a failure. */
bool hs_test_model_path(const char *file, char *path, size_t size);

/* f16 conversion on the host (IEEE binary16, round to nearest even). */
uint16_t hs_test_f32_to_f16(float f);
float hs_test_f16_to_f32(uint16_t h);

#endif
