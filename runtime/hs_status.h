/* hs_status — one error enum for the whole project, with readable messages.
 *
 * Functions that can fail return hs_status. On failure they also leave a
 * message in a thread-local buffer (hs_last_error()) of the form
 *   "vkAllocateMemory: VK_ERROR_OUT_OF_DEVICE_MEMORY (requested 212 MiB) at runtime/vk_buffer.c:88".
 * Codes are grouped in numbered ranges per area so a caller can test the class
 * (hs_status_class) without knowing every code.
 *
 * Thread-safety: the message buffer is per thread.
 */
#ifndef HS_STATUS_H
#define HS_STATUS_H

#include <stdio.h>
#include <stdlib.h>

typedef enum hs_status {
    HS_OK = 0,

    /* 1xx: caller errors */
    HS_ERR_INVALID_ARG = 100,
    HS_ERR_OUT_OF_RANGE = 101,
    HS_ERR_UNSUPPORTED_TYPE = 102,

    /* 2xx: host resources and files */
    HS_ERR_OUT_OF_HOST_MEMORY = 200,
    HS_ERR_IO = 201,
    HS_ERR_FORMAT = 202, /* malformed input file */

    /* 3xx: Vulkan */
    HS_ERR_VK_NO_DEVICE = 300,
    HS_ERR_VK_INIT = 301,
    HS_ERR_VK_OUT_OF_DEVICE_MEMORY = 302,
    HS_ERR_VK_OUT_OF_HOST_MEMORY = 303,
    HS_ERR_VK_DEVICE_LOST = 304,
    HS_ERR_VK_UNSUPPORTED = 305, /* feature, extension or limit the device lacks */
    HS_ERR_VK_VALIDATION = 306,  /* the validation layer reported a message */
    HS_ERR_VK_OTHER = 399,
} hs_status;

/* Name of the code, e.g. "HS_ERR_VK_DEVICE_LOST". */
const char *hs_status_string(hs_status st);

/* Message of the last failure on this thread ("" if none). */
const char *hs_last_error(void);

/* Records a failure message and returns st. Use through HS_FAIL. */
hs_status hs_error_set(hs_status st, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Clears the message of this thread. */
void hs_error_clear(void);

#define HS_FAIL(st, ...) hs_error_set((st), __FILE__, __LINE__, __VA_ARGS__)

/* Propagates a failing hs_status to the caller's `fail:` label via `st`. */
#define HS_TRY(expr)                                                                               \
    do {                                                                                           \
        st = (expr);                                                                               \
        if (st != HS_OK) goto fail;                                                                \
    } while (0)

/* Programmer errors: abort with location. Not for bad input. */
#define HS_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "heterospec: assertion failed: %s at %s:%d\n", #cond, __FILE__,       \
                    __LINE__);                                                                     \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
