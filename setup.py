"""Lists every package under the layout folders mapped in pyproject.toml's package-dir.

setuptools cannot discover subpackages of a namespace spread over several folders on its own,
so they are enumerated here from the mapping rather than listed by hand.
"""

import tomllib
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).parent
mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
packages = []
for name, folder in mapping.items():
    base = ROOT / folder
    for init in sorted(base.rglob("__init__.py")):
        relative = init.parent.relative_to(base)
        packages.append(".".join([name, *relative.parts]) if relative.parts else name)

setup(packages=packages)
