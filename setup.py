"""Which packages install (the rest of the packaging is in pyproject.toml): every folder under
``genolong/``, modules and shipped data alike (the promoter model, the sample genome, the DeepSEA
names), and the presets in ``configs/`` at the top of the repository, where users read them, as
``genolong.configs``."""

from setuptools import find_namespace_packages, setup

PACKAGES = [*find_namespace_packages(include=["genolong", "genolong.*"], exclude=["*.__pycache__"]),
            "genolong.configs"]

if __name__ == "__main__":
    setup(packages=PACKAGES, package_dir={"genolong.configs": "configs"})
