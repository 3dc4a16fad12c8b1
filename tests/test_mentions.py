"""``@path`` mentions: one grammar for the REPL's attachments, a command's file Reads and
path completion."""

from __future__ import annotations

from pathlib import Path

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from caliban.repl.attach import attach
from caliban.repl.complete import ReplCompleter
from caliban.tools.base import ToolEnv
from caliban.util.mentions import mention_being_typed, mentions


def test_the_grammar() -> None:
    text = (
        "see @a.py, @dir/b\\ c.txt and @a.py again; mail me@example.com, "
        "`@decorator` is code, (@d.md) is."
    )
    assert mentions(text) == ["a.py", "dir/b c.txt", "d.md"]
    assert mentions("@x`y`") == ["x"]  # a path ends at a backtick
    assert mention_being_typed("look at @src/my\\ fi") == "src/my\\ fi"
    assert mention_being_typed("look at @") == ""
    assert mention_being_typed("`@deco") is None
    assert mention_being_typed("me@host") is None


def test_the_repl_attaches_and_completes_what_the_grammar_finds(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("hello\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    message, attachments, problems = attach(
        "read @notes.md, not `@code.py`", ToolEnv(cwd=tmp_path, project_root=tmp_path)
    )
    assert [a.path for a in attachments] == ["notes.md"] and problems == []
    assert "hello" in message.text or any("hello" in p.text for p in message.parts)  # type: ignore[union-attr]
    completer = ReplCompleter(tmp_path)
    found = completer.get_completions(Document("see @no"), CompleteEvent())
    assert [c.text for c in found] == ["notes.md"]
    assert list(completer.get_completions(Document("see `@no"), CompleteEvent())) == []
