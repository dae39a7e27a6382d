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
#: The seed article ran 30 epochs. See ../shared/field-notes.md ("NVIDIA Apex").
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
