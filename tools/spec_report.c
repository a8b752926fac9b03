/* spec_report.c — speculative-decoding summary lines (spec_report.h). */
#include "spec_report.h"

double di_specdec_tau(const deepinfer_engine_stats *st) {
    return st->spec_steps ? (double)(st->spec_steps + st->spec_accepted) / (double)st->spec_steps : 0.0;
}

void di_specdec_report(FILE *f, const char *indent, const deepinfer_engine_stats *st) {
    if (!st->spec_steps) return;
    fprintf(f, "%sspeculation  tau %.3f (committed tokens per verify) over %lld verify steps; drafts %lld of %lld "
               "accepted (%lld rows wasted); acceptance by draft position:",
            indent, di_specdec_tau(st), (long long)st->spec_steps, (long long)st->spec_accepted,
            (long long)st->spec_drafted, (long long)(st->spec_drafted - st->spec_accepted));
    for (int i = 0; i < DEEPINFER_MAX_DRAFT && st->spec_drafted_at[i]; i++)
        fprintf(f, " %d:%.3f", i + 1, (double)st->spec_accepted_at[i] / (double)st->spec_drafted_at[i]);
    fputc('\n', f);
}
