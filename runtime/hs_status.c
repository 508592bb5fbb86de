#include "hs_status.h"

#include <stdarg.h>
#include <string.h>

static _Thread_local char g_msg[1024];

const char *hs_status_string(hs_status st) {
    switch (st) {
    case HS_OK: return "HS_OK";
    case HS_ERR_INVALID_ARG: return "HS_ERR_INVALID_ARG";
    case HS_ERR_OUT_OF_RANGE: return "HS_ERR_OUT_OF_RANGE";
    case HS_ERR_UNSUPPORTED_TYPE: return "HS_ERR_UNSUPPORTED_TYPE";
    case HS_ERR_OUT_OF_HOST_MEMORY: return "HS_ERR_OUT_OF_HOST_MEMORY";
    case HS_ERR_IO: return "HS_ERR_IO";
    case HS_ERR_FORMAT: return "HS_ERR_FORMAT";
    case HS_ERR_VK_NO_DEVICE: return "HS_ERR_VK_NO_DEVICE";
    case HS_ERR_VK_INIT: return "HS_ERR_VK_INIT";
    case HS_ERR_VK_OUT_OF_DEVICE_MEMORY: return "HS_ERR_VK_OUT_OF_DEVICE_MEMORY";
    case HS_ERR_VK_OUT_OF_HOST_MEMORY: return "HS_ERR_VK_OUT_OF_HOST_MEMORY";
    case HS_ERR_VK_DEVICE_LOST: return "HS_ERR_VK_DEVICE_LOST";
    case HS_ERR_VK_UNSUPPORTED: return "HS_ERR_VK_UNSUPPORTED";
    case HS_ERR_VK_VALIDATION: return "HS_ERR_VK_VALIDATION";
    case HS_ERR_VK_OTHER: return "HS_ERR_VK_OTHER";
    }
    return "HS_ERR_UNKNOWN";
}

const char *hs_last_error(void) { return g_msg; }

void hs_error_clear(void) { g_msg[0] = '\0'; }

hs_status hs_error_set(hs_status st, const char *file, int line, const char *fmt, ...) {
    char body[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    /* Keep paths short: from the project folder on. */
    const char *short_file = file;
    const char *dirs[] = {"runtime/", "models/", "host/", "tests/", "tools/"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        const char *p = strstr(file, dirs[i]);
        if (p) {
            short_file = p;
            break;
        }
    }
    snprintf(g_msg, sizeof g_msg, "%s at %s:%d", body, short_file, line);
    return st;
}
