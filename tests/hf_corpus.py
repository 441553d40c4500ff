"""Hugging Face transformers architectures from tiny configs with random weights (no hub).

Each row builds a model of one architecture and its example inputs with a padding mask:
decoders pad on the left, encoders on the right, so some query rows of a causal layer see
no key at all. ``attentions`` is how many attention layers the exported graph holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

BATCH, SEQ, VOCAB = 2, 16, 128
PAD = 5  # padded positions in the second sequence
# One small transformer: 2 layers, 4 heads of 16, d 64.
SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


@dataclass(frozen=True)
class Arch:
    """One architecture: its model type, config, how it is called, its attention layers."""

    model_type: str
    config: dict = field(default_factory=dict)
    kind: str = "decoder"  # decoder | encoder | seq2seq | vision | speech
    attentions: int = 2
    auto: str = "AutoModel"
    softmaxes: int = 0  # softmaxes that are no attention's (an MoE router's, per layer)


# Special tokens inside the tiny vocabulary (the configs' defaults index a real one).
TOKENS = dict(bos_token_id=0, eos_token_id=1, pad_token_id=1, cls_token_id=0, sep_token_id=1)


def _decoder(**extra) -> dict:
    return {**SMALL, **TOKENS, "vocab_size": VOCAB, "max_position_embeddings": 64, **extra}


def _encoder_decoder(**extra) -> dict:
    """BART-style configs (BART, Whisper): 2 + 2 layers, 4 heads, d 64."""
    return dict(
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        vocab_size=VOCAB,
        **extra,
    )


# Swin and Swin-v2: two stages, windows of 4 patches a side (the first shifted)
_SWIN = dict(
    image_size=32,
    patch_size=4,
    embed_dim=32,
    depths=[2, 2],
    num_heads=[2, 4],
    window_size=4,
    num_channels=3,
)


ARCHS: dict[str, Arch] = {
    a.model_type: a
    for a in [
        Arch("gpt2", dict(n_embd=64, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=64)),
        Arch("llama", _decoder(num_key_value_heads=2)),
        Arch("mistral", _decoder(num_key_value_heads=2, sliding_window=8)),
        Arch("qwen2", _decoder(num_key_value_heads=2)),
        Arch("qwen3", _decoder(num_key_value_heads=2, head_dim=16)),
        Arch(
            "gemma2",
            _decoder(num_key_value_heads=2, head_dim=16, sliding_window=8),
        ),
        Arch(
            "gemma3_text",
            _decoder(num_key_value_heads=2, head_dim=16, sliding_window=8),
        ),
        Arch("phi3", _decoder(num_key_value_heads=2, pad_token_id=0)),
        Arch("gpt_neox", _decoder()),
        Arch(
            "opt",
            dict(
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                ffn_dim=128,
                vocab_size=VOCAB,
                max_position_embeddings=64,
                word_embed_proj_dim=64,
            ),
        ),
        Arch("bloom", dict(hidden_size=64, n_layer=2, n_head=4, vocab_size=VOCAB)),
        # (B·H, N, N) scores viewed as (B, H, N, N) for the mask, clamped at finfo.min
        Arch(
            "xglm",
            dict(
                d_model=64,
                num_layers=2,
                attention_heads=4,
                ffn_dim=128,
                vocab_size=VOCAB,
                max_position_embeddings=64,
            ),
        ),
        Arch("falcon", _decoder(new_decoder_architecture=False, multi_query=True)),
        # multi-head latent attention (Q·K over 24 features, V of 16); its router asks for an
        # unsorted top k (experts as batched products: see test_hf_models' Mixtral test)
        Arch(
            "deepseek_v3",
            _decoder(
                num_key_value_heads=4,
                kv_lora_rank=32,
                q_lora_rank=48,
                qk_rope_head_dim=8,
                qk_nope_head_dim=16,
                v_head_dim=16,
                n_routed_experts=2,
                num_experts_per_tok=2,
                n_shared_experts=1,
                moe_intermediate_size=32,
                first_k_dense_replace=1,
                n_group=1,
                topk_group=1,
                experts_implementation="batched_mm",
            ),
        ),
        # its rotary embedding multiplies complex numbers (torch.polar, view_as_complex);
        # a dense layer, then an MoE layer whose router scatters its top k into -inf
        Arch(
            "llama4_text",
            _decoder(
                num_key_value_heads=2,
                head_dim=16,
                intermediate_size_mlp=128,
                attention_chunk_size=8,
                no_rope_layers=[1, 0],
                moe_layers=[1],
                num_local_experts=2,
                num_experts_per_tok=1,
                experts_implementation="batched_mm",
            ),
        ),
        # a learned sink logit per head in every softmax; sliding-window and full layers;
        # its router's softmax over the top k experts stays a softmax
        Arch(
            "gpt_oss",
            _decoder(
                num_key_value_heads=2,
                head_dim=16,
                num_local_experts=2,
                num_experts_per_tok=2,
                sliding_window=8,
                layer_types=["sliding_attention", "full_attention"],
                experts_implementation="batched_mm",
            ),
            softmaxes=2,
        ),
        Arch("bert", _decoder(), kind="encoder"),
        Arch("roberta", _decoder(pad_token_id=1), kind="encoder"),
        Arch(
            "distilbert",
            dict(
                dim=64,
                n_layers=2,
                n_heads=4,
                hidden_dim=128,
                vocab_size=VOCAB,
                max_position_embeddings=64,
            ),
            kind="encoder",
        ),
        Arch(
            "modernbert",
            _decoder(global_attn_every_n_layers=2, local_attention=8, pad_token_id=0),
            kind="encoder",
        ),
        Arch(
            "t5",
            dict(
                d_model=64,
                num_layers=2,
                num_decoder_layers=2,
                num_heads=4,
                d_kv=16,
                d_ff=128,
                vocab_size=VOCAB,
                decoder_start_token_id=0,
            ),
            kind="seq2seq",
            attentions=6,
        ),
        Arch(
            "bart",
            _encoder_decoder(max_position_embeddings=64),
            kind="seq2seq",
            attentions=6,
        ),
        Arch(
            "vit",
            dict(**SMALL, image_size=32, patch_size=8, num_channels=3),
            kind="vision",
        ),
        Arch(
            "deit",
            dict(**SMALL, image_size=32, patch_size=8, num_channels=3),
            kind="vision",
        ),
        Arch(
            "whisper",
            _encoder_decoder(
                num_mel_bins=16,
                max_source_positions=16,
                max_target_positions=32,
                decoder_start_token_id=0,
            ),
            kind="speech",
            attentions=6,
        ),
        Arch("clip_text_model", _decoder(), kind="encoder"),
        # pools its sequence between blocks (a ceil-mode (2, 1) average pool), then
        # attends from the pooled queries with relative-shift position terms
        Arch(
            "funnel",
            dict(
                block_sizes=[1, 1],
                block_repeats=[1, 1],
                num_decoder_layers=1,
                d_model=64,
                n_head=4,
                d_head=16,
                d_inner=128,
                vocab_size=VOCAB,
                architectures=["FunnelModel"],
            ),
            kind="encoder",
            attentions=3,
        ),
        # relative position bias tables indexed by a buffer; shifted windows' masks
        Arch(
            "swin",
            _SWIN,
            kind="vision",
            attentions=4,
        ),
        # cosine attention: a learned logit scale per head (folded into Q), a bias from
        # a small MLP over log-spaced coordinates; shifted windows' masks
        Arch(
            "swinv2",
            _SWIN,
            kind="vision",
            attentions=4,
        ),
        # the bias table resized (bilinear) to the window and indexed in the forward
        Arch(
            "beit",
            dict(
                **SMALL,
                image_size=32,
                patch_size=8,
                num_channels=3,
                use_relative_position_bias=True,
            ),
            kind="vision",
        ),
    ]
}


def padding_mask(kind: str, length: int = SEQ) -> torch.Tensor:
    """(BATCH, length) ones with PAD zeros in the second row: left for decoders, else
    right."""
    mask = torch.ones(BATCH, length, dtype=torch.long)
    if kind == "decoder":
        mask[1, :PAD] = 0
    else:
        mask[1, length - PAD :] = 0
    return mask


class IdsOnly(torch.nn.Module):
    """A text model called with its token ids alone (no ``attention_mask``: transformers
    builds its masks from the positions)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids)[0]


class LastHidden(torch.nn.Module):
    """A model's first output tensor: the last hidden state (or the logits)."""

    def __init__(self, model: torch.nn.Module, kind: str):
        super().__init__()
        self.model, self.kind = model, kind

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        if self.kind == "vision":
            (pixels,) = args
            out = self.model(pixel_values=pixels)
        elif self.kind == "speech":
            features, decoder_ids = args
            out = self.model(input_features=features, decoder_input_ids=decoder_ids)
        elif self.kind == "seq2seq":
            ids, mask, decoder_ids = args
            out = self.model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids)
        else:
            ids, mask = args
            out = self.model(input_ids=ids, attention_mask=mask)
        return out[0]


def build(
    name: str, attn_implementation: str, seq: int = SEQ, image: int = 32
) -> tuple[torch.nn.Module, Callable[[], tuple]]:
    """The architecture's model in eval mode (seeded random weights) and a maker of its
    inputs: ``seq`` tokens (or ``image``² pixels) per sequence."""
    import transformers

    arch = ARCHS[name]
    config = transformers.AutoConfig.for_model(arch.model_type, **{**TOKENS, **arch.config})
    config._attn_implementation = attn_implementation
    torch.manual_seed(0)
    model = getattr(transformers, arch.auto).from_config(
        config, attn_implementation=attn_implementation
    )
    model = LastHidden(model.eval(), arch.kind).eval()

    def inputs() -> tuple:
        if arch.kind == "vision":
            return (torch.randn(BATCH, 3, image, image),)
        if arch.kind == "speech":
            return (torch.randn(BATCH, 16, 32), torch.randint(2, VOCAB, (BATCH, 8)))
        ids = torch.randint(2, VOCAB, (BATCH, seq))
        if arch.kind == "seq2seq":
            return ids, padding_mask(arch.kind, seq), torch.randint(2, VOCAB, (BATCH, 8))
        return ids, padding_mask(arch.kind, seq)

    return model, inputs


class DecodeStep(torch.nn.Module):
    """One decoding step as transformers runs it: the new token against past keys and
    values given as inputs (per layer), through the model's own ``DynamicCache``."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, *past: torch.Tensor):
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        for layer in range(len(past) // 2):
            cache.update(past[2 * layer], past[2 * layer + 1], layer)
        out = self.model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True)
        return out.last_hidden_state


def decode_step(
    name: str, past: int = 12, attn_implementation: str = "sdpa"
) -> tuple[torch.nn.Module, Callable[[], tuple]]:
    """A decoder's step over ``past`` cached positions (the second sequence left-padded)."""
    model, _ = build(name, attn_implementation)
    config = model.model.config
    heads = getattr(config, "num_key_value_heads", config.num_attention_heads)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    step = DecodeStep(model.model).eval()

    def inputs() -> tuple:
        mask = torch.ones(BATCH, past + 1, dtype=torch.long)
        mask[1, :PAD] = 0
        cache = [
            torch.randn(BATCH, heads, past, head_dim) for _ in range(2 * config.num_hidden_layers)
        ]
        return (torch.randint(2, VOCAB, (BATCH, 1)), mask, *cache)

    return step, inputs
