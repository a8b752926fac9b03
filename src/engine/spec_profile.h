/*
 * spec_profile.h — measuring the step-cost table of confidence-scheduled
 * speculation at engine start (spec_cost.h, spec_profile.c).
 */
#ifndef DI_ENGINE_SPEC_PROFILE_H
#define DI_ENGINE_SPEC_PROFILE_H

#include "engine/spec_cost.h"
#include "engine/state_pool.h"
#include "model/model.h"

/* Target forwards of up to max_rows rows and drafter calls with drafts of spec_n tokens, on free
 * slots of `pool` (returned afterwards, their state left dirty: slots are reset when a sequence
 * takes them). Points the pool cannot hold are left out. */
deepinfer_status di_spec_profile(di_model *m, di_state_pool *pool, int max_rows, int spec_n, di_spec_cost *out,
                                 di_error *err);

#endif
