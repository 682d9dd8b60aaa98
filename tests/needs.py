"""``need``: the import rule of the framework tests
(tests/adapters/frameworks/test_frameworks_*.py)."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from types import ModuleType

import pytest

INSTALL = "pip install -e '.[frameworks]'"


def need(module: str, install: str = INSTALL, *, mcp_major: int | None = None) -> ModuleType:
    """Import ``module`` for a test module, or skip it when it is not importable here.

    Under CI (``CI`` set, as ``.ci/run`` does) a missing module fails instead: CI installs every
    framework, so a skip there would hide a test that never ran. ``mcp_major``: the client works
    only with that ``mcp`` major version; under another one the test module is skipped even
    under CI (CI runs it in the venv that has that version: ``.ci/run`` step ``mcp1``).
    """
    have = int(importlib.metadata.version("mcp").split(".")[0]) if mcp_major is not None else 0
    if mcp_major is not None and have != mcp_major:
        pytest.skip(
            f"{module} needs mcp {mcp_major}.x (mcp {have}.x is installed); "
            f".ci/run runs this in its {'mcp1' if mcp_major == 1 else 'test'} step",
            allow_module_level=True,
        )
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        message = f"{module} is not importable ({exc}); install it: {install}"
        if os.environ.get("CI"):
            pytest.fail(f"under CI every framework must be installed: {message}", pytrace=False)
        pytest.skip(message, allow_module_level=True)


def need_program(path: str, install: str) -> str:
    """The program at ``path`` (a host binary such as ``/usr/bin/chromium``), or skip the test
    when it is not there; under CI (``CI`` set) a missing one fails instead: CI installs it."""
    import shutil

    if shutil.which(path):
        return path
    message = f"{path} is not installed; install it: {install}"
    if os.environ.get("CI"):
        pytest.fail(f"under CI {path} must be installed: {message}", pytrace=False)
    pytest.skip(message)
