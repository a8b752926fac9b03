"""DeepSeek-V4.1 text config (HF `deepseek_v41` / `text_config` key names, architecture.md §1) and
the layer roles derived from it (§5.0). Nothing about roles is hard-coded: everything follows from
compress_ratios, kv_source_layer_ids, index_source_layer_ids, candidate_source_layer_id."""
import json
import math
from dataclasses import dataclass, field


@dataclass
class Cfg:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    head_dim: int
    qk_rope_head_dim: int
    q_lora_rank: int
    o_lora_rank: int
    o_groups: int
    moe_intermediate_size: int
    n_routed_experts: int
    num_experts_per_tok: int
    sliding_window: int
    compress_ratios: list
    kv_source_layer_ids: list
    index_source_layer_ids: list
    index_n_heads: int
    index_head_dim: int
    index_topk: int
    candidate_source_layer_id: int
    candidate_topk_blocks: int
    candidate_block_size: int
    engram_layer_ids: list
    engram_num_embeddings: list
    engram_max_ngram_size: int
    engram_vocab_size: int
    engram_n_heads: int
    engram_head_dim: int
    engram_pad_token_id: int
    engram_compressed_vocab_size: int
    num_nextn_predict_layers: int
    dspark_block_size: int
    dspark_noise_token_id: int
    dspark_target_layer_ids: list
    dspark_markov_rank: int
    dspark_n_routed_experts: int
    dspark_num_experts_per_tok: int
    rms_norm_eps: float = 1e-20
    swiglu_limit: float = 10.0
    gate_temp: float = 1.0
    routed_scaling_factor: float = 1.5
    norm_topk_prob: bool = True
    n_shared_experts: int = 1
    rope_theta: float = 10000.0
    compress_rope_theta: float = 160000.0
    rope_scaling: dict = field(default_factory=lambda: {"rope_type": "yarn", "factor": 16, "beta_fast": 32,
                                                        "beta_slow": 1, "original_max_position_embeddings": 65536})
    hc_mult: int = 4
    hc_sinkhorn_iters: int = 20
    hc_eps: float = 1e-6

    @classmethod
    def from_json(cls, path_or_dict):
        d = path_or_dict if isinstance(path_or_dict, dict) else json.load(open(path_or_dict))
        d = d.get("text_config", d)
        names = cls.__dataclass_fields__.keys()
        return cls(**{k: v for k, v in d.items() if k in names})

    # ---- layer roles (§5.0) ----
    @property
    def n_layers(self):
        return self.num_hidden_layers

    def ratio(self, layer):
        return self.compress_ratios[layer]

    def is_kv_source(self, layer):
        return layer < self.n_layers and layer in self.kv_source_layer_ids

    def is_index_source(self, layer):
        return layer < self.n_layers and layer in self.index_source_layer_ids

    def is_candidate_source(self, layer):
        return layer == self.candidate_source_layer_id

    def uses_candidates(self, layer):
        return 0 <= self.candidate_source_layer_id < layer and self.is_index_source(layer)

    def role(self, layer):
        if layer >= self.n_layers:
            return "dspark"
        if self.ratio(layer) == 0:
            return "window"
        if self.is_kv_source(layer):
            return "full"
        if self.is_index_source(layer):
            return "reindex"
        return "reuse"

    def moe_shape(self, layer):
        if layer < self.n_layers:
            return self.n_routed_experts, self.num_experts_per_tok
        return (self.dspark_n_routed_experts or self.n_routed_experts,
                self.dspark_num_experts_per_tok or self.num_experts_per_tok)

    def rope_freqs(self, layer):
        """Per-layer inverse frequencies (§4.3): ratio 0 -> base rope_theta, no YaRN; compressed
        layers -> compress_rope_theta with the YaRN ramp, no mscale."""
        import torch
        rd = self.qk_rope_head_dim
        if self.ratio(layer) == 0:
            base, orig = self.rope_theta, 0
        else:
            base, orig = self.compress_rope_theta, self.rope_scaling["original_max_position_embeddings"]
        freqs = 1.0 / (base ** (torch.arange(0, rd, 2, dtype=torch.float32) / rd))
        if orig > 0:
            fac, bf, bs = self.rope_scaling["factor"], self.rope_scaling["beta_fast"], self.rope_scaling["beta_slow"]

            def corr(rot):
                return rd * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
            low, high = max(math.floor(corr(bf)), 0), min(math.ceil(corr(bs)), rd - 1)
            ramp = ((torch.arange(rd // 2, dtype=torch.float32) - low) / max(high - low, 1e-3)).clamp(0, 1)
            smooth = 1 - ramp
            freqs = freqs / fac * (1 - smooth) + freqs * smooth
        return freqs
