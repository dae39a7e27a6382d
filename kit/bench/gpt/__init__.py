"""``kit run --suite gpt``: a GPT-style decoder-only transformer language model on
WikiText-2 token ids, in fp32, TF32, fp16, bf16 and fp8 (torchao float8).

    config   presets (kit.facts.models.GPT_PRESETS) + overrides, validated (torch-free)
    model    the decoder: pre-LayerNorm blocks, causal SDPA, GELU MLP, untied LM head
    data     random windows of the token stream, on the device
    fp8      torchao's float8 training recipes, LM head kept in bf16
    train    one repeat: build, compile, warm up, time steady steps (one code path per mode)
    suite    run_cell(spec, ctx): one preset x one precision, N repeats
"""
