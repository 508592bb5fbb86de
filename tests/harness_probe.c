/* harness_probe — failures the test harness (testutil) must turn into a
 * failing exit status. Each scenario is one cmocka group that a correct test
 * suite must report as failed; tests/CMakeLists.txt runs them through
 * tests/expect_run.cmake, which checks the exit status and the message, so the
 * promises of testutil.h are themselves tested:
 *
 *   harness_probe validation   a test provokes a validation error -> that test fails
 *   harness_probe teardown     a test leaves a buffer alive -> the group teardown fails
 *   harness_probe skip         a test calls skip() -> fails under CI=true, skips otherwise
 *   harness_probe clean        a test that does everything right -> passes
 *   harness_probe shards       three host tests, for HS_TEST_FILTER / HS_TEST_EXCLUDE (CTest's shards)
 */
#include <string.h>

#include "testutil.h"

static int setup(void **state) { return hs_test_setup(state); }
static int teardown(void **state) { return hs_test_teardown(state); }

/* A buffer of size 0 is invalid usage (VUID-VkBufferCreateInfo-size-00912);
 * the test itself asserts nothing that fails. */
static void provoke_validation(void **state) {
    hs_test_env *env = *state;
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .size = 0,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
    VkBuffer b = VK_NULL_HANDLE;
    VkResult r = vkCreateBuffer(hs_vk_ctx_device(env->vk), &bci, NULL, &b);
    if (r == VK_SUCCESS && b) vkDestroyBuffer(hs_vk_ctx_device(env->vk), b, NULL);
}

/* Runs after provoke_validation in the same group: must still pass, so the
 * failure is charged to the test that caused it and to no other. */
static void innocent(void **state) {
    hs_test_env *env = *state;
    hs_vk_buffer *b = hs_test_buffer(env, NULL, 256);
    hs_vk_buffer_destroy(b);
}

static void leave_buffer(void **state) {
    hs_test_env *env = *state;
    (void)hs_test_buffer(env, NULL, 256);
}

static void skipping(void **state) {
    (void)state;
    skip();
}

static void shard_one(void **state) { (void)state; }
static void shard_two(void **state) { (void)state; }
static void shard_three(void **state) { (void)state; }

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "validation")) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(provoke_validation), cmocka_unit_test(innocent)};
        return hs_test_run_group("probe_validation", tests, setup, teardown);
    }
    if (!strcmp(what, "teardown")) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(leave_buffer)};
        return hs_test_run_group("probe_teardown", tests, setup, teardown);
    }
    if (!strcmp(what, "skip")) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(skipping)};
        return hs_test_run_group("probe_skip", tests, NULL, NULL);
    }
    if (!strcmp(what, "clean")) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(innocent)};
        return hs_test_run_group("probe_clean", tests, setup, teardown);
    }
    if (!strcmp(what, "shards")) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(shard_one), cmocka_unit_test(shard_two),
                                           cmocka_unit_test(shard_three)};
        return hs_test_run_group("probe_shards", tests, NULL, NULL);
    }
    fprintf(stderr, "usage: harness_probe validation|teardown|skip|clean|shards\n");
    return 2;
}
