/* `heterospec devices`: one line per Vulkan device, like ggml_vulkan's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_cli.h"
#include "hs_ops.h"

int hs_cli_devices(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: heterospec devices\n\n"
                   "Lists every Vulkan device with the capabilities heterospec uses. The device\n"
                   "used by the other commands is the best by type (discrete > integrated >\n"
                   "virtual > cpu) unless HS_DEVICE=<index|name> chooses one. HS_VK_DISABLE_*\n"
                   "switches show as disabled features. \"coherent: 0\" means host-visible memory\n"
                   "needs explicit flushes and invalidates, in ranges aligned to the atom\n"
                   "(nonCoherentAtomSize); HS_VK_FORCE_NONCOHERENT=1 emulates such memory (atom\n"
                   "raised to 256) on any device, for tests. The second line of a device is its\n"
                   "kernel tuning (rows per invocation of the products, columns per workgroup,\n"
                   "reduction workgroup size); HS_TUNING=\"rows=N,cols=N,reduce=N\" overrides it.\n"
                   "The next lines say which optional features the kernels use on the device\n"
                   "(and what runs without them), and which ones no kernel uses yet. The last\n"
                   "line, \"heterospec: used: N\", is the device the other commands pick; exit\n"
                   "status 1 when HS_DEVICE names none.\n");
            return 0;
        }
        fprintf(stderr, "heterospec devices: unknown option '%s'\n", argv[i]);
        return 2;
    }
    hs_vk_caps *caps = NULL;
    uint32_t n = 0;
    if (hs_vk_enumerate(&caps, &n) != HS_OK) {
        fprintf(stderr, "heterospec: %s\n", hs_last_error());
        return 1;
    }
    if (n == 0) {
        fprintf(stderr, "heterospec: no Vulkan device found (install a driver, e.g. mesa-vulkan-drivers)\n");
        free(caps);
        return 1;
    }
    for (uint32_t i = 0; i < n; i++) {
        char line[768];
        hs_vk_caps_line(&caps[i], line, sizeof line);
        printf("heterospec: %s\n", line);
        const hs_tuning t = hs_tuning_for(&caps[i]);
        printf("heterospec:     tuning: %s (rows %u, cols %u, reduce %u, texel %u, split %u, ubo %u, q8 %u, "
               "ropepass %u, attnqb %u, x8cols %u)%s\n",
               t.name, t.matvec_rows_per_wg, t.matmul_cols_per_wg, t.reduce_wg_size, t.texel_weights,
               t.split_n, t.uniform_x, t.q8_act, t.rope_pass, t.attn_qb, t.x8_cols,
               getenv("HS_TUNING") ? ", overridden by HS_TUNING" : "");
        hs_feature_use f[HS_FEATURE_COUNT];
        hs_feature_uses(&caps[i], f);
        char unused[256] = "";
        for (uint32_t j = 0; j < HS_FEATURE_COUNT; j++) {
            if (f[j].used_by) {
                printf("heterospec:     %s: %s by %s | without it (or %s=1): %s\n", f[j].name,
                       f[j].available ? "used" : "off; would be used", f[j].used_by, f[j].env, f[j].fallback);
            } else {
                size_t len = strlen(unused);
                snprintf(unused + len, sizeof unused - len, "%s%s (%s)", len ? ", " : "", f[j].name,
                         f[j].available ? "available" : "not available");
            }
        }
        if (unused[0]) printf("heterospec:     not used by any kernel yet: %s\n", unused);
    }
    const int pick = hs_vk_pick_device(caps, n);
    free(caps);
    if (pick < 0) {
        fprintf(stderr, "heterospec devices: HS_DEVICE=%s names none of these devices\n", getenv("HS_DEVICE"));
        return 1;
    }
    printf("heterospec: used: %d\n", pick);
    return 0;
}
