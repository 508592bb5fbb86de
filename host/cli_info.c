/* `heterospec info -m FILE [--json]`: what a GGUF file holds — the header (version, alignment, counts), every
 * metadata key (long arrays abbreviated to their first elements and their length), the tensor table (name,
 * type, shape, size, offset) and the totals (parameters and bytes). Text for people, or JSON (cJSON) for
 * tools. A file that fails validation prints the reader's message and exits 1.
 * Thread-safety: single-threaded CLI code.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "gguf.h"
#include "hs_cli.h"

enum {
    INFO_ARRAY_HEAD = 8,    /* array elements shown */
    INFO_STR_MAX = 96,      /* bytes of a string value shown */
    INFO_ELEM_STR_MAX = 24, /* bytes of a string array element shown */
};

static void usage(FILE *f) {
    fprintf(f, "usage: heterospec info -m FILE [--json]\n"
               "\n"
               "Validates a GGUF file and prints its header, metadata and tensor table.\n"
               "\n"
               "options:\n"
               "  -m, --model FILE   the GGUF file\n"
               "  --json             print JSON instead of text\n"
               "  -h, --help         this help\n");
}

/* ---- formatting helpers ---- */

/* Shortest %g form of x that reads back as the same float (f32) or double. */
static void fmt_float(char *buf, size_t n, double x, bool is_f32) {
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, x);
        if (is_f32 ? (float)strtod(buf, NULL) == (float)x : strtod(buf, NULL) == x) return;
    }
}

/* Appends s (len bytes) to out, quoted and escaped, cut after max bytes ("..." and the length then). */
static void fmt_str(char *out, size_t n, const hs_gguf_str *s, uint64_t max) {
    size_t o = 0;
    out[o++] = '"';
    for (uint64_t i = 0; i < s->len && i < max && o + 8 < n; i++) {
        unsigned char ch = (unsigned char)s->s[i];
        const char *esc = ch == '"'    ? "\\\""
                          : ch == '\\' ? "\\\\"
                          : ch == '\n' ? "\\n"
                          : ch == '\t' ? "\\t"
                                       : NULL;
        if (esc)
            o += (size_t)snprintf(out + o, n - o, "%s", esc);
        else if (ch < 0x20 || ch == 0x7f)
            o += (size_t)snprintf(out + o, n - o, "\\x%02x", ch);
        else
            out[o++] = (char)ch;
    }
    out[o++] = '"';
    out[o] = '\0';
    if (s->len > max) snprintf(out + o, n - o, "... (%" PRIu64 " bytes)", s->len);
}

/* A scalar value as text. */
static void fmt_scalar(char *buf, size_t n, const hs_gguf_value *v, uint64_t str_max) {
    switch (v->type) {
    case HS_GGUF_TYPE_UINT8:
    case HS_GGUF_TYPE_UINT16:
    case HS_GGUF_TYPE_UINT32:
    case HS_GGUF_TYPE_UINT64: snprintf(buf, n, "%" PRIu64, v->v.u); break;
    case HS_GGUF_TYPE_INT8:
    case HS_GGUF_TYPE_INT16:
    case HS_GGUF_TYPE_INT32:
    case HS_GGUF_TYPE_INT64: snprintf(buf, n, "%" PRId64, v->v.i); break;
    case HS_GGUF_TYPE_FLOAT32:
    case HS_GGUF_TYPE_FLOAT64: fmt_float(buf, n, v->v.f, v->type == HS_GGUF_TYPE_FLOAT32); break;
    case HS_GGUF_TYPE_BOOL: snprintf(buf, n, "%s", v->v.b ? "true" : "false"); break;
    case HS_GGUF_TYPE_STRING: fmt_str(buf, n, &v->v.s, str_max); break;
    default: snprintf(buf, n, "?"); break;
    }
}

static void fmt_bytes(char *buf, size_t n, uint64_t b) {
    if (b < 1024)
        snprintf(buf, n, "%" PRIu64 " B", b);
    else if (b < 1024 * 1024)
        snprintf(buf, n, "%.2f KiB", b / 1024.0);
    else if (b < 1024ull * 1024 * 1024)
        snprintf(buf, n, "%.2f MiB", b / (1024.0 * 1024));
    else
        snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
}

static void fmt_count(char *buf, size_t n, uint64_t c) {
    if (c < 1000)
        snprintf(buf, n, "%" PRIu64, c);
    else if (c < 1000000)
        snprintf(buf, n, "%.2f K", c / 1e3);
    else if (c < 1000000000)
        snprintf(buf, n, "%.2f M", c / 1e6);
    else
        snprintf(buf, n, "%.2f B", c / 1e9);
}

static void fmt_shape(char *buf, size_t n, const hs_gguf_tensor *t) {
    size_t o = (size_t)snprintf(buf, n, "[");
    for (uint32_t d = 0; d < t->n_dims && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

/* ---- text ---- */

static void print_kv_text(const hs_gguf_value *v) {
    char val[512], type[32];
    if (v->type != HS_GGUF_TYPE_ARRAY) {
        fmt_scalar(val, sizeof val, v, INFO_STR_MAX);
        printf("  %-44s %-10s %s\n", v->key, hs_gguf_type_name(v->type), val);
        return;
    }
    snprintf(type, sizeof type, "arr[%s]", hs_gguf_type_name(v->v.arr.type));
    printf("  %-44s %-10s %" PRIu64 " items: [", v->key, type, v->v.arr.n);
    for (uint64_t i = 0; i < v->v.arr.n && i < INFO_ARRAY_HEAD; i++) {
        hs_gguf_value e;
        if (hs_gguf_arr_elem(v, i, &e) != HS_OK) break;
        fmt_scalar(val, sizeof val, &e, INFO_ELEM_STR_MAX);
        printf("%s%s", i ? ", " : "", val);
    }
    printf("%s]\n", v->v.arr.n > INFO_ARRAY_HEAD ? ", ..." : "");
}

static void print_text(const hs_gguf *g) {
    char a[64], b[64];
    fmt_bytes(a, sizeof a, hs_gguf_file_size(g));
    printf("%s: GGUF version %" PRIu32 ", alignment %" PRIu32 ", %" PRIu64 " metadata keys, %" PRIu64
           " tensors, data at offset %" PRIu64 ", file %" PRIu64 " bytes (%s)\n",
           hs_gguf_name(g), hs_gguf_version(g), hs_gguf_alignment(g), hs_gguf_n_kv(g), hs_gguf_n_tensors(g),
           hs_gguf_data_offset(g), hs_gguf_file_size(g), a);
    printf("\nmetadata:\n");
    for (uint64_t i = 0; i < hs_gguf_n_kv(g); i++)
        print_kv_text(hs_gguf_kv_at(g, i));
    printf("\ntensors:\n  %5s  %-32s %-8s %-24s %12s %12s %12s\n", "#", "name", "type", "shape", "params",
           "size", "offset");
    uint64_t params = 0, bytes = 0;
    for (uint64_t i = 0; i < hs_gguf_n_tensors(g); i++) {
        const hs_gguf_tensor *t = hs_gguf_tensor_at(g, i);
        char shape[128];
        fmt_shape(shape, sizeof shape, t);
        fmt_bytes(a, sizeof a, t->nbytes);
        printf("  %5" PRIu64 "  %-32s %-8s %-24s %12" PRId64 " %12s %12" PRIu64 "\n", i, t->name,
               hs_ggml_type_get(t->type)->name, shape, hs_gguf_tensor_nelements(t), a, t->offset);
        params += (uint64_t)hs_gguf_tensor_nelements(t);
        bytes += t->nbytes;
    }
    fmt_count(a, sizeof a, params);
    fmt_bytes(b, sizeof b, bytes);
    printf("\ntotal: %" PRIu64 " parameters (%s), %" PRIu64 " bytes of tensor data (%s)\n", params, a, bytes,
           b);
}

/* ---- JSON ---- */

/* Integers beyond 2^53 do not survive a JSON double: those become strings of digits. */
static cJSON *json_int(bool is_signed, uint64_t u, int64_t i) {
    char buf[32];
    if (is_signed ? (i > -(1ll << 53) && i < (1ll << 53)) : u < (1ull << 53))
        return cJSON_CreateNumber(is_signed ? (double)i : (double)u);
    if (is_signed)
        snprintf(buf, sizeof buf, "%" PRId64, i);
    else
        snprintf(buf, sizeof buf, "%" PRIu64, u);
    return cJSON_CreateString(buf);
}

static cJSON *json_scalar(const hs_gguf_value *v) {
    switch (v->type) {
    case HS_GGUF_TYPE_UINT8:
    case HS_GGUF_TYPE_UINT16:
    case HS_GGUF_TYPE_UINT32:
    case HS_GGUF_TYPE_UINT64: return json_int(false, v->v.u, 0);
    case HS_GGUF_TYPE_INT8:
    case HS_GGUF_TYPE_INT16:
    case HS_GGUF_TYPE_INT32:
    case HS_GGUF_TYPE_INT64: return json_int(true, 0, v->v.i);
    case HS_GGUF_TYPE_FLOAT32:
    case HS_GGUF_TYPE_FLOAT64: return cJSON_CreateNumber(v->v.f);
    case HS_GGUF_TYPE_BOOL: return cJSON_CreateBool(v->v.b);
    case HS_GGUF_TYPE_STRING: return cJSON_CreateString(v->v.s.s);
    default: return cJSON_CreateNull();
    }
}

static cJSON *json_kv(const hs_gguf_value *v) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", v->key);
    cJSON_AddStringToObject(o, "type", hs_gguf_type_name(v->type));
    if (v->type != HS_GGUF_TYPE_ARRAY) {
        cJSON_AddItemToObject(o, "value", json_scalar(v));
        return o;
    }
    cJSON_AddStringToObject(o, "elem_type", hs_gguf_type_name(v->v.arr.type));
    cJSON_AddItemToObject(o, "length", json_int(false, v->v.arr.n, 0));
    cJSON *head = cJSON_AddArrayToObject(o, "value");
    for (uint64_t i = 0; i < v->v.arr.n && i < INFO_ARRAY_HEAD; i++) {
        hs_gguf_value e;
        if (hs_gguf_arr_elem(v, i, &e) != HS_OK) break;
        cJSON_AddItemToArray(head, json_scalar(&e));
    }
    cJSON_AddBoolToObject(o, "abbreviated", v->v.arr.n > INFO_ARRAY_HEAD);
    return o;
}

static cJSON *json_tensor(const hs_gguf_tensor *t) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "type", hs_ggml_type_get(t->type)->name);
    cJSON *shape = cJSON_AddArrayToObject(o, "shape");
    for (uint32_t d = 0; d < t->n_dims; d++)
        cJSON_AddItemToArray(shape, json_int(true, 0, t->ne[d]));
    cJSON_AddItemToObject(o, "n_elements", json_int(true, 0, hs_gguf_tensor_nelements(t)));
    cJSON_AddItemToObject(o, "nbytes", json_int(false, t->nbytes, 0));
    cJSON_AddItemToObject(o, "offset", json_int(false, t->offset, 0));
    return o;
}

static int print_json(const hs_gguf *g) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "file", hs_gguf_name(g));
    cJSON_AddNumberToObject(root, "version", hs_gguf_version(g));
    cJSON_AddNumberToObject(root, "alignment", hs_gguf_alignment(g));
    cJSON_AddItemToObject(root, "data_offset", json_int(false, hs_gguf_data_offset(g), 0));
    cJSON_AddItemToObject(root, "file_size", json_int(false, hs_gguf_file_size(g), 0));
    cJSON_AddItemToObject(root, "n_kv", json_int(false, hs_gguf_n_kv(g), 0));
    cJSON_AddItemToObject(root, "n_tensors", json_int(false, hs_gguf_n_tensors(g), 0));
    cJSON *md = cJSON_AddArrayToObject(root, "metadata");
    for (uint64_t i = 0; i < hs_gguf_n_kv(g); i++)
        cJSON_AddItemToArray(md, json_kv(hs_gguf_kv_at(g, i)));
    cJSON *ts = cJSON_AddArrayToObject(root, "tensors");
    uint64_t params = 0, bytes = 0;
    for (uint64_t i = 0; i < hs_gguf_n_tensors(g); i++) {
        const hs_gguf_tensor *t = hs_gguf_tensor_at(g, i);
        cJSON_AddItemToArray(ts, json_tensor(t));
        params += (uint64_t)hs_gguf_tensor_nelements(t);
        bytes += t->nbytes;
    }
    cJSON_AddItemToObject(root, "n_params", json_int(false, params, 0));
    cJSON_AddItemToObject(root, "n_bytes", json_int(false, bytes, 0));
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    if (!s) {
        fprintf(stderr, "heterospec info: out of memory printing JSON\n");
        return 1;
    }
    printf("%s\n", s);
    cJSON_free(s);
    return 0;
}

int hs_cli_info(int argc, char **argv) {
    const char *path = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) {
            path = argv[++i];
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else {
            fprintf(stderr, "heterospec info: unknown or incomplete option '%s'\n\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "heterospec info: no file given (-m FILE)\n\n");
        usage(stderr);
        return 2;
    }
    hs_gguf *g = NULL;
    if (hs_gguf_open(path, &g) != HS_OK) {
        fprintf(stderr, "heterospec: %s\n", hs_last_error());
        return 1;
    }
    int rc = 0;
    if (json)
        rc = print_json(g);
    else
        print_text(g);
    hs_gguf_close(g);
    fflush(stdout);
    return rc;
}
