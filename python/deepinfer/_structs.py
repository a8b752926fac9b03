"""ctypes mirrors of the structs in include/deepinfer.h.

Each class lists the C fields in the header's order with the header's types;
keep them in step with include/deepinfer.h (python/tests/test_layout.py
compiles a small C program against the header and compares every field's
offset and every struct's size with these). _lib.py checks at load time that
the library's *_init functions write exactly the bytes these structs cover.
"""
import ctypes as C

# include/deepinfer.h: DEEPINFER_MAX_STOP_STRINGS, DEEPINFER_MAX_STOP_IDS, DEEPINFER_MAX_LOGPROBS
MAX_STOP_STRINGS = 16
MAX_STOP_IDS = 64
MAX_LOGPROBS = 20

# deepinfer_status
OK = 0
STATUS_NAMES = {
    0: "ok", -1: "invalid argument", -2: "io", -3: "format", -4: "unsupported",
    -5: "out of memory", -6: "not found", -7: "limit", -8: "internal",
}

# deepinfer_finish_reason
FINISH_NONE, FINISH_STOP, FINISH_LENGTH, FINISH_EOS, FINISH_ABORT, FINISH_ERROR = range(6)

# C `int` and enums are 32-bit on every ABI deepinfer builds for (x86-64, aarch64 Linux).
c_enum = C.c_int


class SamplingParamsC(C.Structure):
    """struct deepinfer_sampling_params"""
    _fields_ = [
        ("temperature", C.c_float),
        ("top_k", C.c_int32),
        ("top_p", C.c_float),
        ("min_p", C.c_float),
        ("repetition_penalty", C.c_float),
        ("presence_penalty", C.c_float),
        ("frequency_penalty", C.c_float),
        ("max_tokens", C.c_int32),
        ("min_tokens", C.c_int32),
        ("n", C.c_int32),
        ("ignore_eos", C.c_int),
        ("has_seed", C.c_int),
        ("seed", C.c_uint64),
        ("logprobs", C.c_int32),
        ("stop", C.c_char_p * MAX_STOP_STRINGS),
        ("n_stop", C.c_int32),
        ("stop_ids", C.c_int32 * MAX_STOP_IDS),
        ("n_stop_ids", C.c_int32),
        ("skip_special_tokens", C.c_int),
        ("so_schema_type", C.c_char_p),
        ("so_schema", C.c_char_p),
        ("so_after_think", C.c_int),
        ("so_whitespace_max", C.c_int32),
        ("so_lenient", C.c_int),
        ("prompt_logprobs", C.c_int32),
    ]


class EngineConfigC(C.Structure):
    """struct deepinfer_engine_config"""
    _fields_ = [
        ("model", C.c_char_p),
        ("tokenizer", C.c_char_p),
        ("accelerator", C.c_char_p),
        ("memory_budget", C.c_uint64),
        ("max_num_batched_tokens", C.c_int),
        ("max_num_seqs", C.c_int),
        ("chunk_size", C.c_int),
        ("batch_invariant", C.c_int),
        ("max_model_len", C.c_int64),
        ("page_rows", C.c_int),
        ("num_pages", C.c_int64),
        ("async_scheduling", C.c_int),
        ("max_draft_tokens", C.c_int),
        ("seed", C.c_uint64),
        ("engram_hash", C.c_char_p),
        ("cuda_graphs", C.c_int),
        ("yoco_compact", C.c_int),
        ("yoco_keep_tokens", C.c_int64),
        ("mtp_varlen", C.c_int),
        ("nextn_decode", C.c_int),
        ("ep", C.c_int),
        ("dp", C.c_int),
        ("eplb_replicas", C.c_int),
        ("eplb_interval", C.c_int),
        ("cp_min_tokens", C.c_int),
    ]


class MemoryPlanC(C.Structure):
    """struct deepinfer_memory_plan"""
    _fields_ = [
        ("budget", C.c_uint64),
        ("weight_bytes", C.c_uint64),
        ("decode_weight_bytes", C.c_uint64),
        ("workspace_bytes", C.c_uint64),
        ("slot_bytes", C.c_uint64),
        ("num_slots", C.c_int),
        ("page_bytes", C.c_uint64),
        ("num_pages", C.c_int64),
        ("page_rows_kv", C.c_int),
        ("page_rows_index", C.c_int),
        ("tokens_per_sequence_max", C.c_int64),
        ("max_model_len", C.c_int64),
        ("max_num_batched_tokens", C.c_int),
        ("chunk_size", C.c_int),
        ("batch_invariant", C.c_int),
        ("async_scheduling", C.c_int),
        ("model_dir", C.c_char * 4096),
        ("arch", C.c_char * 32),
        ("accelerator", C.c_char * 16),
    ]


class PromptC(C.Structure):
    """struct deepinfer_prompt"""
    _fields_ = [
        ("text", C.c_char_p),
        ("token_ids", C.POINTER(C.c_int32)),
        ("n_token_ids", C.c_size_t),
        ("messages", C.c_char_p),
        ("thinking", C.c_int),
        ("reasoning_effort", C.c_char_p),
        ("no_bos", C.c_int),
    ]


class CompletionC(C.Structure):
    """struct deepinfer_completion"""
    _fields_ = [
        ("index", C.c_int),
        ("token_ids", C.POINTER(C.c_int32)),
        ("n_tokens", C.c_size_t),
        # text is read with its length (text_len), so a void pointer, not c_char_p
        ("text", C.c_void_p),
        ("text_len", C.c_size_t),
        ("logprobs", C.POINTER(C.c_float)),
        ("n_top", C.c_int),
        ("top_ids", C.POINTER(C.c_int32)),
        ("top_logprobs", C.POINTER(C.c_float)),
        ("finish_reason", c_enum),
        ("stop_str", C.c_char_p),
        ("stop_token", C.c_int32),
        ("n_prev_tokens", C.c_size_t),
        ("prev_text_len", C.c_size_t),
        ("num_preemptions", C.c_int),
    ]


class RequestMetricsC(C.Structure):
    """struct deepinfer_request_metrics"""
    _fields_ = [
        ("arrival_s", C.c_double),
        ("first_scheduled_s", C.c_double),
        ("first_token_s", C.c_double),
        ("finished_s", C.c_double),
        ("ttft_s", C.c_double),
        ("tpot_s", C.c_double),
        ("e2e_s", C.c_double),
        ("prompt_tokens", C.c_int64),
        ("output_tokens", C.c_int64),
        ("computed_tokens", C.c_int64),
        ("num_preemptions", C.c_int),
        ("spec_drafted", C.c_int64),
        ("spec_accepted", C.c_int64),
        ("spec_steps", C.c_int64),
    ]


class RequestOutputC(C.Structure):
    """struct deepinfer_request_output"""
    _fields_ = [
        ("request_id", C.c_uint64),
        ("status", c_enum),
        ("error", C.c_char_p),
        ("prompt_ids", C.POINTER(C.c_int32)),
        ("n_prompt", C.c_size_t),
        ("finished", C.c_int),
        ("n_choices", C.c_size_t),
        ("choices", C.POINTER(CompletionC)),
        ("metrics", RequestMetricsC),
        ("prompt_logprobs", C.POINTER(C.c_float)),
        ("prompt_top_ids", C.POINTER(C.c_int32)),
        ("prompt_top_logprobs", C.POINTER(C.c_float)),
        ("n_prompt_top", C.c_int32),
    ]


# The structs test_layout.py compares with the header: (Python class, C type name).
ALL = [
    (SamplingParamsC, "deepinfer_sampling_params"),
    (EngineConfigC, "deepinfer_engine_config"),
    (MemoryPlanC, "deepinfer_memory_plan"),
    (PromptC, "deepinfer_prompt"),
    (CompletionC, "deepinfer_completion"),
    (RequestMetricsC, "deepinfer_request_metrics"),
    (RequestOutputC, "deepinfer_request_output"),
]
