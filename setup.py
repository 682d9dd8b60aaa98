"""Package discovery for setuptools (the metadata is in pyproject.toml).

Every package under ``filecache/`` is found, and every package under ``adapters/`` is installed
below ``filecache.adapters`` (``package-dir`` in pyproject.toml maps the folder), so a new
subpackage reaches the wheel without being listed anywhere.
"""

from setuptools import find_packages, setup

packages = find_packages(include=["filecache", "filecache.*"])
adapters = [f"filecache.adapters.{name}" for name in find_packages("adapters")]
setup(packages=[*packages, "filecache.adapters", *adapters])
