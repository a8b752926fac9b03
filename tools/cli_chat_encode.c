/* `deepinfer chat-encode`: a chat (JSON messages) → DeepSeek V4/V4.1 prompt text or ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "io/json.h"
#include "tokenizer/chat.h"
#include "tokenizer/pyjson.h"
#include "tokenizer/tokenizer.h"

static void usage(void) {
    printf("usage: deepinfer chat-encode --arch v4|v41 [--tokenizer PATH] [--thinking]\n"
           "                             [--reasoning-effort X] [--ids] [options] < chat.json\n"
           "\n"
           "Reads a chat from standard input: a JSON array of messages, or an object\n"
           "{\"messages\": [...], \"tools\": [...]} in OpenAI format (roles system, developer,\n"
           "user, assistant, tool, latest_reminder; content, reasoning_content, tool_calls,\n"
           "tool_call_id, tools, response_format, task, wo_eos). Builds the prompt exactly as\n"
           "DeepSeek's Python encoders do and prints it as one JSON string, or with --ids\n"
           "as space-separated token ids.\n"
           "\n"
           "  --arch v4|v41           DeepSeek-V4 (encoding_dsv4.py) or V4.1 (required)\n"
           "  --tokenizer PATH        tokenizer.json or its directory (required with --ids)\n"
           "  --thinking              thinking mode: the prompt ends in <think> (default:\n"
           "                          chat mode, ending in </think>)\n"
           "  --reasoning-effort X    v4: high (default) | max | none\n"
           "                          v41: low (50) | high (75, default) | max (100) |\n"
           "                          an integer 1-100 | none; rendered in thinking mode.\n"
           "                          none switches thinking mode off\n"
           "  --ids                   print token ids instead of the text\n"
           "  --keep-thinking         keep reasoning_content of earlier turns\n"
           "                          (drop_thinking=False)\n"
           "  --no-bos                do not start with <｜begin▁of▁sentence｜>\n"
           "  --no-generation-prompt  v41: no <｜Assistant｜> header after the last message\n"
           "  --continue-final        v41: leave the final assistant message open (no EOS)\n"
           "\n"
           "Exit status: 0 on success; 1 with a message on bad input.\n");
}

static char *read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        if (n == cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    *len = n;
    return buf;
}

static int cmd_chat_encode(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv)) {
        usage();
        return 0;
    }
    di_chat_options opt = {0};
    const char *arch = NULL, *path = NULL;
    int want_ids = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (di_cli_flag_value(argc, argv, &i, "--arch", &arch)) {
            if (!arch) return 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--tokenizer", &path)) {
            if (!path) return 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--reasoning-effort", &v)) {
            if (!v) return 1;
            opt.reasoning_effort = v;
        } else if (!strcmp(argv[i], "--thinking")) {
            opt.thinking = 1;
        } else if (!strcmp(argv[i], "--ids")) {
            want_ids = 1;
        } else if (!strcmp(argv[i], "--keep-thinking")) {
            opt.keep_thinking = 1;
        } else if (!strcmp(argv[i], "--no-bos")) {
            opt.no_bos = 1;
        } else if (!strcmp(argv[i], "--no-generation-prompt")) {
            opt.no_generation_prompt = 1;
        } else if (!strcmp(argv[i], "--continue-final")) {
            opt.continue_final_message = 1;
        } else {
            fprintf(stderr, "chat-encode: unknown option '%s' (see deepinfer chat-encode --help)\n", argv[i]);
            return 1;
        }
    }
    if (!arch || (strcmp(arch, "v4") && strcmp(arch, "v41"))) {
        fprintf(stderr, "chat-encode: --arch v4 or --arch v41 is required\n");
        return 1;
    }
    opt.arch = strcmp(arch, "v4") ? DI_CHAT_V41 : DI_CHAT_V4;
    if (want_ids && !path) {
        fprintf(stderr, "chat-encode: --ids needs --tokenizer PATH\n");
        return 1;
    }
    size_t len;
    char *in = read_all(stdin, &len);
    if (!in) {
        fprintf(stderr, "chat-encode: out of memory reading standard input\n");
        return 1;
    }
    di_error err = {0};
    di_json_doc *doc = NULL;
    if (di_json_parse(in, len, NULL, &doc, &err)) {
        fprintf(stderr, "chat-encode: standard input: %s\n", err.msg);
        free(in);
        return 1;
    }
    char *prompt = NULL;
    size_t plen = 0;
    int rc = 0;
    if (di_chat_encode(doc->root, &opt, &prompt, &plen, &err)) {
        fprintf(stderr, "chat-encode: %s\n", err.msg);
        rc = 1;
    } else if (!want_ids) {
        di_sbuf b = {0};
        di_pyjson_string(&b, prompt, plen);
        fwrite(b.p, 1, b.n, stdout);
        putchar('\n');
        di_sbuf_free(&b);
    } else {
        di_tokenizer *tok = NULL;
        int32_t *ids = NULL;
        size_t n = 0, cap = 0;
        if (di_tokenizer_load(path, &tok, &err) || di_tokenizer_encode(tok, prompt, plen, &ids, &n, &cap, &err)) {
            fprintf(stderr, "chat-encode: %s\n", err.msg);
            rc = 1;
        } else {
            for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
            putchar('\n');
        }
        free(ids);
        di_tokenizer_free(tok);
    }
    free(prompt);
    di_json_free(doc);
    free(in);
    return rc;
}

/* Registered by hand: the command name has a dash, which DI_CLI_COMMAND's id cannot. */
__attribute__((constructor)) static void di_cli_reg_chat_encode(void) {
    di_cli_register("chat-encode", "render a chat as a DeepSeek V4 / V4.1 prompt (text or ids)", cmd_chat_encode);
}
