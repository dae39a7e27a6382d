"""Data set facts: file names, checksums, download mirrors and published sizes.

Every value here comes from outside the kit; each carries its source. The
readers in ``kit.data`` take a :class:`DatasetFacts` (these by default) so tests
can hand them a small fixture's checksum and sizes instead of the real ones. Each
data set's descriptor (kit/data/sets/, found by kit.data.registry) names its facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class DatasetFacts:
    #: The kit's name for the data set (``kit data fetch NAME``).
    name: str
    title: str
    #: The archive's file name, exactly as the kit expects it in the data folder.
    filename: str
    #: Lower-case hex MD5 of the archive (always known for the real files).
    md5: str
    #: Lower-case hex SHA-256 of the archive, where a public source records one.
    sha256: str | None
    #: URLs tried in order by ``kit data fetch``; every one serves the same bytes.
    mirrors: tuple[str, ...]
    homepage: str
    #: Published sizes the real data must match; ``None`` skips the check (fixtures).
    sizes: Mapping[str, int] | None = field(default=None)
    #: The folder name inside the archive that holds the members the kit reads.
    member_dir: str = ""
    #: Names (inside ``member_dir``) the kit reads; nothing else is ever opened.
    members: tuple[str, ...] = ()
    licence: str = ""


# ---------------------------------------------------------------------------
# CIFAR-100, "python version"
# ---------------------------------------------------------------------------
CIFAR100 = DatasetFacts(
    name="cifar100",
    title="CIFAR-100 (python version)",
    filename="cifar-100-python.tar.gz",
    # MD5: torchvision, torchvision/datasets/cifar.py, class CIFAR100, ``tgz_md5``
    # (github.com/pytorch/vision).
    md5="eb9058c3a382ffc7106e4002c42a8d85",
    # SHA-256: Keras, keras/src/datasets/cifar100.py, ``file_hash`` passed to
    # get_file for the same URL (github.com/keras-team/keras); torchvision's
    # prototype datasets (torchvision/prototype/datasets/_builtin/cifar.py,
    # ``HttpResource(..., sha256=...)``) record the same value.
    sha256="85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7",
    mirrors=(
        # Primary: the data set's home page, https://www.cs.toronto.edu/~kriz/cifar.html
        # (the URL Keras and torchvision download from).
        "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
        # The same University of Toronto server under its utoronto.ca name; used by
        # several public loaders (e.g. the ``vision_data`` CIFAR100 class that pairs
        # it with the md5 above). Plain http: the checksum is what we trust.
        "http://www.cs.utoronto.ca/~kriz/cifar-100-python.tar.gz",
    ),
    homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
    # Sizes: the home page above ("50000 training images and 10000 test images",
    # "100 classes ... grouped into 20 superclasses", 32x32 colour images).
    sizes={"train": 50_000, "test": 10_000, "classes": 100, "coarse_classes": 20},
    # Archive layout: cifar-100-python/{train,test,meta} (torchvision's
    # ``base_folder``, ``train_list``, ``test_list`` and ``meta`` in cifar.py).
    member_dir="cifar-100-python",
    members=("train", "test", "meta"),
    licence="No licence stated; cite Krizhevsky, 'Learning Multiple Layers of Features from Tiny Images', 2009.",
)

#: Image geometry of every CIFAR image (home page above): 32x32 pixels, 3 channels,
#: stored channel-major as 3072 bytes per row of ``data``.
CIFAR_IMAGE_SHAPE = (32, 32, 3)


# ---------------------------------------------------------------------------
# WikiText-2, word level, v1 (tokenised, with <unk>)
# ---------------------------------------------------------------------------
WIKITEXT2 = DatasetFacts(
    name="wikitext2",
    title="WikiText-2 (word level, v1)",
    filename="wikitext-2-v1.zip",
    # MD5: torchtext, torchtext/datasets/wikitext2.py, ``MD5`` beside ``URL``
    # (github.com/pytorch/text), checked against that file for this kit.
    md5="542ccefacc6c27f945fb54453812b3cd",
    # No public SHA-256 found for this zip; the MD5 above is what is verified.
    sha256=None,
    mirrors=(
        # Stephen Merity's (the data set's author) own host, where the files moved
        # after the Salesforce/MetaMind S3 bucket went away; used by many current
        # loaders that list it first, e.g. public word2vec/LM scripts with
        # ``_WIKITEXT2_URLS = ("https://wikitext.smerity.com/wikitext-2-v1.zip", <the S3 URL>)``.
        "https://wikitext.smerity.com/wikitext-2-v1.zip",
        # The original address: torchtext/datasets/wikitext2.py ``URL``, Keras' BERT
        # pre-training example, and pytorch/examples-era scripts.
        "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip",
        # The Internet Archive's copy of the original address (``id_`` returns the
        # archived bytes unmodified). Public loaders fall back to a Wayback snapshot
        # of "the same file" once the S3 URL died; the MD5 check decides.
        "https://web.archive.org/web/2019id_/https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip",
    ),
    homepage="https://blog.salesforceairesearch.com/the-wikitext-long-term-dependency-language-modeling-dataset/",
    # Sizes: Merity et al., "Pointer Sentinel Mixture Models" (arXiv:1609.07843),
    # Table 1, WikiText-2 column: tokens 2,088,628 / 217,646 / 245,569, vocabulary
    # 33,278. pytorch/examples word_language_model/data.py reproduces exactly these
    # counts because it appends <eos> to every line (its ``Corpus.tokenize``: ``line.split() + ['<eos>']``).
    sizes={"train": 2_088_628, "valid": 217_646, "test": 245_569, "vocab": 33_278},
    # Archive layout: wikitext-2/wiki.{train,valid,test}.tokens (torchtext's
    # ``_EXTRACTED_FILES`` in wikitext2.py).
    member_dir="wikitext-2",
    members=("wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"),
    licence="Creative Commons Attribution-ShareAlike (CC BY-SA 3.0), per the home page.",
)

#: Lines per split of the .tokens files: torchtext/datasets/wikitext2.py ``NUM_LINES``.
#: The synthetic corpus uses them to place <eos> at realistic line lengths.
WIKITEXT2_LINES = {"train": 36_718, "valid": 3_760, "test": 4_358}
