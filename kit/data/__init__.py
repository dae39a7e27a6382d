"""Data sets: each one entry of kit.data.registry (a descriptor in kit/data/sets/: CIFAR-100,
WikiText-2), real (downloaded, verified) or synthetic.

The interface, by module (numpy is imported only inside the loaders)::

    kit.data.registry   DataSet, all_datasets(), dataset(name): the data sets and what each does
    kit.data.sets.NAME  DATASET = DataSet(facts, help, load, synthetic, verify, ...): one data set
    kit.data.cifar      load_cifar100(data_dir, source="real"|"synthetic", seed=0) -> CifarData
    kit.data.wikitext   load_wikitext2(data_dir, source=..., seed=0, pad_vocab_to=1) -> Corpus
    kit.data.forms      CifarData, Corpus, Dictionary: what the readers return
    kit.data.service    describe(data_dir, dataset, source) -> dict      # provenance for results
                        fetch_dataset(name, data_dir, urls=None) -> dict  # `kit data fetch`
                        verify_dataset(name, data_dir) -> dict            # `kit data verify`
                        data_info(data_dir) -> dict                       # `kit data info`
    kit.data.files      resolve_data_dir(data_dir) -> Path   # arg, else $KIT_DATA_DIR, else ./data

Modules: ``files`` (folder, checksums), ``fetch`` (mirrors, atomic download),
``cifar`` and ``wikitext`` (readers), ``synthetic`` (generators), ``registry`` and ``sets``
(the data sets' descriptors), ``service``.
"""
