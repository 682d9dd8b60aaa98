"""Package discovery for setuptools (the metadata is in pyproject.toml).

Every package under ``filecache/`` is found (data-only folders such as ``queries/`` too), and
every package under ``adapters/`` is installed below ``filecache.adapters`` (``package-dir`` in
pyproject.toml maps the folder), so a new subpackage reaches the wheel without being listed
anywhere.
"""

from setuptools import find_namespace_packages, setup


def below(name: str, folder: str) -> list[str]:
    """``name`` and every package in ``folder`` (the package's source) as ``name.sub...``."""
    found = find_namespace_packages(folder, exclude=["__pycache__", "*.__pycache__"])
    return [name, *(f"{name}.{sub}" for sub in found)]


setup(packages=[*below("filecache", "filecache"), *below("filecache.adapters", "adapters")])
