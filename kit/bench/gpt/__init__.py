"""``kit run --suite gpt``: a GPT-style decoder-only transformer language model on
WikiText-2 token ids, in fp32, TF32, fp16, bf16 and fp8 (torchao float8).

    config   presets (kit.facts.models.GPT_PRESETS) + overrides, validated (torch-free)
    model    the decoder: pre-LayerNorm blocks, causal SDPA, GELU MLP, untied LM head
    data     random windows of the token stream, on the device
    fp8      torchao's float8 training recipes, LM head kept in bf16
    train    one repeat: build, compile, warm up, time steady steps (one code path per mode)
    suite    run_cell(spec, ctx): one preset x one precision, N repeats
"""

from kit.bench.gpt import plan
from kit.bench.gpt.options import GptOptions
from kit.bench.gpt.config import resolve
from kit.results.suites import Parity, Suite

SUITE = Suite(
    options=GptOptions,
    name="gpt", help="the GPT-style transformer on Wikitext-2; not in all: heavy, and it needs a recent GPU",
    title="Wikitext-2 GPT decoder ({engine})", subject="GPT",
    models=("tiny", "gpt2-small", "gpt-1b", "gpt-2b"), model_option="gpt_presets", model_kind="GPT preset",
    engines=("kit",), plan=plan.cells, work=plan.work, check=resolve, splits=plan.splits,
    runner="kit.bench.gpt.suite",
    #: the suite's question: is fp8 within 1% of bf16's held-out loss after the same steps?
    parity=Parity("held-out loss", base="amp-bf16", tolerance=0.01, gap="either"),
    datasets=("wikitext2",), unit="tokens", order=3, data_parallel=("kit",), vs_bf16=True,
    smoke={"gpt_presets": ["tiny"]},
    revisions={"kit": (2, ((1, "per-block torch.compile, fused AdamW, autocast or torchao float8 linears"),
                             (2, "AOTAutograd's on-disk cache off under autocast: no precision reuses blocks compiled "
                                 "under another's autocast dtype (PyTorch 2.11's cache key lacks it)")))},
)
