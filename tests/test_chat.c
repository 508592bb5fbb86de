/* Tests of host/chat: format detection from chat templates, rendering of 1-3 turn conversations in every
 * format, llama.cpp's own six-message test conversation, the ChatML default system prompt of
 * SmolLM2-Instruct, and the errors (unknown or unsupported template, bad messages).
 *
 * Where expected strings come from:
 * - "rule:" strings are written out by hand from the published template text quoted next to them (each
 *   Jinja template is unrolled for the given messages).
 * - "llama.cpp:" strings are the expected_output values of llama.cpp's tests/test-chat-template.cpp for
 *   the same template and conversation (its legacy, non-Jinja renderer, which this module follows).
 * - SmolLM2-135M-Instruct's template is the tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf
 *   (read with the Python gguf package; it is the chat_template of the model's tokenizer_config.json).
 *   When the model is in $HS_HOME/models, test_smollm2_gguf checks the copy below against the file.
 * Templates from llama.cpp's models/templates/ are read when its source is present ($HS_LLAMA_SRC,
 * $HS_HOME/src/llama.cpp or ~/.cache/heterospec/src/llama.cpp); those tests skip otherwise.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chat.h"
#include "gguf.h"
#include "hs_cli.h"

/* ---- templates ---- */

/* SmolLM2-Instruct (HuggingFaceTB/SmolLM2-135M-Instruct tokenizer_config.json; "\n" are real newlines). */
static const char k_smollm2[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
static const char k_smollm2_system[] = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/* The templates of llama.cpp's tests/test-chat-template.cpp (escaped "\\n" kept as there). */
static const char k_openhermes[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' "
    "+ '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
static const char k_mistral_v02[] =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) "
    "%}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif "
    "message['role'] "
    "== 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and "
    "assistant "
    "roles are supported!') }}{% endif %}{% endfor %}";
static const char k_fusionnet[] =
    "{%- for idx in range(0, messages|length) -%}\n{%- if messages[idx]['role'] == 'user' -%}\n{%- if idx > "
    "1 -%}\n"
    "{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' -}}\n{%- else -%}\n{{- "
    "messages[idx]['content'] + ' [/INST]' -}}\n{%- endif -%}\n{% elif messages[idx]['role'] == 'system' "
    "%}\n{{- "
    "'[INST] <<SYS>>\\n' + messages[idx]['content'] + '\\n<</SYS>>\\n\\n' -}}\n{%- elif "
    "messages[idx]['role'] == "
    "'assistant' -%}\n{{- ' '  + messages[idx]['content'] + ' ' + eos_token -}}\n{% endif %}\n{% endfor %}";
static const char k_vigogne[] =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
    "system_message = messages[0]['content'] %}{% elif true == true and not '<<SYS>>' in "
    "messages[0]['content'] "
    "%}{% set loop_messages = messages %}{% set system_message = 'Vous \xc3\xaates Vigogne, un assistant IA "
    "cr\xc3\xa9\xc3\xa9 par Zaion Lab. Vous suivez extr\xc3\xaamement bien les instructions. Aidez autant "
    "que vous le "
    "pouvez.' %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% "
    "for "
    "message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% "
    "if "
    "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif "
    "%}{% if "
    "message['role'] == 'user' %}{{ '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == "
    "'system' %}{{ '<<SYS>>\\n' + content.strip() + '\\n<</SYS>>\\n\\n' }}{% elif message['role'] == "
    "'assistant' "
    "%}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
static const char k_gemma[] =
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% "
    "for "
    "message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% "
    "if "
    "(message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% "
    "endif "
    "%}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% "
    "if "
    "add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";
static const char k_llama3[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 "
    "== 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}";

/* ---- helpers ---- */

static char *render(const char *tmpl, const hs_chat_msg *msgs, size_t n, bool gen) {
    hs_chat *c = NULL;
    char *out = NULL;
    HS_CHECK(hs_chat_create(tmpl, &c));
    HS_CHECK(hs_chat_render(c, msgs, n, gen, &out));
    hs_chat_destroy(c);
    return out;
}

static void expect_render(const char *tmpl, const hs_chat_msg *msgs, size_t n, bool gen, const char *want) {
    char *got = render(tmpl, msgs, n, gen);
    if (strcmp(got, want) != 0) fail_msg("rendered\n[%s]\nwant\n[%s]", got, want);
    free(got);
}

static void expect_format(const char *tmpl, hs_chat_format want) {
    hs_chat_format f = HS_CHAT_FORMAT_COUNT;
    HS_CHECK(hs_chat_detect(tmpl, &f));
    if (f != want) fail_msg("detected %s, want %s", hs_chat_format_name(f), hs_chat_format_name(want));
}

/* llama.cpp's test conversation (tests/test-chat-template.cpp, main_automated_tests). */
static const hs_chat_msg k_conv[] = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};

/* ---- detection ---- */

static void test_detect(void **state) {
    (void)state;
    expect_format(k_smollm2, HS_CHAT_CHATML);
    expect_format(k_openhermes, HS_CHAT_CHATML);
    expect_format(k_mistral_v02, HS_CHAT_LLAMA2);
    expect_format(k_fusionnet, HS_CHAT_LLAMA2_SYS_BOS);
    expect_format(k_vigogne, HS_CHAT_LLAMA2_SYS_STRIP);
    expect_format("[INST] <<SYS>>", HS_CHAT_LLAMA2_SYS);
    expect_format(k_gemma, HS_CHAT_GEMMA);
    expect_format(k_llama3, HS_CHAT_LLAMA3);
    /* Format names are accepted as templates, as in llama.cpp. */
    for (int f = 0; f < HS_CHAT_FORMAT_COUNT; f++)
        expect_format(hs_chat_format_name((hs_chat_format)f), f);
    assert_string_equal(hs_chat_format_name(HS_CHAT_FORMAT_COUNT), "?");
}

/* ---- SmolLM2 (ChatML with a default system prompt) ---- */

static void test_smollm2(void **state) {
    (void)state;
    hs_chat *c = NULL;
    HS_CHECK(hs_chat_create(k_smollm2, &c));
    assert_int_equal(hs_chat_get_format(c), HS_CHAT_CHATML);
    assert_non_null(hs_chat_default_system(c));
    assert_string_equal(hs_chat_default_system(c), k_smollm2_system);
    hs_chat_destroy(c);

    /* rule: one user turn; messages[0] is not system, so the template writes its system literal first. */
    const hs_chat_msg one[] = {{"user", "Hello"}};
    expect_render(k_smollm2, one, 1, true,
                  "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                  "<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
    /* rule: a system message replaces the default. */
    const hs_chat_msg two[] = {{"system", "Be brief."}, {"user", "What is 2+2?"}};
    expect_render(k_smollm2, two, 2, true,
                  "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                  "<|im_start|>assistant\n");
    /* rule: three turns without the generation prompt; contents are not trimmed. */
    const hs_chat_msg three[] = {{"user", "Hi"}, {"assistant", " Hello! "}, {"user", "Bye\n"}};
    expect_render(k_smollm2, three, 3, false,
                  "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                  "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n Hello! <|im_end|>\n"
                  "<|im_start|>user\nBye\n<|im_end|>\n");
    /* rule: no messages, the loop does not run: only the generation prompt. */
    expect_render(k_smollm2, NULL, 0, true, "<|im_start|>assistant\n");
    expect_render(k_smollm2, NULL, 0, false, "");

    /* The default can be replaced or removed. */
    HS_CHECK(hs_chat_create(k_smollm2, &c));
    HS_CHECK(hs_chat_set_default_system(c, "Custom."));
    char *out = NULL;
    HS_CHECK(hs_chat_render(c, one, 1, true, &out));
    assert_string_equal(out, "<|im_start|>system\nCustom.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                             "<|im_start|>assistant\n");
    free(out);
    HS_CHECK(hs_chat_set_default_system(c, NULL));
    assert_null(hs_chat_default_system(c));
    HS_CHECK(hs_chat_render(c, one, 1, true, &out));
    assert_string_equal(out, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
    free(out);
    hs_chat_destroy(c);
}

/* The default system literal is found with Jinja-escaped newlines too (Qwen2.5's style), and a template
 * that only ever copies the caller's system message has no default. */
static void test_chatml_default_system_forms(void **state) {
    (void)state;
    /* Abridged from Qwen2.5-Instruct's template: two system openings that are expressions, then the
     * literal default in the else branch. */
    const char qwen[] =
        "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + "
        "messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are "
        "Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}";
    hs_chat *c = NULL;
    HS_CHECK(hs_chat_create(qwen, &c));
    assert_string_equal(hs_chat_default_system(c),
                        "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    hs_chat_destroy(c);
    /* Escapes inside the literal are decoded: \' and \\n. */
    const char esc[] = "{% if messages[0]['role'] != \"system\" %}{{ \"<|im_start|>system\\nIt\\'s a\\nbot"
                       "<|im_end|>\\n\" }}{% endif %}<|im_start|>";
    HS_CHECK(hs_chat_create(esc, &c));
    assert_string_equal(hs_chat_default_system(c), "It's a\nbot");
    hs_chat_destroy(c);
    /* No literal default: only the copying expression. */
    const char copy_only[] = "{% if messages[0]['role'] == 'system' %}{{ '<|im_start|>system\\n' + "
                             "messages[0]['content'] + '<|im_end|>\\n' }}{% endif %}";
    HS_CHECK(hs_chat_create(copy_only, &c));
    assert_null(hs_chat_default_system(c));
    hs_chat_destroy(c);
    /* A system literal in a template that never looks at roles is not a default. */
    HS_CHECK(hs_chat_create("{{ '<|im_start|>system\nX<|im_end|>\n' }}", &c));
    assert_null(hs_chat_default_system(c));
    hs_chat_destroy(c);
    /* llama.cpp's OpenHermes ChatML template has none either. */
    HS_CHECK(hs_chat_create(k_openhermes, &c));
    assert_null(hs_chat_default_system(c));
    hs_chat_destroy(c);
}

/* ---- llama.cpp's expected outputs ---- */

static void test_llamacpp_conversation(void **state) {
    (void)state;
    const size_t n = sizeof k_conv / sizeof k_conv[0];
    /* llama.cpp: teknium/OpenHermes-2.5-Mistral-7B */
    expect_render(
        k_openhermes, k_conv, n, true,
        "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
        "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
        "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother "
        "question<|im_end|>\n<|im_start|>assistant\n");
    /* llama.cpp: mistralai/Mistral-7B-Instruct-v0.2 (old pre-v1 without a system prompt) */
    expect_render(
        k_mistral_v02, k_conv, n, true,
        "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am "
        "an assistant   </s>[INST] Another question [/INST]");
    /* llama.cpp: TheBloke/FusionNet_34Bx2_MoE-AWQ */
    expect_render(
        k_fusionnet, k_conv, n, true,
        "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who "
        "are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]");
    /* llama.cpp: bofenghuang/vigogne-2-70b-chat */
    expect_render(
        k_vigogne, k_conv, n, true,
        "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who "
        "are you [/INST]I am an assistant</s>[INST] Another question [/INST]");
    /* llama.cpp: google/gemma-7b-it */
    expect_render(
        k_gemma, k_conv, n, true,
        "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\n"
        "Hi there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI "
        "am an assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n"
        "<start_of_turn>model\n");
    /* llama.cpp: Llama-3 */
    expect_render(
        k_llama3, k_conv, n, true,
        "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_"
        "header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_"
        "id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|"
        "start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>"
        "user<|end_header_id|>\n\nAnother question<|eot_id|><|start_header_id|>assistant<|end_header_"
        "id|>\n\n");
}

/* ---- short conversations in each format ---- */

static void test_short_conversations(void **state) {
    (void)state;
    const hs_chat_msg u1[] = {{"user", " Hi "}};
    const hs_chat_msg su[] = {{"system", "Sys"}, {"user", "Q"}};
    const hs_chat_msg uau[] = {{"user", "Q1"}, {"assistant", "A1"}, {"user", "Q2"}};

    /* rule (k_gemma): '<start_of_turn>' + role + '\n' + content | trim + '<end_of_turn>\n', 'assistant' ->
     * 'model', '<start_of_turn>model\n' when add_generation_prompt; a system turn (which the template
     * rejects) is merged into the next user turn followed by "\n\n" (llama.cpp). */
    expect_render(k_gemma, u1, 1, true, "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
    expect_render(k_gemma, u1, 1, false, "<start_of_turn>user\nHi<end_of_turn>\n");
    expect_render(k_gemma, su, 2, true, "<start_of_turn>user\nSys\n\nQ<end_of_turn>\n<start_of_turn>model\n");
    expect_render(k_gemma, uau, 3, true,
                  "<start_of_turn>user\nQ1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n"
                  "<start_of_turn>user\nQ2<end_of_turn>\n<start_of_turn>model\n");

    /* rule (k_llama3): '<|start_header_id|>' + role + '<|end_header_id|>\n\n' + content | trim +
     * '<|eot_id|>' per message, then the assistant header (this template writes it unconditionally;
     * add_generation_prompt = false leaves it out). bos_token is the tokenizer's. */
    expect_render(k_llama3, u1, 1, true,
                  "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant"
                  "<|end_header_id|>\n\n");
    expect_render(k_llama3, su, 2, false,
                  "<|start_header_id|>system<|end_header_id|>\n\nSys<|eot_id|><|start_header_id|>user"
                  "<|end_header_id|>\n\nQ<|eot_id|>");
    expect_render(
        k_llama3, uau, 3, false,
        "<|start_header_id|>user<|end_header_id|>\n\nQ1<|eot_id|><|start_header_id|>assistant"
        "<|end_header_id|>\n\nA1<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ2<|eot_id|>");

    /* rule (k_mistral_v02): '[INST] ' + content + ' [/INST]' per user, content + eos_token per assistant;
     * a system message (which the template rejects) goes before the first user text with "\n". */
    expect_render(k_mistral_v02, u1, 1, true, "[INST]  Hi  [/INST]");
    expect_render(k_mistral_v02, su, 2, true, "[INST] Sys\nQ [/INST]");
    expect_render(k_mistral_v02, uau, 3, false, "[INST] Q1 [/INST]A1</s>[INST] Q2 [/INST]");
    /* rule (llama2-sys, the <<SYS>> block of Llama-2-chat): "[INST] <<SYS>>\n{sys}\n<</SYS>>\n\n{user}
     * [/INST]". */
    expect_render("llama2-sys", su, 2, true, "[INST] <<SYS>>\nSys\n<</SYS>>\n\nQ [/INST]");
    /* rule (k_fusionnet): bos_token + '[INST] ' before every user turn after the first. */
    expect_render(k_fusionnet, uau, 3, true, "[INST] Q1 [/INST]A1</s><s>[INST] Q2 [/INST]");
    /* rule (k_vigogne): content.strip() everywhere. */
    expect_render(k_vigogne, u1, 1, true, "[INST] Hi [/INST]");

    /* rule (chatml): any role name is written as is. */
    const hs_chat_msg tool[] = {{"tool", "42"}};
    expect_render("chatml", tool, 1, false, "<|im_start|>tool\n42<|im_end|>\n");
}

/* Real templates from llama.cpp's models/templates, when its source is present. */
static const char *llama_src(void) {
    static char buf[4096];
    struct stat sb;
    const char *e = getenv("HS_LLAMA_SRC");
    if (e && stat(e, &sb) == 0) return e;
    const char *roots[2] = {getenv("HS_HOME"), getenv("HOME")};
    const char *fmt[2] = {"%s/src/llama.cpp", "%s/.cache/heterospec/src/llama.cpp"};
    for (int i = 0; i < 2; i++) {
        if (!roots[i]) continue;
        snprintf(buf, sizeof buf, fmt[i], roots[i]);
        if (stat(buf, &sb) == 0 && S_ISDIR(sb.st_mode)) return buf;
    }
    return NULL;
}

static void test_llamacpp_template_files(void **state) {
    (void)state;
    const char *src = llama_src();
    if (!src) {
        print_message("llama.cpp source not found; skipping\n");
        skip();
    }
    static const struct {
        const char *file;
        int format;         /* hs_chat_format, or -1: unsupported */
        const char *needle; /* in the error message, or the default system prompt for chatml */
    } cases[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", HS_CHAT_CHATML,
         "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
        {"Qwen-Qwen3-0.6B.jinja", HS_CHAT_CHATML, NULL},
        {"google-gemma-2-2b-it.jinja", HS_CHAT_GEMMA, NULL},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", HS_CHAT_LLAMA3, NULL},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", HS_CHAT_LLAMA3, NULL},
        {"microsoft-Phi-3.5-mini-instruct.jinja", -1, "phi3"},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", -1, "mistral"},
    };
    int seen = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/models/templates/%s", src, cases[i].file);
        char *t = NULL;
        if (hs_cli_read_text(path, &t) != HS_OK) continue; /* a file this llama.cpp version lacks */
        seen++;
        hs_chat *c = NULL;
        hs_status st = hs_chat_create(t, &c);
        if (cases[i].format < 0) {
            assert_int_equal(st, HS_ERR_UNSUPPORTED_TYPE);
            if (!strstr(hs_last_error(), cases[i].needle))
                fail_msg("%s: \"%s\" lacks \"%s\"", cases[i].file, hs_last_error(), cases[i].needle);
        } else {
            if (st != HS_OK) fail_msg("%s: %s", cases[i].file, hs_last_error());
            assert_int_equal(hs_chat_get_format(c), cases[i].format);
            if (cases[i].format == HS_CHAT_CHATML && cases[i].needle)
                assert_string_equal(hs_chat_default_system(c), cases[i].needle);
        }
        hs_chat_destroy(c);
        free(t);
    }
    print_message("%d template files checked\n", seen);
    assert_true(seen > 0);
}

/* The real model's tokenizer.chat_template (tools/fetch_model.sh; see
 * hs_test_model_path) must be the copy above. */
static void test_smollm2_gguf(void **state) {
    (void)state;
    char path[4096];
    if (!hs_test_model_path("SmolLM2-135M-Instruct.Q4_1.gguf", path, sizeof path)) {
        print_message("SmolLM2-135M-Instruct.Q4_1.gguf not found (tools/fetch_model.sh); skipping\n");
        skip();
    }
    hs_gguf *g = NULL;
    const char *tmpl = NULL;
    HS_CHECK(hs_gguf_open(path, &g));
    HS_CHECK(hs_gguf_get_str(g, "tokenizer.chat_template", &tmpl));
    assert_string_equal(tmpl, k_smollm2);
    hs_chat *c = NULL;
    HS_CHECK(hs_chat_create(tmpl, &c));
    assert_int_equal(hs_chat_get_format(c), HS_CHAT_CHATML);
    assert_string_equal(hs_chat_default_system(c), k_smollm2_system);
    hs_chat_destroy(c);
    hs_gguf_close(g);
}

/* ---- errors ---- */

static void test_unknown_template(void **state) {
    (void)state;
    /* 90 characters of a template no rule knows; the message quotes the first 60 and marks the cut. */
    const char unk[] = "{% for message in messages %}{{ message['role'] + ': ' + message['content'] + eos }}"
                       "{% endfor %}";
    hs_chat *c = (hs_chat *)(uintptr_t)1;
    assert_int_equal(hs_chat_create(unk, &c), HS_ERR_UNSUPPORTED_TYPE);
    assert_null(c);
    char first60[61];
    memcpy(first60, unk, 60);
    first60[60] = '\0';
    char want[80];
    snprintf(want, sizeof want, "\"%s...\"", first60);
    if (!strstr(hs_last_error(), want)) fail_msg("message \"%s\" lacks %s", hs_last_error(), want);
    assert_non_null(strstr(hs_last_error(), "unknown chat template"));
    /* Newlines are escaped; multi-byte characters count once. */
    const char nl[] = "line one\nline two \xc3\xa9\xc3\xa9";
    assert_int_equal(hs_chat_create(nl, &c), HS_ERR_UNSUPPORTED_TYPE);
    assert_non_null(strstr(hs_last_error(), "\"line one\\nline two \xc3\xa9\xc3\xa9\""));
    /* Formats llama.cpp would pick before ours are named. */
    assert_int_equal(hs_chat_create("<|im_start|>user<|im_sep|>", &c), HS_ERR_UNSUPPORTED_TYPE);
    assert_non_null(strstr(hs_last_error(), "\"phi4\""));
    assert_int_equal(hs_chat_create("[SYSTEM_PROMPT] [INST]", &c), HS_ERR_UNSUPPORTED_TYPE);
    assert_non_null(strstr(hs_last_error(), "\"mistral-v7\""));
    assert_int_equal(hs_chat_create("mistral-v3-tekken", &c), HS_ERR_UNSUPPORTED_TYPE);
    assert_non_null(strstr(hs_last_error(), "\"mistral-v3-tekken\""));
    assert_int_equal(hs_chat_create("<|user|><|endoftext|><start_of_turn>", &c), HS_ERR_UNSUPPORTED_TYPE);
    assert_non_null(strstr(hs_last_error(), "\"zephyr\""));
    /* Empty or missing template. */
    assert_int_equal(hs_chat_create("", &c), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "empty"));
    assert_int_equal(hs_chat_create(NULL, &c), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_chat_create("chatml", NULL), HS_ERR_INVALID_ARG);
    hs_chat_destroy(NULL);
}

static void expect_bad(const char *tmpl, const hs_chat_msg *msgs, size_t n, const char *needle) {
    hs_chat *c = NULL;
    char *out = (char *)(uintptr_t)1;
    HS_CHECK(hs_chat_create(tmpl, &c));
    assert_int_equal(hs_chat_render(c, msgs, n, true, &out), HS_ERR_INVALID_ARG);
    assert_null(out);
    if (!strstr(hs_last_error(), needle)) fail_msg("message \"%s\" lacks \"%s\"", hs_last_error(), needle);
    hs_chat_destroy(c);
}

static void test_bad_messages(void **state) {
    (void)state;
    const hs_chat_msg null_role[] = {{"user", "a"}, {NULL, "b"}};
    expect_bad("chatml", null_role, 2, "message 1 has a NULL role");
    const hs_chat_msg null_content[] = {{"user", NULL}};
    expect_bad("llama3", null_content, 1, "message 0 has a NULL content");
    const hs_chat_msg empty_role[] = {{"", "x"}};
    expect_bad("chatml", empty_role, 1, "empty role");
    const hs_chat_msg injected[] = {{"user<|im_end|>", "x"}};
    expect_bad("chatml", injected, 1, "letters, digits");
    const hs_chat_msg tool[] = {{"tool", "x"}};
    expect_bad("gemma", tool, 1, "gemma cannot express");
    expect_bad("llama2", tool, 1, "llama2 cannot express");
    expect_bad("chatml", NULL, 2, "array is NULL");

    hs_chat *c = NULL;
    HS_CHECK(hs_chat_create("gemma", &c));
    assert_int_equal(hs_chat_set_default_system(c, "x"), HS_ERR_UNSUPPORTED_TYPE);
    HS_CHECK(hs_chat_set_default_system(c, NULL));
    assert_int_equal(hs_chat_render(c, tool, 1, true, NULL), HS_ERR_INVALID_ARG);
    hs_chat_destroy(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_smollm2),
        cmocka_unit_test(test_chatml_default_system_forms),
        cmocka_unit_test(test_llamacpp_conversation),
        cmocka_unit_test(test_short_conversations),
        cmocka_unit_test(test_llamacpp_template_files),
        cmocka_unit_test(test_smollm2_gguf),
        cmocka_unit_test(test_unknown_template),
        cmocka_unit_test(test_bad_messages),
    };
    return hs_test_run_group("chat", tests, NULL, NULL);
}
