/* hs_cli — the subcommands of the heterospec CLI. Each takes argv with
 * argv[0] = the command name and returns the process exit code. */
#ifndef HS_CLI_H
#define HS_CLI_H

int hs_cli_devices(int argc, char **argv);
int hs_cli_generate(int argc, char **argv);
int hs_cli_bench(int argc, char **argv);
int hs_cli_info(int argc, char **argv);
int hs_cli_tokenize(int argc, char **argv);
int hs_cli_bench_ops(int argc, char **argv);
int hs_cli_logits(int argc, char **argv);

#endif
