/* Helpers shared by the CLI commands. */
#include <stdio.h>

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
