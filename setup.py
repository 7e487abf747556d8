"""Which packages install (the rest of the packaging is in pyproject.toml): every package under
``genolong/``, found, and the presets in ``configs/`` at the top of the repository, where users
read them, as ``genolong.configs``."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["genolong", "genolong.*"]), "genolong.configs"],
      package_dir={"genolong.configs": "configs"})
