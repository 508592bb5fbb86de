/* hs_cli — the subcommands of the heterospec CLI. Each takes argv with
 * argv[0] = the command name and returns the process exit code. */
#ifndef HS_CLI_H
#define HS_CLI_H

#include <stddef.h>

#include "hs_status.h"

/* The default model, relative to the cache folder ($HS_HOME). */
#define HS_CLI_DEFAULT_MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

/* buf = given, or the default model in the cache folder when given is NULL. */
hs_status hs_cli_model_path(const char *given, char *buf, size_t n);
/* The whole file at path as a NUL-terminated string (*out, malloc'ed). */
hs_status hs_cli_read_text(const char *path, char **out);

int hs_cli_devices(int argc, char **argv);
int hs_cli_generate(int argc, char **argv);
int hs_cli_bench(int argc, char **argv);
int hs_cli_info(int argc, char **argv);
int hs_cli_tokenize(int argc, char **argv);
int hs_cli_bench_ops(int argc, char **argv);
int hs_cli_logits(int argc, char **argv);

#endif
