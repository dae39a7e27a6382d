"""Build hook (the project's metadata is in pyproject.toml).

The reference bundles (``references/<name>/*.tar.gz``, e.g. the H200 one) are
kept once in the repository, where people find them next to their README and
logs. A wheel carries a copy as package data, ``kit/_references/<name>/``, so
``kit compare mine.tar.gz --against h200`` works from an installed kit and from
any folder; a source checkout (or an editable install) reads ``references/``
in place (:func:`kit.bundle.merge.reference_roots`). A symbolic link would not
do: wheels cannot hold links. The sdist carries ``references/`` (MANIFEST.in),
so a wheel built from it has the bundles too.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

REFERENCES = Path(__file__).resolve().parent / "references"


class build_py_with_references(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads references/ where it is
        for src in sorted(REFERENCES.glob("*/*.tar.gz")):
            dst = Path(self.build_lib) / "kit" / "_references" / src.parent.name / src.name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)


setup(cmdclass={"build_py": build_py_with_references})
