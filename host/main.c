/* heterospec CLI entry point: dispatches to the subcommands in host/cli_*.c. */
#include <stdio.h>
#include <string.h>

#include "hs_cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: heterospec <command> [options]\n"
               "\n"
               "commands:\n"
               "  generate     generate text with a GGUF model (llama architecture)\n"
               "  bench        llama-bench style pp512 / tg128 of a model\n"
               "  devices      list Vulkan devices and their capabilities\n"
               "  tokenize     token ids of a text\n"
               "  info         show a GGUF file's header, metadata and tensors\n"
               "  bench-ops    per-op figures on the chosen device (table or --json)\n"
               "  bench-spec   speculative methods against plain decoding on question sets\n"
               "  calibrate    HeteroSpec's device cost model, strata and thresholds\n"
               "  ngram-build  HeteroSpec's n-gram store from sequences the target generated\n"
               "  logits       every position's logits of a prompt, in hs-oracle's HSLG file format\n"
               "\n"
               "Run `heterospec <command> --help` for the options of a command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "generate")) return hs_cli_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return hs_cli_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "devices")) return hs_cli_devices(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return hs_cli_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) return hs_cli_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench-ops")) return hs_cli_bench_ops(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench-spec")) return hs_cli_bench_spec(argc - 1, argv + 1);
    if (!strcmp(cmd, "logits")) return hs_cli_logits(argc - 1, argv + 1);
    if (!strcmp(cmd, "ngram-build")) return hs_cli_ngram_build(argc - 1, argv + 1);
    if (!strcmp(cmd, "calibrate")) return hs_cli_calibrate(argc - 1, argv + 1);
    fprintf(stderr, "heterospec: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
