/* Helpers shared by the CLI commands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_cli.h"
#include "hs_vk.h"

hs_status hs_cli_model_path(const char *given, char *buf, size_t n) {
    if (given) {
        snprintf(buf, n, "%s", given);
        return HS_OK;
    }
    char home[1024];
    hs_status st = hs_home_dir(home, sizeof home);
    if (st == HS_OK) snprintf(buf, n, "%s/%s", home, HS_CLI_DEFAULT_MODEL);
    return st;
}

hs_status hs_cli_read_text(const char *path, char **out) {
    hs_status st = HS_OK;
    char *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return HS_FAIL(HS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    if (!(buf = malloc(cap))) HS_TRY(HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "out of memory reading %s", path));
    for (size_t r; (r = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += r;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) HS_TRY(HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "out of memory reading %s", path));
            buf = nb;
        }
    }
    if (ferror(f)) HS_TRY(HS_FAIL(HS_ERR_IO, "reading %s: %s", path, strerror(errno)));
    buf[n] = '\0';
    *out = buf;
    buf = NULL;
fail:
    free(buf);
    fclose(f);
    return st;
}
