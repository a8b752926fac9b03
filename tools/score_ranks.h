/*
 * score_ranks.h — `deepinfer score --ep M --dp N`: the scored model on M
 * ranks (threads of this process over the loopback communicator, the
 * engine's layout rules: src/engine/ranks.h), behind the score driver's two
 * calls. dp = 1: every rank runs every step's rows (its own copy of each
 * sequence's state), rank 0 gives the logits. dp = N: the scored requests
 * are rank 0's; the other ranks hold none and join every MoE exchange with
 * zero rows. The logits are bitwise those of one rank.
 */
#ifndef DI_TOOLS_SCORE_RANKS_H
#define DI_TOOLS_SCORE_RANKS_H

#include "cli_model.h"

typedef struct di_score_ranks di_score_ranks;

/* Load `dir` on the layout's ranks (opt: rank 0's options without ep fields); *sm drives them. */
deepinfer_status di_score_ranks_open(const char *dir, const di_v4_options *opt, int ep, int dp, di_score_ranks **out,
                                     di_score_model *sm, di_error *err);
void di_score_ranks_free(di_score_ranks *R);

#endif
