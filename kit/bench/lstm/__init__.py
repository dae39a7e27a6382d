"""The Wikitext-2 LSTM suite: the kit's own implementation of the model and
training loop of NVIDIA Apex's (deleted) ``examples/word_language_model``.

Modules, in the order a cell uses them::

    config.py    preset + command-line overrides -> LSTMConfig (validated)
    batching.py  token stream -> (rows, batch) columns -> bptt chunks
    model.py     embedding -> dropout -> LSTM x nlayers -> dropout -> decoder
    train.py     one repeat: epochs of truncated-BPTT SGD, evaluation, timing
    suite.py     run_cell(spec, ctx): data, precision check, repeats -> CellResult
"""
