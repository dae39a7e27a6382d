"""The Wikitext-2 LSTM suite: the kit's own implementation of the model and
training loop of NVIDIA Apex's (deleted) ``examples/word_language_model``.

Modules, in the order a cell uses them::

    config.py    preset + command-line overrides -> LSTMConfig (validated)
    batching.py  token stream -> (rows, batch) columns -> bptt chunks
    model.py     embedding -> dropout -> LSTM x nlayers -> dropout -> decoder
    train.py     one repeat: epochs of truncated-BPTT SGD, evaluation, timing
    suite.py     run_cell(spec, ctx): data, precision check, repeats -> CellResult
"""

from kit.bench.lstm import plan
from kit.bench.lstm.options import LstmOptions
from kit.bench.lstm.config import resolve
from kit.results.suites import Parity, Suite

#: Recommended convergence parity tolerance: |ppl(mode) - ppl(fp32)| / ppl(fp32).
#: A kit choice, not a measured fact: mixed precision with a working loss scale
#: should land within the seed-to-seed spread of fp32 training, while a broken
#: scale (underflowing gradients, skipped steps) costs far more than 2%. Revisit
#: once the fp32 seed spread of 30-epoch runs has been measured.
SUITE = Suite(
    options=LstmOptions,
    name="lstm", help="the Wikitext-2 LSTM", title="Wikitext-2 LSTM ({engine})", subject="LSTM",
    models=plan.PRESETS, model_option="presets", model_kind="LSTM preset", engines=plan.ENGINES,
    engine_labels={"kit": "kit engine: Apex's example loop, every kernel launched from Python",
                   "graphed": "graphed engine: the whole step one CUDA graph"},
    plan=plan.cells, work=plan.work, steps=plan.steps, check=resolve, splits=plan.splits, runner="kit.bench.lstm.suite",
    parity=Parity("test perplexity", noun="perplexity", tolerance=0.02),
    datasets=("wikitext2",), unit="tokens", in_all=True, order=2, data_parallel=("kit",),
    data_note=plan.data_note,
    data_parallel_note=("LSTM ranks walk the same batchified token stream (the data is not sharded): "
                        "the throughput is that of N replicas, the statistics those of one"),
    smoke={"presets": ["apex-2018"], "max_batches": 5, "steps": 4, "epochs": 1},
    revisions={
        "kit": (1, ((1, "Apex's word_language_model loop: one eager step per bptt window, per-parameter fp32 SGD"),)),
        "graphed": (1, ((1, "one CUDA graph per bptt window (forward, loss, backward, clipping, SGD), the data on "
                            "the device"),)),
    },
    host_paced=("kit",),
)
