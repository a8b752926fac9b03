/* spec_report.h — the speculative-decoding lines of `generate`'s summary and `bench-engine`
 * (include/deepinfer.h deepinfer_engine_stats' spec_* fields). */
#ifndef DI_TOOLS_SPEC_REPORT_H
#define DI_TOOLS_SPEC_REPORT_H

#include <stdio.h>

#include "deepinfer.h"

/* Mean accepted length tau (committed tokens per verify step). */
double di_specdec_tau(const deepinfer_engine_stats *st);

/* "speculation  tau 2.91 over N verify steps; drafts: A of D accepted (W rows wasted); by
 * position: 0.74 0.55 ..." — nothing when no step verified drafts. */
void di_specdec_report(FILE *f, const char *indent, const deepinfer_engine_stats *st);

#endif
