"""Random-weight Llama checkpoints for tests and benchmarks: no downloads, seconds to make.

Writes what vLLM 0.26 loads from a folder: ``config.json``, ``model.safetensors`` (fp16/bf16,
or AWQ-INT4 in the GEMM layout), a byte-level BPE tokenizer trained here on a small built-in
corpus (``tokenizer.json`` + ``tokenizer_config.json`` with a Llama-3-style chat template), and
PEFT LoRA adapters (``adapter_config.json`` + ``adapter_model.safetensors``) for every linear
layer. Answers are gibberish; shapes, memory and kernels are real.

Needs torch, safetensors and tokenizers (vLLM's environment has them; the app's does not).

Usage::

    python benchmarks/synthetic_model.py --preset tiny --dest /tmp/m --adapters a,b,c
    python benchmarks/synthetic_model.py --preset llama3-8b-awq --vocab-size 1024 --device cuda --dest /tmp/m8
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

AWQ_GROUP_SIZE = 128
"""AWQ group size of the MangaAssist checkpoint (and of most published AWQ models)."""

SPECIAL_TOKENS = ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{{ part['text'] }}{% endfor %}{% endif %}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
"""Llama-3's turn markup, simplified (vLLM's chat endpoint needs a template)."""

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LlamaShape:
    """A Llama decoder shape; field names follow Hugging Face ``config.json``."""

    num_hidden_layers: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    max_position_embeddings: int

    @property
    def head_dim(self) -> int:
        """Per-head width, hidden_size / num_attention_heads (128 for Llama-3-8B)."""
        return self.hidden_size // self.num_attention_heads


PRESETS = {
    # Seconds to load on 2 CPU cores; enough layers and heads to exercise LoRA and paging.
    "tiny": LlamaShape(2, 256, 512, 4, 2, 1024, 8192),
    # Llama-3-8B-Instruct's decoder (its config.json); the vocabulary may be cut with --vocab-size.
    "llama3-8b-awq": LlamaShape(32, 4096, 14336, 32, 8, 128256, 8192),
}


def _corpus() -> Iterable[str]:
    words = [
        "manga",
        "volume",
        "series",
        "chapter",
        "author",
        "artist",
        "publisher",
        "release",
        "order",
        "cart",
        "price",
        "shipping",
        "return",
        "recommend",
        "action",
        "romance",
        "fantasy",
        "comedy",
        "horror",
        "sports",
        "mystery",
        "shonen",
        "shojo",
        "seinen",
        "isekai",
        "hello",
        "thanks",
        "please",
        "help",
        "question",
        "answer",
        "customer",
        "support",
        "account",
        "delivery",
        "stock",
        "new",
        "popular",
        "the",
        "a",
        "an",
        "of",
        "to",
        "in",
        "for",
        "with",
        "on",
        "at",
        "by",
        "from",
        "about",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "have",
        "has",
        "do",
        "does",
        "will",
        "can",
    ]
    for i in range(4000):
        chosen = [words[(i * 7 + j * 13) % len(words)] for j in range(12)]
        yield " ".join(chosen) + f" {i} {i * 37 % 1000}."


def write_tokenizer(dest: Path, vocab_size: int) -> None:
    """A byte-level BPE tokenizer of ``vocab_size`` tokens (specials included), trained here."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: PLC0415

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer)
    tokenizer.save(str(dest / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|eot_id|>",
        "chat_template": CHAT_TEMPLATE,
        "model_max_length": 1_000_000,
        "clean_up_tokenization_spaces": False,
    }
    (dest / "tokenizer_config.json").write_text(json.dumps(config, indent=2))


def _config_json(shape: LlamaShape, dtype: str, tokenizer_size: int, awq: bool) -> dict[str, Any]:
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **asdict(shape),
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "torch_dtype": dtype,
        "bos_token_id": 0,
        "eos_token_id": SPECIAL_TOKENS.index("<|eot_id|>"),
        "attention_bias": False,
        "mlp_bias": False,
    }
    assert tokenizer_size <= shape.vocab_size
    if awq:
        config["quantization_config"] = {
            "quant_method": "awq",
            "bits": 4,
            "group_size": AWQ_GROUP_SIZE,
            "zero_point": True,
            "version": "gemm",
        }
    return config


def _linear_shapes(shape: LlamaShape) -> dict[str, tuple[int, int]]:
    """Module name -> (in, out) of every linear layer of one decoder layer."""
    kv_out = shape.num_key_value_heads * shape.head_dim
    q_out = shape.num_attention_heads * shape.head_dim
    h, inter = shape.hidden_size, shape.intermediate_size
    return {
        "self_attn.q_proj": (h, q_out),
        "self_attn.k_proj": (h, kv_out),
        "self_attn.v_proj": (h, kv_out),
        "self_attn.o_proj": (q_out, h),
        "mlp.gate_proj": (h, inter),
        "mlp.up_proj": (h, inter),
        "mlp.down_proj": (inter, h),
    }


def write_llama(
    dest: Path,
    shape: LlamaShape,
    *,
    dtype: str = "bfloat16",
    awq: bool = False,
    device: str = "cpu",
    seed: int = 0,
    tokenizer_size: int | None = None,
) -> int:
    """Write a random-weight checkpoint to ``dest``; return the bytes of its tensors.

    ``awq``: linear layers in AWQ-INT4 GEMM format (``qweight`` int32 [in, out/8], ``qzeros``
    int32 [in/128, out/8], ``scales`` fp16 [in/128, out]), dtype float16. Scales keep each
    layer's output near unit variance so 32 random layers stay finite in fp16.

    ``tokenizer_size`` below the vocabulary: the LM head's rows past it are zero, so greedy
    decoding (temperature 0) never picks a token the small tokenizer cannot decode (the largest
    of the other logits is above 0), while the LM-head matmul still spans the whole vocabulary.
    """
    import torch  # noqa: PLC0415
    from safetensors.torch import save_file  # noqa: PLC0415

    if awq:
        dtype = "float16"
    torch_dtype = getattr(torch, dtype)
    generator = torch.Generator(device=device).manual_seed(seed)
    tensors: dict[str, Any] = {}

    def normal(*size: int, std: float) -> Any:
        return (torch.randn(*size, generator=generator, device=device) * std).to(torch_dtype)

    h = shape.hidden_size
    tensors["model.embed_tokens.weight"] = normal(shape.vocab_size, h, std=1.0)
    tensors["lm_head.weight"] = normal(shape.vocab_size, h, std=h**-0.5)
    if tokenizer_size is not None and tokenizer_size < shape.vocab_size:
        tensors["lm_head.weight"][tokenizer_size:] = 0
    tensors["model.norm.weight"] = torch.ones(h, dtype=torch_dtype, device=device)
    for layer in range(shape.num_hidden_layers):
        prefix = f"model.layers.{layer}."
        tensors[prefix + "input_layernorm.weight"] = torch.ones(h, dtype=torch_dtype, device=device)
        tensors[prefix + "post_attention_layernorm.weight"] = torch.ones(h, dtype=torch_dtype, device=device)
        for name, (fan_in, fan_out) in _linear_shapes(shape).items():
            if not awq:
                tensors[prefix + name + ".weight"] = normal(fan_out, fan_in, std=fan_in**-0.5)
                continue
            groups = fan_in // AWQ_GROUP_SIZE
            tensors[prefix + name + ".qweight"] = torch.randint(
                -(2**31), 2**31 - 1, (fan_in, fan_out // 8), dtype=torch.int32, generator=generator, device=device
            )
            # Every int4 zero point is 8 (0x88888888): weights are centred on zero.
            tensors[prefix + name + ".qzeros"] = torch.full(
                (groups, fan_out // 8), -0x77777778, dtype=torch.int32, device=device
            )
            # int4 values uniform in [-8, 7] have variance ~21: scale for unit output variance.
            scale = (21.0 * fan_in) ** -0.5
            tensors[prefix + name + ".scales"] = torch.full(
                (groups, fan_out), scale, dtype=torch.float16, device=device
            )
    total = int(sum(t.numel() * t.element_size() for t in tensors.values()))
    dest.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous().cpu() for k, v in tensors.items()}, str(dest / "model.safetensors"))
    return total


def write_lora_adapter(
    dest: Path, shape: LlamaShape, *, rank: int = 16, alpha: int = 32, seed: int = 1, base_model: str = "base"
) -> None:
    """A PEFT LoRA adapter of ``rank`` on every linear layer (fp16 A and B).

    B is large enough (std 0.05; alpha / rank = 2) that each adapter changes a random model's
    greedy answer within a few tokens, so tests can tell which adapter answered.
    """
    import torch  # noqa: PLC0415
    from safetensors.torch import save_file  # noqa: PLC0415

    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(shape.num_hidden_layers):
        for name, (fan_in, fan_out) in _linear_shapes(shape).items():
            prefix = f"base_model.model.model.layers.{layer}.{name}"
            tensors[prefix + ".lora_A.weight"] = (torch.randn(rank, fan_in, generator=generator) * fan_in**-0.5).half()
            tensors[prefix + ".lora_B.weight"] = (torch.randn(fan_out, rank, generator=generator) * 0.05).half()
    dest.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(dest / "adapter_model.safetensors"))
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": alpha,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": list(LORA_TARGETS),
        "base_model_name_or_path": base_model,
    }
    (dest / "adapter_config.json").write_text(json.dumps(config, indent=2))


def make_model(
    root: Path,
    shape: LlamaShape,
    *,
    adapters: Sequence[str] = (),
    rank: int = 16,
    awq: bool = False,
    dtype: str = "bfloat16",
    tokenizer_size: int = 1024,
    device: str = "cpu",
) -> dict[str, Any]:
    """``root/base`` (checkpoint + tokenizer) and ``root/adapters/<name>`` like the image's build context.

    Returns a summary: the shape, the checkpoint's tensor bytes and the seconds it took.
    """
    started = time.monotonic()
    base = root / "base"
    base.mkdir(parents=True, exist_ok=True)
    write_tokenizer(base, min(tokenizer_size, shape.vocab_size))
    weights = write_llama(
        base, shape, dtype=dtype, awq=awq, device=device, tokenizer_size=min(tokenizer_size, shape.vocab_size)
    )
    dtype_written = "float16" if awq else dtype
    config = _config_json(shape, dtype_written, tokenizer_size, awq)
    (base / "config.json").write_text(json.dumps(config, indent=2))
    (base / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 0, "eos_token_id": config["eos_token_id"]})
    )
    for index, name in enumerate(adapters):
        write_lora_adapter(root / "adapters" / name, shape, rank=rank, seed=index + 1)
    return {"shape": asdict(shape), "weights_bytes": weights, "seconds": round(time.monotonic() - started, 1)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/synthetic_model.py", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--vocab-size", type=int, help="override the preset's vocabulary (a small one saves memory)")
    parser.add_argument("--adapters", default="", help="comma-separated adapter names")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--device", default="cpu", help="where to generate the tensors (cuda is seconds for 8B)")
    parser.add_argument("--dest", type=Path, required=True)
    args = parser.parse_args(argv)
    shape = PRESETS[args.preset]
    if args.vocab_size:
        shape = replace(shape, vocab_size=args.vocab_size)
    summary = make_model(
        args.dest,
        shape,
        adapters=[a for a in args.adapters.split(",") if a],
        rank=args.rank,
        awq=args.preset.endswith("-awq"),
        device=args.device,
    )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
