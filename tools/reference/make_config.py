#!/usr/bin/env python3
"""Write config.json (deepseek_v41 layout, same text_config keys as the golden checkpoint),
engram_token_map.json (§5.8 rule on OUR tokenizer) and engram_hash.json (primes, offsets,
multipliers, pad class) for the demo model.  usage: make_config.py MODEL_DIR
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dsv41_config import Cfg  # noqa: E402
from dsv41_engram import compressed_token_map, engram_constants  # noqa: E402

# The demo architecture: every V4.1 mechanism at small scale (see tools/reference/README.md).
DEMO = {
    "model_type": "deepseek_v41_text", "hidden_size": 256, "num_hidden_layers": 10,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 128, "qk_rope_head_dim": 64,
    "q_lora_rank": 128, "o_lora_rank": 128, "o_groups": 2, "moe_intermediate_size": 256,
    "rms_norm_eps": 1e-20, "swiglu_limit": 10.0, "gate_temp": 1.0, "max_position_embeddings": 1048576,
    "rope_theta": 10000, "rope_scaling": {"rope_type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                                          "original_max_position_embeddings": 65536},
    "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2, "scoring_func": "sqrtsoftplus",
    "topk_method": "noaux_tc", "norm_topk_prob": True, "routed_scaling_factor": 1.5, "sliding_window": 64,
    "compress_ratios": [0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0], "compress_rope_theta": 160000,
    "kv_source_layer_ids": [2, 4, 6], "index_source_layer_ids": [2, 4, 6, 8], "index_n_heads": 4,
    "index_head_dim": 128, "index_topk": 32, "candidate_source_layer_id": 6, "candidate_topk_blocks": 8,
    "candidate_block_size": 8, "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-06,
    "engram_layer_ids": [1, 4], "engram_max_ngram_size": 4, "engram_vocab_size": 4096, "engram_n_heads": 2,
    "engram_head_dim": 32, "engram_pad_token_id": 2, "num_nextn_predict_layers": 3, "dspark_block_size": 5,
    "dspark_target_layer_ids": [7, 8, 9], "dspark_markov_rank": 64, "dspark_n_routed_experts": 4,
    "dspark_num_experts_per_tok": 2, "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2,
    "tie_word_embeddings": False,
}
KEY_ORDER = ["model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "head_dim", "qk_rope_head_dim", "q_lora_rank", "o_lora_rank", "o_groups",
             "moe_intermediate_size", "rms_norm_eps", "swiglu_limit", "gate_temp", "max_position_embeddings",
             "rope_theta", "rope_scaling", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
             "scoring_func", "topk_method", "norm_topk_prob", "routed_scaling_factor", "sliding_window",
             "compress_ratios", "compress_rope_theta", "kv_source_layer_ids", "index_source_layer_ids",
             "index_n_heads", "index_head_dim", "index_topk", "candidate_source_layer_id", "candidate_topk_blocks",
             "candidate_block_size", "hc_mult", "hc_sinkhorn_iters", "hc_eps", "engram_layer_ids",
             "engram_num_embeddings", "engram_max_ngram_size", "engram_vocab_size", "engram_n_heads",
             "engram_head_dim", "engram_pad_token_id", "engram_compressed_vocab_size", "num_nextn_predict_layers",
             "dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids", "dspark_markov_rank",
             "dspark_n_routed_experts", "dspark_num_experts_per_tok", "bos_token_id", "eos_token_id",
             "pad_token_id", "tie_word_embeddings"]


def build(vocab, compressed_vocab, noise_id, num_embeddings):
    tc = dict(DEMO, vocab_size=vocab, engram_compressed_vocab_size=compressed_vocab,
              dspark_noise_token_id=noise_id, engram_num_embeddings=num_embeddings)
    tc = {k: tc[k] for k in KEY_ORDER}
    return {"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41", "dtype": "bfloat16",
            "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2,
            "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [32, 32],
                                    "scale_fmt": "ue8m0", "expert_dtype": "fp4"},
            "text_config": tc}


def main():
    d = sys.argv[1]
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    V = tok.get_vocab_size(with_added_tokens=True)
    tmap, C = compressed_token_map(tok)
    pad_class = tmap[DEMO["engram_pad_token_id"]]
    noise = tok.token_to_id("<｜System｜>")
    cfg0 = Cfg.from_json(build(V, C, noise, [0, 0]))
    consts = engram_constants(cfg0, C, pad_class)
    conf = build(V, C, noise, consts["num_embeddings"])
    json.dump(conf, open(os.path.join(d, "config.json"), "w"), indent=2)
    desc = ("Compressed-token map of the Engram n-gram hash (architecture.md §5.8) computed from this "
            "checkpoint's tokenizer.json: every id decoded alone (raw tokenizer, skip_special_tokens=False); "
            "key = raw token string if the text contains U+FFFD, else NFKC->NFD->StripAccents->Lowercase->"
            "[ \\t\\r\\n]+ to ' ' (a lone ' ' kept)->Strip, falling back to the text if empty; class ids in "
            "first-seen order over ids 0..vocab-1. map[token_id] = class id.")
    json.dump({"description": desc, "vocab_size": V, "compressed_vocab_size": C,
               "pad_token_id": DEMO["engram_pad_token_id"], "pad_class": pad_class, "map": tmap},
              open(os.path.join(d, "engram_token_map.json"), "w"))
    json.dump(dict(consts, layer_ids=DEMO["engram_layer_ids"], compressed_vocab_size=C,
                   rule="primes[layer][n-2][head]: next unused prime above engram_vocab_size-1 (global, never "
                        "reused); offsets: running sum of the layer's primes; multipliers: numpy "
                        "default_rng(10007*layer).integers(0, (INT64_MAX//compressed_vocab)//2, 4)*2+1"),
              open(os.path.join(d, "engram_hash.json"), "w"), indent=1)
    print("vocab", V, "compressed", C, "pad_class", pad_class, "noise", noise, "rows", consts["num_embeddings"])


if __name__ == "__main__":
    main()
