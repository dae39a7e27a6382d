"""Model facts: published FLOPs and the historical LSTM presets."""

from __future__ import annotations

#: Forward cost per 224x224 image, in billions of multiply-accumulates
#: (torchvision labels the column "GFLOPS" but counts multiply-accumulates).
#: Source: torchvision model documentation, "GFLOPS" column of the ResNet weights
#: tables (ResNet18_Weights.IMAGENET1K_V1 ... ResNet152_Weights.IMAGENET1K_V1).
RESNET_GMACS_224 = {
    "resnet18": 1.81,
    "resnet34": 3.66,
    "resnet50": 4.09,
    "resnet101": 7.80,
    "resnet152": 11.51,
}


def train_flops_per_image(model: str, image_size: int) -> float:
    """Rough training FLOPs per image (forward x3, MACs x2), for time estimates only.

    Measured FLOPs (torch.utils.flop_counter) replace this in results."""
    macs = RESNET_GMACS_224.get(model, 4.0) * 1e9 * (image_size / 224.0) ** 2
    return 3 * 2 * macs


#: NVIDIA Apex examples/word_language_model defaults.
#: Source: github.com/NVIDIA/apex, examples/word_language_model/main.py and
#: main_fp16_optimizer.py at commit 241dd6c4 (Dec 2018) for "apex-2018", and the
#: Jan/Feb 2019 revisions (emsize=nhid=1504, batch 24, dropout 0.65, vocabulary
#: padded to a multiple of 8, static loss scale 128) for "tensor-core".
#: The seed article ran 30 epochs (Sanyam Bhutani, "RTX 2080Ti vs GTX 1080Ti: fastai mixed precision training
#: comparisons on CIFAR-100", January 2019).
LSTM_PRESETS = {
    "apex-2018": {
        "emsize": 200,
        "nhid": 200,
        "nlayers": 2,
        "lr": 20.0,
        "clip": 0.25,
        "epochs": 30,
        "batch_size": 20,
        "eval_batch_size": 10,
        "bptt": 35,
        "dropout": 0.2,
        "tied": False,
        "seed": 1111,
        "pad_vocab_to": 1,
        "static_loss_scale": 1.0,
        "dynamic_loss_scale": False,
    },
    "tensor-core": {
        "emsize": 1504,
        "nhid": 1504,
        "nlayers": 2,
        "lr": 20.0,
        "clip": 0.25,
        "epochs": 30,
        "batch_size": 24,
        "eval_batch_size": 10,  # 10 in every version of the example (main.py: eval_batch_size = 10)
        "bptt": 35,
        "dropout": 0.65,
        "tied": False,
        "seed": 1111,
        "pad_vocab_to": 8,
        "static_loss_scale": 128.0,
        "dynamic_loss_scale": False,
    },
}

from kit.facts.datasets import WIKITEXT2  # noqa: E402  (published sizes live there, with sources)

WIKITEXT2_TRAIN_TOKENS = WIKITEXT2.sizes["train"]
WIKITEXT2_VOCAB = WIKITEXT2.sizes["vocab"]


def _lstm_params(params: dict) -> dict:
    preset = LSTM_PRESETS.get(params.get("preset", "apex-2018"), LSTM_PRESETS["apex-2018"])
    return {**preset, **{k: v for k, v in params.items() if v is not None}}


def lstm_forward_flops_per_token(params: dict) -> float:
    """Forward FLOPs per token (MACs x2): the LSTM layers and the decoder over the vocabulary."""
    p = _lstm_params(params)
    h, e, layers = p["nhid"], p["emsize"], p["nlayers"]
    per_token = 0.0
    for i in range(layers):
        inp = e if i == 0 else h
        per_token += 2 * 4 * (inp + h) * h
    return per_token + 2 * h * WIKITEXT2_VOCAB  # decoder


def lstm_train_flops(params: dict) -> float:
    """Rough training FLOPs for one LSTM epoch (time estimates only)."""
    p = _lstm_params(params)
    tokens = WIKITEXT2_TRAIN_TOKENS
    if p.get("max_batches"):
        tokens = min(tokens, p["max_batches"] * p["batch_size"] * p["bptt"])
    return 3 * lstm_forward_flops_per_token(p) * tokens * (p.get("epochs") or 1)


def lstm_eval_flops(params: dict) -> float:
    """Rough forward FLOPs of one repeat's evaluation (time estimates only): the
    validation set after each epoch and the test set once, each cut to ``max_batches``
    chunks of ``bptt`` x ``eval_batch_size`` tokens when that is set (as training is)."""
    p = _lstm_params(params)

    def tokens(split: str) -> int:
        n = WIKITEXT2.sizes[split]
        return min(n, p["max_batches"] * p["bptt"] * p["eval_batch_size"]) if p.get("max_batches") else n

    return lstm_forward_flops_per_token(p) * (tokens("valid") * (p.get("epochs") or 1) + tokens("test"))


#: GPT-style decoder presets for ``kit run --suite gpt`` (kit.bench.gpt).
#: Sources and reasons, per preset:
#:
#: - "gpt2-small": GPT-2 small's shape, d_model 768, 12 layers, 12 heads, context 1024
#:   (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners", table 2;
#:   Hugging Face ``gpt2`` config.json: n_embd 768, n_layer 12, n_head 12, n_positions 1024).
#:   With WikiText-2's vocabulary (33,278 padded to 33,280) and an untied head: 137M parameters.
#: - "gpt-1b": d_model 2048 x 16 layers, a ~1B decoder
#:   (944M parameters at vocabulary 33,280, batch 16 x 1024 tokens). 16 heads of 128: the
#:   head size of GPT-3 XL / 2.7B (Brown et al. 2020, table 2.1), FlashAttention's fast path.
#: - "gpt-2b": d_model 4096 x 8 layers, a ~2B decoder (1.9B parameters): wide
#:   layers, where fp8 pays most. 32 heads of 128 (LLaMA-7B's width and heads: Touvron et
#:   al. 2023, table 2).
#: - "tiny": the kit's own CPU check size (make test, --smoke); measures nothing useful.
#:
#: Batch 16 x 1024 tokens: 16k tokens a step, enough to keep an H200 busy at these sizes. ``steps`` is the kit's choice of timed steps per
#: repeat in throughput mode (after ``warmup_steps`` untimed ones): about 2-5 s of steady
#: state per repeat in bf16 on an H200, so that a whole run of the three presets x six
#: precisions x 3 repeats stays within minutes (strict fp32 dominates: ~4 s a step on
#: gpt-2b). ``convergence_steps``: see kit.bench.gpt.config.CONVERGENCE_STEPS_REASON.
#: Each fits one 141 GB H200 with room to spare: at most ~2B parameters x 16 bytes
#: (fp32 weights, gradients and AdamW's two moments) = 30 GB plus activations.
GPT_PRESETS = {
    "gpt2-small": {"d_model": 768, "n_layers": 12, "n_heads": 12, "seq_len": 1024, "batch_size": 16,
                   "steps": 30, "warmup_steps": 5, "convergence_steps": 400},
    "gpt-1b": {"d_model": 2048, "n_layers": 16, "n_heads": 16, "seq_len": 1024, "batch_size": 16,
               "steps": 10, "warmup_steps": 3, "convergence_steps": 400},
    "gpt-2b": {"d_model": 4096, "n_layers": 8, "n_heads": 32, "seq_len": 1024, "batch_size": 16,
               "steps": 8, "warmup_steps": 3, "convergence_steps": 400},
    "tiny": {"d_model": 64, "n_layers": 2, "n_heads": 4, "seq_len": 32, "batch_size": 4,
             "steps": 4, "warmup_steps": 1, "convergence_steps": 40},
}
#: The presets a run measures when none is named (tiny is for checks only).
GPT_DEFAULT_PRESETS = ("gpt2-small", "gpt-1b", "gpt-2b")
#: The vocabulary is padded to a multiple of 64 (33,278 -> 33,280): the LM head's GEMM
#: then tiles evenly for tensor cores and fp8 (torch._scaled_mm needs dimensions that are
#: multiples of 16). Karpathy's nanoGPT pads GPT-2's 50,257 to 50,304 (a multiple of 64) for
#: the same reason (model.py, GPTConfig: "padded up to nearest multiple of 64 for efficiency").
GPT_PAD_VOCAB_TO = 64


def gpt_matmul_params(d_model: int, n_layers: int, vocab: int) -> int:
    """Weights that take part in a matmul per token: 12 d^2 per block (QKV 3d^2, output d^2,
    MLP 8d^2; no biases) plus the untied LM head (d x vocab). Embeddings are lookups."""
    return 12 * d_model * d_model * n_layers + d_model * vocab


def gpt_train_flops_per_token(d_model: int, n_layers: int, seq_len: int, vocab: int) -> int:
    """Model FLOPs of one training token (forward + backward): 6 N + 12 L d T.

    N = :func:`gpt_matmul_params`; 12 L d T is attention's QK^T and AV (2 x 2 T d per
    layer forward, x3 with the backward), counted without the causal halving. This is
    the "model FLOPs" of PaLM's MFU (Chowdhery et al. 2022, appendix B: 6N + 12LHQT) and
    of nanoGPT's ``estimate_mfu``; recomputation is never counted."""
    return 6 * gpt_matmul_params(d_model, n_layers, vocab) + 12 * n_layers * d_model * seq_len
