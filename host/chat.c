/* chat — see chat.h. Detection and rendering follow llama.cpp's src/llama-chat.cpp
 * (llm_chat_detect_template, llm_chat_apply_template); the rendered text is built in an stb_ds char array
 * and handed back as a malloc'ed string. */
#include "chat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STBDS_NO_SHORT_NAMES
#include "stb_ds.h"

struct hs_chat {
    hs_chat_format fmt;
    char *default_system; /* malloc'ed, or NULL */
};

static const char *const g_format_names[HS_CHAT_FORMAT_COUNT] = {
    [HS_CHAT_CHATML] = "chatml",
    [HS_CHAT_LLAMA2] = "llama2",
    [HS_CHAT_LLAMA2_SYS] = "llama2-sys",
    [HS_CHAT_LLAMA2_SYS_BOS] = "llama2-sys-bos",
    [HS_CHAT_LLAMA2_SYS_STRIP] = "llama2-sys-strip",
    [HS_CHAT_GEMMA] = "gemma",
    [HS_CHAT_LLAMA3] = "llama3",
};

const char *hs_chat_format_name(hs_chat_format f) {
    return (unsigned)f < HS_CHAT_FORMAT_COUNT ? g_format_names[f] : "?";
}

/* ---- detection ---- */

static bool has(const char *t, const char *s) { return strstr(t, s) != NULL; }

/* Writes the first 60 characters (UTF-8 code points) of t into buf, escaping control characters and
 * quotes so that the error message stays on one line. */
static const char *excerpt(const char *t, char *buf, size_t cap) {
    size_t o = 0, chars = 0;
    const unsigned char *p = (const unsigned char *)t;
    for (; *p && o + 8 < cap; p++) {
        if ((*p & 0xC0) != 0x80 && chars++ == 60) break; /* a code point starts here */
        if (*p == '\n')
            o += (size_t)snprintf(buf + o, cap - o, "\\n");
        else if (*p == '"' || *p == '\\')
            o += (size_t)snprintf(buf + o, cap - o, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7F)
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02X", *p);
        else
            buf[o++] = (char)*p;
    }
    if (*p) o += (size_t)snprintf(buf + o, cap - o, "...");
    buf[o] = '\0';
    return buf;
}

/* Names the format llama.cpp would choose instead; returns -1 (not one of ours). */
static int other_format(const char **other, const char *name) {
    *other = name;
    return -1;
}

/* llama.cpp's choice among its Llama-2 and Mistral formats for a template containing "[INST]". Returns
 * the format, or -1 with *other naming the unsupported Mistral format. */
static int detect_inst(const char *t, const char **other) {
    if (has(t, "[SYSTEM_PROMPT]")) return other_format(other, "mistral-v7");
    if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]")) {
        return other_format(other, has(t, " [INST]")      ? "mistral-v1"
                                   : has(t, "\"[INST]\"") ? "mistral-v3-tekken"
                                                          : "mistral-v3");
    }
    if (has(t, "content.strip()")) return HS_CHAT_LLAMA2_SYS_STRIP;
    if (has(t, "bos_token + '[INST]")) return HS_CHAT_LLAMA2_SYS_BOS;
    if (has(t, "<<SYS>>")) return HS_CHAT_LLAMA2_SYS;
    return HS_CHAT_LLAMA2;
}

/* The format of t as llama.cpp's llm_chat_detect_template decides it, restricted to the formats rendered
 * here: -1 with *other set for a format llama.cpp would pick first, -1 with *other NULL for none. Only the
 * checks that come before llama3 in llama.cpp's order matter; later ones cannot shadow ours. */
static int detect_format(const char *t, const char **other) {
    *other = NULL;
    for (int f = 0; f < HS_CHAT_FORMAT_COUNT; f++)
        if (strcmp(t, g_format_names[f]) == 0) return f;
    /* llama.cpp's own names of the Mistral formats, which the "mistral" prefix rule below would take
     * for llama2 (llama.cpp looks names up first). */
    static const char *const mistral_names[] = {"mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7",
                                                "mistral-v7-tekken"};
    for (size_t i = 0; i < sizeof mistral_names / sizeof mistral_names[0]; i++)
        if (strcmp(t, mistral_names[i]) == 0) return other_format(other, mistral_names[i]);
    if (has(t, "<|im_start|>")) {
        if (has(t, "<|im_sep|>")) return other_format(other, "phi4");
        if (has(t, "<end_of_utterance>")) return other_format(other, "smolvlm");
        return HS_CHAT_CHATML;
    }
    if (strncmp(t, "mistral", 7) == 0 || has(t, "[INST]")) return detect_inst(t, other);
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return other_format(other, "phi3");
    if (has(t, "[gMASK]<sop>")) return other_format(other, "chatglm4");
    if (has(t, "<|assistant|>") && has(t, "<|user|>"))
        return other_format(other, has(t, "<|tool_declare|>") ? "exaone-moe"
                                   : has(t, "</s>")           ? "falcon3"
                                                              : "glmedge");
    if (has(t, "<|{{ item['role'] }}|>") && has(t, "<|begin_of_image|>"))
        return other_format(other, "glmedge");
    if (has(t, "<|user|>") && has(t, "<|endoftext|>")) return other_format(other, "zephyr");
    if (has(t, "bos_token + message['role']")) return other_format(other, "monarch");
    if (has(t, "<start_of_turn>")) return HS_CHAT_GEMMA;
    if (has(t, "'\\n\\nAssistant: ' + eos_token")) return other_format(other, "orion");
    if (has(t, "GPT4 Correct ")) return other_format(other, "openchat");
    if (has(t, "USER: ") && has(t, "ASSISTANT: ")) return other_format(other, "vicuna");
    if (has(t, "### Instruction:") && has(t, "<|EOT|>")) return other_format(other, "deepseek");
    if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>"))
        return other_format(other, "command-r");
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return HS_CHAT_LLAMA3;
    return -1;
}

hs_status hs_chat_detect(const char *tmpl, hs_chat_format *out) {
    if (!out) return HS_FAIL(HS_ERR_INVALID_ARG, "chat: out is NULL");
    if (!tmpl || !tmpl[0])
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "chat: the chat template is %s (does the model have a "
                       "tokenizer.chat_template?)",
                       tmpl ? "empty" : "NULL");
    const char *other;
    int f = detect_format(tmpl, &other);
    if (f >= 0) {
        *out = (hs_chat_format)f;
        return HS_OK;
    }
    char ex[512];
    if (other)
        return HS_FAIL(
            HS_ERR_UNSUPPORTED_TYPE,
            "chat: the chat template is llama.cpp's \"%s\" format, which heterospec does not render "
            "(supported: chatml, llama2, gemma, llama3); it starts \"%s\"",
            other, excerpt(tmpl, ex, sizeof ex));
    return HS_FAIL(HS_ERR_UNSUPPORTED_TYPE,
                   "chat: unknown chat template (supported: chatml <|im_start|>, llama2 [INST], gemma "
                   "<start_of_turn>, llama3 <|start_header_id|>); it starts \"%s\"",
                   excerpt(tmpl, ex, sizeof ex));
}

/* ---- ChatML default system prompt ---- */

/* Decodes the Jinja string literal body starting at b (quote character q) up to "<|im_end|>", which must
 * be followed by an optional newline and the closing quote. Returns a malloc'ed string, or NULL if b is
 * not such a literal (the quote closes early, an unknown escape, no <|im_end|>). */
static char *decode_system_literal(const char *b, char q) {
    static const char end_tag[] = "<|im_end|>";
    char *buf = malloc(strlen(b) + 1);
    if (!buf) return NULL;
    size_t o = 0;
    for (;;) {
        if (*b == '\0' || *b == q) goto reject;
        if (strncmp(b, end_tag, sizeof end_tag - 1) == 0) break;
        if (*b == '\\') {
            char e = b[1];
            if (e == 'n')
                buf[o++] = '\n';
            else if (e == 't')
                buf[o++] = '\t';
            else if (e == '\\' || e == '\'' || e == '"')
                buf[o++] = e;
            else
                goto reject;
            b += 2;
        } else {
            buf[o++] = *b++;
        }
    }
    b += sizeof end_tag - 1;
    if (*b == '\n')
        b++;
    else if (b[0] == '\\' && b[1] == 'n')
        b += 2;
    if (*b != q) goto reject;
    buf[o] = '\0';
    return buf;
reject:
    free(buf);
    return NULL;
}

/* Finds the default system prompt of a ChatML template (chat.h); *out = NULL when there is none. */
static hs_status chatml_default_system(const char *t, char **out) {
    static const char open_tag[] = "<|im_start|>system";
    *out = NULL;
    /* The literal is only a default if the template decides on the first message's role. */
    if (!has(t, "'system'") && !has(t, "\"system\"")) return HS_OK;
    for (const char *p = strstr(t, open_tag); p; p = strstr(p + 1, open_tag)) {
        if (p == t || (p[-1] != '\'' && p[-1] != '"')) continue;
        const char *b = p + sizeof open_tag - 1;
        if (*b == '\n')
            b++;
        else if (b[0] == '\\' && b[1] == 'n')
            b += 2;
        else
            continue;
        if (!strchr(b, p[-1])) continue;
        char *s = decode_system_literal(b, p[-1]);
        if (s) {
            *out = s;
            return HS_OK;
        }
    }
    return HS_OK;
}

/* ---- lifetime ---- */

hs_status hs_chat_create(const char *tmpl, hs_chat **out) {
    hs_status st = HS_OK;
    hs_chat *c = NULL;
    hs_chat_format f;
    if (!out) return HS_FAIL(HS_ERR_INVALID_ARG, "chat: out is NULL");
    *out = NULL;
    HS_TRY(hs_chat_detect(tmpl, &f));
    c = calloc(1, sizeof *c);
    if (!c) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "chat: out of memory");
        goto fail;
    }
    c->fmt = f;
    if (f == HS_CHAT_CHATML) HS_TRY(chatml_default_system(tmpl, &c->default_system));
    *out = c;
    return HS_OK;
fail:
    hs_chat_destroy(c);
    return st;
}

void hs_chat_destroy(hs_chat *c) {
    if (!c) return;
    free(c->default_system);
    free(c);
}

hs_chat_format hs_chat_get_format(const hs_chat *c) {
    HS_ASSERT(c);
    return c->fmt;
}

const char *hs_chat_default_system(const hs_chat *c) { return c ? c->default_system : NULL; }

hs_status hs_chat_set_default_system(hs_chat *c, const char *text) {
    if (!c) return HS_FAIL(HS_ERR_INVALID_ARG, "chat: hs_chat_set_default_system on a NULL chat");
    if (text && c->fmt != HS_CHAT_CHATML)
        return HS_FAIL(HS_ERR_UNSUPPORTED_TYPE,
                       "chat: a default system prompt is only supported for chatml, "
                       "not %s",
                       hs_chat_format_name(c->fmt));
    char *copy = NULL;
    if (text) {
        size_t n = strlen(text) + 1;
        copy = malloc(n);
        if (!copy) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "chat: out of memory");
        memcpy(copy, text, n);
    }
    free(c->default_system);
    c->default_system = copy;
    return HS_OK;
}

/* ---- rendering ---- */

typedef struct strbuf {
    char *a; /* stb_ds array */
} strbuf;

static void put_n(strbuf *b, const char *s, size_t n) {
    if (n) memcpy(stbds_arraddnptr(b->a, n), s, n);
}

static void put(strbuf *b, const char *s) { put_n(b, s, strlen(s)); }

static bool is_space(char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r'); } /* C isspace */

/* Appends s without leading and trailing white space (llama.cpp's trim). */
static void put_trimmed(strbuf *b, const char *s) {
    size_t n = strlen(s);
    while (n && is_space(*s))
        s++, n--;
    while (n && is_space(s[n - 1]))
        n--;
    put_n(b, s, n);
}

static bool role_is(const hs_chat_msg *m, const char *r) { return strcmp(m->role, r) == 0; }

/* Checks every message of the conversation for this format. */
static hs_status check_messages(hs_chat_format f, const hs_chat_msg *msgs, size_t n) {
    const bool fixed_roles = f != HS_CHAT_CHATML && f != HS_CHAT_LLAMA3;
    for (size_t i = 0; i < n; i++) {
        const hs_chat_msg *m = &msgs[i];
        if (!m->role || !m->content)
            return HS_FAIL(HS_ERR_INVALID_ARG, "chat: message %zu has a NULL %s", i,
                           m->role ? "content" : "role");
        if (!m->role[0]) return HS_FAIL(HS_ERR_INVALID_ARG, "chat: message %zu has an empty role", i);
        if (fixed_roles) {
            if (role_is(m, "system") || role_is(m, "user") || role_is(m, "assistant") ||
                (f == HS_CHAT_GEMMA && role_is(m, "model")))
                continue;
            return HS_FAIL(HS_ERR_INVALID_ARG,
                           "chat: message %zu has role \"%.40s\", which %s cannot express (system, user, "
                           "assistant%s)",
                           i, m->role, hs_chat_format_name(f), f == HS_CHAT_GEMMA ? ", model" : "");
        }
        for (const char *r = m->role; *r; r++) {
            char ch = *r;
            if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                ch == '_' || ch == '-')
                continue;
            return HS_FAIL(HS_ERR_INVALID_ARG,
                           "chat: message %zu has role \"%.40s\"; roles are letters, digits, '_' and '-'", i,
                           m->role);
        }
    }
    return HS_OK;
}

static void render_chatml(const hs_chat *c, strbuf *b, const hs_chat_msg *msgs, size_t n, bool gen) {
    if (n > 0 && c->default_system && !role_is(&msgs[0], "system")) {
        put(b, "<|im_start|>system\n");
        put(b, c->default_system);
        put(b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        put(b, "<|im_start|>");
        put(b, msgs[i].role);
        put(b, "\n");
        put(b, msgs[i].content);
        put(b, "<|im_end|>\n");
    }
    if (gen) put(b, "<|im_start|>assistant\n");
}

/* llama.cpp's Llama-2 family: the first "[INST] " is written up front (the BOS is the tokenizer's). */
static void render_llama2(hs_chat_format f, strbuf *b, const hs_chat_msg *msgs, size_t n) {
    const bool sys_block = f != HS_CHAT_LLAMA2;
    const bool bos_inside = f == HS_CHAT_LLAMA2_SYS_BOS;
    const bool strip = f == HS_CHAT_LLAMA2_SYS_STRIP;
    bool inside_turn = true;
    put(b, "[INST] ");
    for (size_t i = 0; i < n; i++) {
        const hs_chat_msg *m = &msgs[i];
        if (!inside_turn) {
            inside_turn = true;
            put(b, bos_inside ? "<s>[INST] " : "[INST] ");
        }
        const bool sys = role_is(m, "system");
        if (sys && sys_block) put(b, "<<SYS>>\n");
        if (strip)
            put_trimmed(b, m->content);
        else
            put(b, m->content);
        if (sys) {
            put(b, sys_block ? "\n<</SYS>>\n\n" : "\n");
        } else if (role_is(m, "user")) {
            put(b, " [/INST]");
        } else {
            put(b, "</s>");
            inside_turn = false;
        }
    }
}

/* llama.cpp's Gemma: no system role, so system text is held and merged into the next user turn. */
static void render_gemma(strbuf *b, const hs_chat_msg *msgs, size_t n, bool gen) {
    strbuf sys = {NULL};
    for (size_t i = 0; i < n; i++) {
        const hs_chat_msg *m = &msgs[i];
        if (role_is(m, "system")) {
            put_trimmed(&sys, m->content);
            continue;
        }
        const bool model = role_is(m, "assistant") || role_is(m, "model");
        put(b, model ? "<start_of_turn>model\n" : "<start_of_turn>user\n");
        if (stbds_arrlen(sys.a) > 0 && !model) {
            put_n(b, sys.a, (size_t)stbds_arrlen(sys.a));
            put(b, "\n\n");
            stbds_arrfree(sys.a);
        }
        put_trimmed(b, m->content);
        put(b, "<end_of_turn>\n");
    }
    stbds_arrfree(sys.a);
    if (gen) put(b, "<start_of_turn>model\n");
}

static void render_llama3(strbuf *b, const hs_chat_msg *msgs, size_t n, bool gen) {
    for (size_t i = 0; i < n; i++) {
        put(b, "<|start_header_id|>");
        put(b, msgs[i].role);
        put(b, "<|end_header_id|>\n\n");
        put_trimmed(b, msgs[i].content);
        put(b, "<|eot_id|>");
    }
    if (gen) put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

hs_status hs_chat_render(const hs_chat *c, const hs_chat_msg *msgs, size_t n, bool add_generation_prompt,
                         char **out) {
    hs_status st = HS_OK;
    strbuf b = {NULL};
    if (!out) return HS_FAIL(HS_ERR_INVALID_ARG, "chat: out is NULL");
    *out = NULL;
    if (!c) return HS_FAIL(HS_ERR_INVALID_ARG, "chat: render with a NULL chat");
    if (n > 0 && !msgs) return HS_FAIL(HS_ERR_INVALID_ARG, "chat: %zu messages but the array is NULL", n);
    HS_TRY(check_messages(c->fmt, msgs, n));
    switch (c->fmt) {
    case HS_CHAT_CHATML: render_chatml(c, &b, msgs, n, add_generation_prompt); break;
    case HS_CHAT_LLAMA2:
    case HS_CHAT_LLAMA2_SYS:
    case HS_CHAT_LLAMA2_SYS_BOS:
    case HS_CHAT_LLAMA2_SYS_STRIP: render_llama2(c->fmt, &b, msgs, n); break;
    case HS_CHAT_GEMMA: render_gemma(&b, msgs, n, add_generation_prompt); break;
    case HS_CHAT_LLAMA3: render_llama3(&b, msgs, n, add_generation_prompt); break;
    default: HS_ASSERT(!"unknown chat format");
    }
    size_t len = (size_t)stbds_arrlen(b.a);
    char *s = malloc(len + 1);
    if (!s) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "chat: out of memory for a %zu-byte prompt", len);
        goto fail;
    }
    if (len) memcpy(s, b.a, len);
    s[len] = '\0';
    *out = s;
fail:
    stbds_arrfree(b.a);
    return st;
}
