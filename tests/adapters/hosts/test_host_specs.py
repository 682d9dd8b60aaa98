"""The hosts as one table (``host_specs.SPECS``): everything that names a host derives from it,
and a new ``HostSpec`` (with its module) is all a host needs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import click
from filecache.adapters.hosts import hook_client, registry
from filecache.adapters.hosts.host_specs import HOST_NAMES, SPECS, spec

from filecache import stats
from filecache.cli import main


def test_every_list_of_hosts_is_the_table() -> None:
    assert registry.HOSTS == HOST_NAMES == hook_client.HOSTS
    assert HOST_NAMES == ("claude-code", "codex", "opencode", "gemini-cli", "kilo")
    for command in ("install", "uninstall", "hook"):
        param = next(p for p in main.commands[command].params if p.name in ("host", "hosts"))
        assert isinstance(param.type, click.Choice)
        assert tuple(param.type.choices) == HOST_NAMES
    assert stats.HOST_LABELS == {s.name: s.display for s in SPECS}  # the CLI registered them


def test_each_spec_names_a_module_that_speaks_for_it() -> None:
    for each in SPECS:
        module = registry.host_module(each.name)
        assert (module.HOST_NAME, module.DISPLAY_NAME) == (each.name, each.display)
        assert callable(module.install) and callable(module.installed)
        assert callable(module.run_hook)
        assert hook_client.ANSWER_TIMEOUT[each.name] == each.answer_timeout
        if each.hook_timeout is not None:  # the client gives up before the host kills it
            assert each.answer_timeout < each.hook_timeout
    assert spec("codex").told is not None and spec("codex").told() in spec("codex").told()


NEW_HOST = textwrap.dedent(
    """
    import json, sys, types
    from pathlib import Path
    import filecache.adapters.hosts.host_specs as table

    # the host's module (a file adapters/hosts/fakehost.py in a real host)
    module = types.ModuleType("filecache.adapters.hosts.fakehost")
    sys.modules[module.__name__] = module
    module.HOST_NAME, module.DISPLAY_NAME = "fakehost", "Fake Host"
    module.install = lambda *, scope, uninstall, cwd: f"fake install {scope} {uninstall}"
    module.installed = lambda cwd: []
    module.run_hook = lambda args, payload: b"fake answer to " + payload
    table.SPECS = (*table.SPECS, table.HostSpec(
        name="fakehost", display="Fake Host", scopes=("user",), events={"AfterTool": None},
        hook_timeout=10, answer_timeout=5.0, answers="-", transcript="-", told=None,
        module="fakehost",
    ))
    table.HOST_NAMES = tuple(s.name for s in table.SPECS)

    from click.testing import CliRunner
    from filecache.cli import main
    from filecache.adapters.hosts import hook_client, registry
    from filecache.stats import host_of

    out = {
        "install": CliRunner().invoke(main, ["install", "fakehost"]).output,
        "hook": CliRunner().invoke(main, ["hook", "fakehost"], input="{}").output,
        "client": hook_client.in_process("fakehost", [], b"{}").decode(),
        "timeout": hook_client.ANSWER_TIMEOUT["fakehost"],
        "registry": "fakehost" in registry.HOSTS,
        "stats": host_of("fakehost:s1@0123abcd"),
    }
    print(json.dumps(out))
    """
)


def test_a_new_spec_is_all_a_host_needs() -> None:
    done = subprocess.run(
        [sys.executable, "-c", NEW_HOST], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    import json

    assert json.loads(done.stdout) == {
        "install": "fake install user False\n",
        "hook": "fake answer to {}",
        "client": "fake answer to {}",
        "timeout": 5.0,
        "registry": True,
        "stats": ["Fake Host", "s1"],
    }
