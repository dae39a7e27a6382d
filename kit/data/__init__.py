"""Data sets: CIFAR-100 and WikiText-2, real (downloaded, verified) or synthetic.

Public interface (numpy is imported only inside the loaders)::

    load_cifar100(data_dir, source="real"|"synthetic", seed=0) -> CifarData
    load_wikitext2(data_dir, source=..., seed=0, pad_vocab_to=1) -> Corpus
    describe(data_dir, dataset, source) -> dict          # provenance for results
    fetch_dataset(name, data_dir, urls=None) -> dict     # `kit data fetch`
    verify_dataset(name, data_dir) -> dict               # `kit data verify`
    data_info(data_dir) -> dict                          # `kit data info`
    resolve_data_dir(data_dir) -> Path                   # arg, else $KIT_DATA_DIR, else ./data

Modules: ``files`` (folder, checksums), ``fetch`` (mirrors, atomic download),
``cifar`` and ``wikitext`` (readers), ``synthetic`` (generators), ``service``.
"""

from __future__ import annotations

from kit.data.cifar import CifarData, load_cifar100
from kit.data.files import resolve_data_dir
from kit.data.service import data_info, dataset_facts, describe, fetch_dataset, verify_dataset
from kit.data.wikitext import Corpus, Dictionary, load_wikitext2

__all__ = [
    "CifarData",
    "Corpus",
    "Dictionary",
    "data_info",
    "dataset_facts",
    "describe",
    "fetch_dataset",
    "load_cifar100",
    "load_wikitext2",
    "resolve_data_dir",
    "verify_dataset",
]
