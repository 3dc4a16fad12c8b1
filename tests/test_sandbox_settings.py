"""The sandbox settings: Claude Code's key names, caliban's ``[sandbox]`` table, layering
(lists joined, later scalars win, ``--sandbox`` last), and what a project may set in a
folder that is not trusted (only what narrows)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from caliban.claude_code.settings import load_claude_settings
from caliban.config.settings import SandboxSettings, load_config
from caliban.errors import ConfigError
from caliban.sandbox.session import session_config
from caliban.sandbox.settings import SandboxLayer, resolve, widening_keys

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code" / "sandbox_settings_keys.json"


def test_caliban_reads_claude_codes_key_names() -> None:
    schema = json.loads(FIXTURE.read_text())
    fields = SandboxSettings.model_fields
    ours = set(fields) - {"mode"}  # mode is caliban's own (Codex's --sandbox)
    assert ours <= set(schema["sandbox"])
    assert set(fields["network"].annotation.model_fields) <= set(schema["network"])  # type: ignore[union-attr]
    assert set(fields["filesystem"].annotation.model_fields) <= set(schema["filesystem"])  # type: ignore[union-attr]
    config = resolve([SandboxLayer(source="x", table={"enabled": True})], trusted=True)
    defaults = schema["defaults"]
    assert config.fail_if_unavailable is defaults["failIfUnavailable"]
    assert config.auto_allow_bash is defaults["autoAllowBashIfSandboxed"]
    assert config.allow_unsandboxed is defaults["allowUnsandboxedCommands"]
    assert resolve([], trusted=True).enabled is defaults["enabled"]


def _layer(table: dict[str, Any], *, project: bool = False, source: str = "s") -> SandboxLayer:
    return SandboxLayer(source=source, table=table, project=project)


def test_layering_joins_lists_and_later_scalars_win() -> None:
    config = resolve(
        [
            _layer({"enabled": True, "network": {"deniedDomains": ["a.test"]}}, source="user"),
            _layer(
                {"autoAllowBashIfSandboxed": False, "network": {"deniedDomains": ["b.test"]}},
                source="project",
            ),
        ],
        trusted=True,
    )
    assert config.mode == "workspace-write" and config.sources == ("user",)
    assert config.denied_domains == ("a.test", "b.test")
    assert config.auto_allow_bash is False


def test_mode_beats_enabled_and_the_flag_beats_both() -> None:
    layers = [_layer({"enabled": True, "mode": "read-only"})]
    assert resolve(layers, trusted=True).mode == "read-only"
    config = resolve(layers, flag="off", trusted=True)
    assert config.mode == "off" and not config.enabled and config.sources == ("--sandbox",)


def test_auto_allow_left_unset_is_true_only_when_trusted() -> None:
    layers = [_layer({"enabled": True})]
    assert resolve(layers, trusted=True).auto_allow_bash is True
    assert resolve(layers, trusted=False).auto_allow_bash is False
    explicit = [_layer({"enabled": True, "autoAllowBashIfSandboxed": True})]
    assert resolve(explicit, trusted=False).auto_allow_bash is True  # the user said so


def test_an_untrusted_project_may_narrow_only() -> None:
    user = _layer({"enabled": True, "network": {"deniedDomains": ["x.test"]}}, source="user")
    project = _layer(
        {
            "enabled": False,
            "autoAllowBashIfSandboxed": True,
            "allowUnsandboxedCommands": False,
            "failIfUnavailable": True,
            "excludedCommands": ["docker:*"],
            "network": {"allowedDomains": ["evil.test"], "deniedDomains": ["y.test"],
                        "allowAllUnixSockets": True},
            "filesystem": {"allowWrite": ["~"], "denyRead": ["secrets"]},
        },
        project=True,
    )  # fmt: skip
    config = resolve([user, project], trusted=False)
    assert config.mode == "workspace-write"  # not turned off
    assert config.auto_allow_bash is False
    assert config.allow_unsandboxed is False and config.fail_if_unavailable is True  # narrowing
    assert config.excluded_commands == () and config.allowed_domains == ()
    assert config.allow_write == () and config.allow_all_unix_sockets is False
    assert config.denied_domains == ("x.test", "y.test") and config.deny_read == ("secrets",)
    trusted = resolve([user, project], trusted=True)
    assert trusted.mode == "off" and trusted.allowed_domains == ("evil.test",)


def test_an_untrusted_project_may_turn_it_on_or_stricter() -> None:
    on = resolve([_layer({"enabled": True}, project=True)], trusted=False)
    assert on.mode == "workspace-write" and on.auto_allow_bash is False
    user = _layer({"mode": "read-only"})
    looser = resolve([user, _layer({"mode": "workspace-write"}, project=True)], trusted=False)
    assert looser.mode == "read-only"


def test_widening_keys_with_nothing_known_below_drops_all_that_could_widen() -> None:
    table = {"enabled": False, "mode": "workspace-write", "failIfUnavailable": True}
    assert widening_keys(table, None) == ["enabled", "mode"]
    assert widening_keys(table, {}) == []  # below is off: nothing to widen


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_caliban_toml_sandbox_table(project: Path, isolated_dirs: Path) -> None:
    _write(
        isolated_dirs / "config" / "config.toml",
        '[sandbox]\nenabled = true\n[sandbox.network]\nallowedDomains = ["pypi.org"]\n',
    )
    _write(
        project / ".caliban" / "config.toml",
        '[sandbox]\nenabled = false\nexcludedCommands = ["docker:*"]\n'
        '[sandbox.network]\ndeniedDomains = ["evil.test"]\n',
    )
    loaded = load_config(project, trusted=False)
    assert any("sandbox.enabled" in n and "sandbox.excludedCommands" in n for n in loaded.untrusted)
    claude = load_claude_settings(project, trusted=False)
    config = session_config(loaded, claude, flag=None, trusted=False)
    assert config.enabled and config.allowed_domains == ("pypi.org",)
    assert config.denied_domains == ("evil.test",) and config.excluded_commands == ()


def test_claude_code_settings_files(project: Path, isolated_dirs: Path) -> None:
    _write(
        isolated_dirs / "claude" / "settings.json",
        json.dumps({"sandbox": {"enabled": True, "autoAllowBashIfSandboxed": True}}),
    )
    _write(
        project / ".claude" / "settings.json",
        json.dumps(
            {
                "sandbox": {
                    "excludedCommands": ["make"],
                    "network": {"allowedDomains": ["evil.test"]},
                    "filesystem": {"denyRead": ["~/.aws"]},
                    "ignoreViolations": {"*": ["/x"]},  # Claude Code's own: ignored
                }
            }
        ),
    )
    loaded = load_config(project, trusted=False)
    claude = load_claude_settings(project, trusted=False)
    assert any(
        "sandbox.excludedCommands" in w and "sandbox.network.allowedDomains" in w
        for w in claude.warnings
    )
    config = session_config(loaded, claude, flag=None, trusted=False)
    assert config.enabled and config.auto_allow_bash  # the user's own file said so
    assert config.excluded_commands == () and config.allowed_domains == ()
    assert config.deny_read == ("~/.aws",)
    trusted = session_config(
        loaded, load_claude_settings(project, trusted=True), flag=None, trusted=True
    )
    assert trusted.excluded_commands == ("make",) and trusted.allowed_domains == ("evil.test",)


def test_a_wrong_type_names_the_file_and_key(project: Path, isolated_dirs: Path) -> None:
    _write(project / ".caliban" / "config.toml", '[sandbox]\nmode = "sideways"\n')
    with pytest.raises(ConfigError, match=r"config.toml:2: sandbox.mode"):
        load_config(project, trusted=True)
