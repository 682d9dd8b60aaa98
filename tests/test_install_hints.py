"""Every install hint names the distribution (``filecache`` on the package index is an unrelated
project): the PostgreSQL store's said ``pip install 'filecache[postgres]'``."""

from __future__ import annotations

import re
from pathlib import Path

from filecache.adapters.mcp_sessions import MCP_INSTALL_HINT

from filecache.extras import DISTRIBUTION, EXTRA_HINT
from filecache.store.store_url import POSTGRES_INSTALL_HINT

REPO = Path(__file__).parents[1]


def test_install_hints_name_the_distribution() -> None:
    assert DISTRIBUTION == "filecache-agent"
    assert "pip install 'filecache-agent[postgres]'" in POSTGRES_INSTALL_HINT
    assert "pip install 'filecache-agent[mcp]'" in MCP_INSTALL_HINT
    assert "pip install 'filecache-agent[frameworks]'" in EXTRA_HINT


def test_extra_hints_work_from_a_clone_too() -> None:
    """The distribution is not on the package index yet: a user with a clone needs the path
    form, and the LiteLLM callback's hint names its own extra, not ``frameworks``."""
    from filecache.adapters.gateway.proxy import INSTALL_HINT

    from filecache.extras import install_hint, requires

    for hint, extra in ((POSTGRES_INSTALL_HINT, "postgres"), (MCP_INSTALL_HINT, "mcp"),
                        (INSTALL_HINT, "gateway")):  # fmt: skip
        assert f"pip install '.[{extra}]'" in hint, hint
    try:
        with requires("no_such_module_fc", "litellm", "the LiteLLM callback", extra="litellm"):
            import no_such_module_fc  # type: ignore[import-not-found]  # noqa: F401
    except ModuleNotFoundError as exc:
        said = str(exc)
    assert install_hint("litellm") in said and "frameworks" not in said


def test_no_source_names_an_extra_of_the_wrong_distribution() -> None:
    wrong = re.compile(r"""pip install ['"]?filecache\[""")
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for folder in ("filecache", "adapters")
        for path in sorted((REPO / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if wrong.search(line)
    ]
    assert found == []
