/* libFuzzer target: `deepinfer serve`'s request bodies (tools/serve/): the
 * first byte picks the endpoint and the output flags, the rest is the body,
 * parsed into an engine request (oai_request_parse); the same bytes are then
 * split as generated text (reasoning / content / DSML tool calls, fed in two
 * pieces) and written back as a response, which must be valid JSON. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "serve/oai_request.h"
#include "serve/oai_response.h"
#include "serve/oai_split.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int mode = data[0];
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    oai_request r;
    char err[1024], param[128];
    if (oai_request_parse(body, n, mode & 1, &r, err, sizeof err, param, sizeof param) == 0) {
        if (r.chat && !r.prompt.messages) abort(); /* a chat request always has its messages */
        if (!r.chat && !r.prompt.text && !r.prompt.token_ids) abort();
    } else if (!err[0]) {
        abort(); /* every refusal says why */
    }
    oai_request_free(&r);

    /* the body as model output */
    memset(&r, 0, sizeof r);
    r.chat = 1;
    r.thinking = (mode >> 1) & 1;
    r.has_tools = (mode >> 2) & 1;
    oai_split s;
    oai_split_init(&s, r.thinking, r.has_tools);
    size_t cut = n ? (size_t)data[size - 1] % (n + 1) : 0;
    for (int piece = 0; piece < 2; piece++) {
        oai_span rs, cs;
        dsml_call *calls = NULL;
        int nc = 0;
        size_t upto = piece ? n : cut;
        oai_split_step(&s, body, upto, piece, &rs, &cs, &calls, &nc);
        if (rs.off + rs.len > upto || cs.off + cs.len > upto) abort();
        dsml_free(calls, nc);
    }
    deepinfer_completion ch = {.text = body, .text_len = n, .finish_reason = DEEPINFER_FINISH_STOP};
    deepinfer_request_output o = {.n_choices = 1, .choices = &ch, .error = ""};
    oai_resp_ctx c = {.id = "x", .model = "m", .req = &r};
    di_sbuf b = {0};
    oai_build_response(&b, &c, &o);
    di_json_doc *doc = NULL;
    if (!b.oom && di_json_parse(b.p, b.n, NULL, &doc, NULL) != DEEPINFER_OK) abort(); /* always valid JSON */
    di_json_free(doc);
    di_sbuf_free(&b);
    return 0;
}
