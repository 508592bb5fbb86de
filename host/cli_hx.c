/* Finding and loading HeteroSpec calibrations for the CLI (hs_cli.h):
 * cache files keyed by device, model and head, the defaults committed next
 * to a head, and built-in defaults. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_cli.h"
#include "hs_vk.h"

/* FNV-1a (64 bits) of a file's bytes. */
static hs_status file_hash(const char *path, uint64_t *out) {
    FILE *f = fopen(path, "rb");
    if (!f) return HS_FAIL(HS_ERR_IO, "%s: %s", path, strerror(errno));
    uint64_t h = 14695981039346656037ull;
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < n; i++) {
            h ^= buf[i];
            h *= 1099511628211ull;
        }
    const bool bad = ferror(f);
    fclose(f);
    if (bad) return HS_FAIL(HS_ERR_IO, "%s: read error", path);
    *out = h;
    return HS_OK;
}

static uint64_t device_hash(const hs_vk_caps *c) {
    uint64_t h = 14695981039346656037ull;
    /* host_cpu: on a CPU device the same lavapipe on two processors is two devices for the cost model
     * ("" elsewhere). */
    const unsigned char *parts[] = {c->device_uuid, (const unsigned char *)&c->driver_version,
                                    (const unsigned char *)c->driver_info, (const unsigned char *)c->host_cpu};
    const size_t lens[] = {sizeof c->device_uuid, sizeof c->driver_version, strlen(c->driver_info),
                           strlen(c->host_cpu)};
    for (int p = 0; p < 4; p++)
        for (size_t i = 0; i < lens[p]; i++) {
            h ^= parts[p][i];
            h *= 1099511628211ull;
        }
    /* Split execution changes every cost (lavapipe: one device per core), so it has calibrations of its own. */
    if (c->parts > 1) {
        h ^= c->parts;
        h *= 1099511628211ull;
    }
    return h;
}

hs_status hs_cli_hx_identity(const hs_vk_caps *caps, const char *model_path, const char *head_path,
                             hs_cli_hx_id *id) {
    hs_status st = HS_OK;
    memset(id, 0, sizeof *id);
    id->device = device_hash(caps);
    HS_TRY(file_hash(model_path, &id->model));
    HS_TRY(file_hash(head_path, &id->head));
fail:
    return st;
}

/* kv_name NULL: the name of the files made before the cache type was in the key (all f32). */
static hs_status cache_path(const hs_cli_hx_id *id, bool sampling, const char *kv_name, char *buf, size_t n) {
    hs_status st = HS_OK;
    char home[1024];
    HS_TRY(hs_home_dir(home, sizeof home));
    snprintf(buf, n, "%s/calib/%016llx-%016llx-%016llx-%s%s%s.json", home, (unsigned long long)id->device,
             (unsigned long long)id->model, (unsigned long long)id->head, sampling ? "sample" : "greedy",
             kv_name ? "-" : "", kv_name ? kv_name : "");
fail:
    return st;
}

hs_status hs_cli_hx_cache_path(const hs_cli_hx_id *id, bool sampling, hs_type kv, char *buf, size_t n) {
    return cache_path(id, sampling, hs_type_name(kv), buf, n);
}

cJSON *hs_cli_hx_identity_json(const hs_vk_caps *caps, const hs_cli_hx_id *id, const char *model_path,
                               const char *head_path, bool sampling, hs_type kv) {
    cJSON *o = cJSON_CreateObject();
    cJSON *d = cJSON_AddObjectToObject(o, "device");
    char uuid[2 * VK_UUID_SIZE + 1], hex[17];
    for (unsigned i = 0; i < VK_UUID_SIZE; i++)
        snprintf(uuid + 2 * i, 3, "%02x", caps->device_uuid[i]);
    cJSON_AddStringToObject(d, "name", caps->device_name);
    cJSON_AddStringToObject(d, "driver", caps->driver_info);
    cJSON_AddNumberToObject(d, "driver_version", caps->driver_version);
    cJSON_AddStringToObject(d, "uuid", uuid);
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)id->device);
    cJSON_AddStringToObject(d, "key", hex);
    cJSON_AddNumberToObject(d, "parts", caps->parts); /* split execution: logical devices (1: off) */
    if (caps->host_cpu[0]) cJSON_AddStringToObject(d, "host_cpu", caps->host_cpu); /* part of the key */
    const char *names[] = {"model", "head"};
    const char *paths[] = {model_path, head_path};
    const uint64_t hashes[] = {id->model, id->head};
    for (int i = 0; i < 2; i++) {
        cJSON *m = cJSON_AddObjectToObject(o, names[i]);
        const char *base = strrchr(paths[i], '/');
        cJSON_AddStringToObject(m, "file", base ? base + 1 : paths[i]);
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hashes[i]);
        cJSON_AddStringToObject(m, "fnv1a64", hex);
    }
    cJSON_AddStringToObject(o, "mode", sampling ? "sample" : "greedy");
    cJSON_AddStringToObject(o, "kv_type", hs_type_name(kv));
    return o;
}

/* Loads path into out when it exists: 1 loaded, 0 absent, error otherwise. The source names the cache
 * type the file was measured with when it is not kv (files without kv_type: f32, made before it). */
static hs_status try_load(const char *path, hs_type kv, hs_cli_hx *out, int *found) {
    hs_status st = HS_OK;
    char *text = NULL;
    cJSON *o = NULL;
    *found = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return HS_OK;
    fclose(f);
    HS_TRY(hs_cli_read_text(path, &text));
    o = cJSON_Parse(text);
    if (!o) HS_TRY(HS_FAIL(HS_ERR_FORMAT, "%s: not JSON", path));
    st = hs_hx_model_from_json(o, &out->model);
    if (st != HS_OK) HS_TRY(HS_FAIL(st, "%s: %s", path, hs_last_error()));
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "eagle2_tuned");
    if (e) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(e, "top_k"),
                    *d = cJSON_GetObjectItemCaseSensitive(e, "depth"),
                    *n = cJSON_GetObjectItemCaseSensitive(e, "total");
        if (!cJSON_IsNumber(k) || !cJSON_IsNumber(d) || !cJSON_IsNumber(n) || k->valueint < 1 ||
            d->valueint < 1 || n->valueint < 1 || k->valueint > (int)HS_TOPK_MAX_K ||
            d->valueint >= (int)HS_TREE_MAX_DEPTH - 1)
            HS_TRY(HS_FAIL(HS_ERR_FORMAT, "%s: eagle2_tuned needs top_k 1..%u, depth 1..%u, total >= 1", path,
                           HS_TOPK_MAX_K, HS_TREE_MAX_DEPTH - 2));
        const cJSON *ea = cJSON_GetObjectItemCaseSensitive(e, "eager"); /* files before it: 0 */
        if (ea && (!cJSON_IsNumber(ea) || ea->valueint < 0 || ea->valueint > (int)HS_TREE_EAGER_MAX))
            HS_TRY(HS_FAIL(HS_ERR_FORMAT, "%s: eagle2_tuned.eager must be 0..%u", path, HS_TREE_EAGER_MAX));
        /* Files before them: no floor, no rest. */
        const cJSON *pm = cJSON_GetObjectItemCaseSensitive(e, "p_min"),
                    *re = cJSON_GetObjectItemCaseSensitive(e, "rest");
        if (pm && (!cJSON_IsNumber(pm) || !(pm->valuedouble >= 0 && pm->valuedouble < 1)))
            HS_TRY(HS_FAIL(HS_ERR_FORMAT, "%s: eagle2_tuned.p_min must be in [0, 1)", path));
        if (re && (!cJSON_IsNumber(re) || re->valueint < 0 || re->valueint > HS_HX_MAX_REST))
            HS_TRY(HS_FAIL(HS_ERR_FORMAT, "%s: eagle2_tuned.rest must be 0..%d", path, HS_HX_MAX_REST));
        out->have_eagle2 = true;
        out->eagle2 = hs_tree_eagle2((uint32_t)k->valueint, (uint32_t)d->valueint, (uint32_t)n->valueint);
        out->eagle2.eager = ea ? (uint32_t)ea->valueint : 0;
        out->eagle2.p_min = pm ? (float)pm->valuedouble : 0.0f;
        out->eagle2.rest = re ? (uint32_t)re->valueint : 0;
    }
    const cJSON *fm =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "model"), "fnv1a64");
    snprintf(out->for_model, sizeof out->for_model, "%s", cJSON_IsString(fm) ? fm->valuestring : "");
    const cJSON *dj = cJSON_GetObjectItemCaseSensitive(o, "device");
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(dj, "name"),
                *cpu = cJSON_GetObjectItemCaseSensitive(dj, "host_cpu");
    const char *on = cJSON_IsString(cpu) ? cpu->valuestring : "";
    const cJSON *kj = cJSON_GetObjectItemCaseSensitive(o, "kv_type");
    const char *file_kv = cJSON_IsString(kj) ? kj->valuestring : "f32";
    char kv_note[64] = "";
    if (strcmp(file_kv, hs_type_name(kv))) snprintf(kv_note, sizeof kv_note, " with an %.16s KV cache", file_kv);
    snprintf(out->source, sizeof out->source, "%s (measured on %s%s%s%s)", path,
             cJSON_IsString(dev) ? dev->valuestring : "an unnamed device", on[0] ? " on " : "", on, kv_note);
    *found = 1;
fail:
    cJSON_Delete(o);
    free(text);
    return st;
}

/* A calibration made on another model file (another quantization, say)
 * still works, but its costs and acceptance were measured on that one. */
static void warn_other_model(const hs_cli_hx *hx, uint64_t model_hash) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)model_hash);
    if (hx->for_model[0] && strcmp(hx->for_model, hex))
        fprintf(stderr,
                "[heterospec] warning: calibration %s was made for another model file (fnv1a64 %s, this "
                "one %s): its costs and acceptance were measured there (heterospec calibrate makes this "
                "model's)\n",
                hx->source, hx->for_model, hex);
}

hs_status hs_cli_hx_load(const hs_vk_caps *caps, const char *model_path, const char *head_path,
                         const char *given, bool sampling, hs_type kv, hs_cli_hx *out) {
    hs_status st = HS_OK;
    memset(out, 0, sizeof *out);
    hs_hx_model_default(&out->model);
    int found = 0;
    if (given) {
        uint64_t model_hash;
        HS_TRY(try_load(given, kv, out, &found));
        if (!found) return HS_FAIL(HS_ERR_IO, "--calibration %s: no such file", given);
        HS_TRY(file_hash(model_path, &model_hash));
        warn_other_model(out, model_hash);
        return HS_OK;
    }
    hs_cli_hx_id id;
    char path[1400];
    HS_TRY(hs_cli_hx_identity(caps, model_path, head_path, &id));
    /* This device's own calibration in the mode asked, then greedy's (acceptance depends on the mode
     * most); in each, for this cache type, then the other (whose costs differ less). f32's files also go
     * by the name they had before the type was in the key. */
    const char *const f32_first[] = {"f32", NULL, "f16"}, *const f16_first[] = {"f16", "f32", NULL};
    const char *const *names = kv == HS_TYPE_F32 ? f32_first : f16_first; /* NULL: the old name */
    for (int mode = sampling ? 1 : 0; mode >= 0 && !found; mode--)
        for (int k = 0; k < 3 && !found; k++) {
            HS_TRY(cache_path(&id, mode == 1, names[k], path, sizeof path));
            HS_TRY(try_load(path, kv, out, &found));
        }
    /* The defaults committed beside the head. */
    const char *slash = strrchr(head_path, '/');
    const int dir_len = slash ? (int)(slash - head_path) : 1;
    for (int mode = sampling ? 1 : 0; mode >= 0 && !found; mode--) {
        snprintf(path, sizeof path, "%.*s/heterospec-%s.json", dir_len, slash ? head_path : ".",
                 mode ? "sample" : "greedy");
        HS_TRY(try_load(path, kv, out, &found));
    }
    if (!found)
        snprintf(
            out->source, sizeof out->source,
            "built-in defaults (no calibration for this device, model and head: run heterospec calibrate)");
    else
        warn_other_model(out, id.model);
fail:
    return st;
}
