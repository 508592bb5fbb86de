/* chat — turns a list of {role, content} messages into the prompt text a chat model was trained on.
 *
 * The format is chosen from the GGUF's `tokenizer.chat_template` (a Jinja template that heterospec does
 * not execute) by distinctive substrings, in the order of llama.cpp's llm_chat_detect_template
 * (src/llama-chat.cpp), and rendered the way llama.cpp's llm_chat_apply_template renders it:
 *
 *   chatml             "<|im_start|>"            <|im_start|>{role}\n{content}<|im_end|>\n ...
 *                                                 + "<|im_start|>assistant\n" as generation prompt
 *   llama2             "[INST]" (four variants)   [INST] {system}\n{user} [/INST]{assistant}</s>[INST] ...
 *     llama2-sys         + "<<SYS>>"              system as "<<SYS>>\n{system}\n<</SYS>>\n\n"
 *     llama2-sys-bos     + "bos_token + '[INST]"  later turns open with "<s>[INST] "
 *     llama2-sys-strip   + "content.strip()"      contents trimmed
 *   gemma              "<start_of_turn>"         <start_of_turn>{user|model}\n{trimmed}<end_of_turn>\n ...
 *                                                 system merged into the next user turn ("{system}\n\n")
 *                                                 + "<start_of_turn>model\n"
 *   llama3             "<|start_header_id|>" and "<|end_header_id|>"
 *                                                 <|start_header_id|>{role}<|end_header_id|>\n\n{trimmed}<|eot_id|>
 *                                                 + "<|start_header_id|>assistant<|end_header_id|>\n\n"
 *
 * The format names themselves ("chatml", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip",
 * "gemma", "llama3") are accepted as templates too, as in llama.cpp. Templates that llama.cpp would take
 * for another format that precedes these in its detection order (phi4, smolvlm, mistral-v1/v3/v7, phi3,
 * chatglm4, falcon3, glmedge, zephyr, monarch, orion, openchat, vicuna, deepseek, command-r) and templates
 * nobody recognises fail with HS_ERR_UNSUPPORTED_TYPE and a message that quotes the first 60 characters
 * of the template. A template that is NULL or empty fails with HS_ERR_INVALID_ARG.
 *
 * Like llama.cpp the rendered text holds no BOS token (the tokenizer adds it per the GGUF's add_bos), and
 * llama2 ignores add_generation_prompt (its prompt for the reply is the " [/INST]" closing the user turn).
 *
 * Default system prompt (ChatML only): a ChatML template that writes a fixed system turn when the first
 * message is not a system message, such as SmolLM2-Instruct's
 *   {% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI
 *   assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}
 * or Qwen2.5's, has that text extracted (a quoted literal '<|im_start|>system\n...<|im_end|>' in a template
 * that tests a role against 'system'; \n, \t, \\, \' and \" escapes are decoded). Rendering then inserts
 * "<|im_start|>system\n{default}<|im_end|>\n" before the first message when that message is not a system
 * message, exactly as the template does (llama.cpp's non-Jinja renderer omits it). No messages render no
 * system turn, as the template's loop does not run. hs_chat_set_default_system replaces or disables it.
 *
 * Roles: chatml and llama3 accept any role made of letters, digits, '_' and '-' ("tool", "ipython", ...);
 * llama2 and gemma accept "system", "user" and "assistant" (gemma also "model"). A NULL role or content, an
 * empty or malformed role gives HS_ERR_INVALID_ARG naming the message index.
 *
 * Usage:
 *   const char *tmpl;  HS_TRY(hs_gguf_get_str(g, "tokenizer.chat_template", &tmpl));
 *   hs_chat *chat;     HS_TRY(hs_chat_create(tmpl, &chat));
 *   hs_chat_msg msgs[] = {{"user", "Hello"}};
 *   char *prompt;      HS_TRY(hs_chat_render(chat, msgs, 1, true, &prompt));
 *   ... free(prompt); hs_chat_destroy(chat);
 *
 * Ownership: hs_chat_create copies what it needs from the template; the caller keeps the template.
 * hs_chat_render returns a malloc'ed, NUL-terminated string the caller frees with free().
 * hs_chat_destroy accepts NULL. hs_chat_default_system's string is owned by the hs_chat.
 *
 * Thread-safety: a created hs_chat is read-only during rendering; any number of threads may render with
 * it at once. hs_chat_set_default_system must not run concurrently with anything else on the same hs_chat.
 */
#ifndef HS_CHAT_H
#define HS_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "hs_status.h"

typedef enum hs_chat_format {
    HS_CHAT_CHATML = 0,
    HS_CHAT_LLAMA2,           /* system folded into the first turn, without <<SYS>> */
    HS_CHAT_LLAMA2_SYS,       /* system in a <<SYS>> block */
    HS_CHAT_LLAMA2_SYS_BOS,   /* ... and "<s>" before every later "[INST]" */
    HS_CHAT_LLAMA2_SYS_STRIP, /* ... and contents trimmed of surrounding white space */
    HS_CHAT_GEMMA,
    HS_CHAT_LLAMA3,
    HS_CHAT_FORMAT_COUNT,
} hs_chat_format;

typedef struct hs_chat_msg {
    const char *role;    /* "system", "user", "assistant", ... */
    const char *content; /* UTF-8 text, inserted verbatim (or trimmed where the format says so) */
} hs_chat_msg;

typedef struct hs_chat hs_chat;

/* llama.cpp's name of a format ("chatml", "llama2-sys", "gemma", ...; "?" if out of range). */
const char *hs_chat_format_name(hs_chat_format f);

/* Recognises the format of a template (or format name) without creating anything. */
hs_status hs_chat_detect(const char *tmpl, hs_chat_format *out);

hs_status hs_chat_create(const char *tmpl, hs_chat **out);
void hs_chat_destroy(hs_chat *c);

hs_chat_format hs_chat_get_format(const hs_chat *c);

/* The system prompt inserted when the conversation does not start with one (ChatML only), or NULL. */
const char *hs_chat_default_system(const hs_chat *c);

/* Replaces the default system prompt (copied), or removes it with NULL. HS_ERR_UNSUPPORTED_TYPE for a
 * non-NULL text on a format other than ChatML. */
hs_status hs_chat_set_default_system(hs_chat *c, const char *text);

/* Renders n messages (n may be 0) into *out; with add_generation_prompt the text ends with the opening of
 * an assistant turn. */
hs_status hs_chat_render(const hs_chat *c, const hs_chat_msg *msgs, size_t n, bool add_generation_prompt,
                         char **out);

#endif
