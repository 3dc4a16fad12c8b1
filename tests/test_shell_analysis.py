"""Bash command lines as permission rules see them (caliban/shell/, permissions/bash_rules.py).

The attacks of issue 14 are replayed through ``decide`` and through the real executable;
understood lines are checked against what real bash runs (differential tests at the end).
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hang import HANG_S, cpu_time

from caliban.calls.effects import command_effects
from caliban.config.settings import PermissionMode
from caliban.permissions.bash_rules import (
    MAX_SUGGESTED_RULES,
    allows,
    deny_matches,
    pattern_matches,
    suggest_rules,
)
from caliban.permissions.policy import Decision, decide
from caliban.permissions.rules import PermissionRules
from caliban.shell import (
    MAX_COMMAND_CHARS,
    NotUnderstood,
    Redirect,
    SimpleCommand,
    Understood,
    analyze,
    line_effects,
    read_paths,
    render,
    written_paths,
)
from caliban.tools.base import BUILTIN

ROOT = Path("/proj")
BASH = "/bin/bash"


def understood(command: str) -> Understood:
    analysis = analyze(command)
    assert isinstance(analysis, Understood), analysis
    return analysis


def argvs(command: str) -> list[tuple[str, ...]]:
    return [one.argv for one in understood(command).commands]


def reason(command: str) -> str:
    analysis = analyze(command)
    assert isinstance(analysis, NotUnderstood), analysis
    return analysis.reason


def bash_decision(
    command: str,
    *,
    allow: tuple[str, ...] = (),
    ask: tuple[str, ...] = (),
    deny: tuple[str, ...] = (),
    mode: PermissionMode = "default",
) -> Decision:
    return decide(
        "Bash",
        command,
        command_effects(analyze(command), ROOT),
        read_only=False,
        origin=BUILTIN,
        mode=mode,
        rules=PermissionRules.parse(allow=allow, ask=ask, deny=deny),
        project_root=ROOT,
    )


# ---------------------------------------------------------------------------- the attacks

ALLOW_GIT_STATUS = ("Bash(git status*)",)
QUOTE_TRICK = "git status $'\\''; touch /tmp/x"
COMMENT_TRICK = "git status #'\ntouch /tmp/x"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (QUOTE_TRICK, [("git", "status", "'"), ("touch", "/tmp/x")]),
        (COMMENT_TRICK, [("git", "status"), ("touch", "/tmp/x")]),
    ],
)
def test_quoting_tricks_do_not_get_past_an_allow_rule(
    command: str, expected: list[tuple[str, ...]]
) -> None:
    assert argvs(command) == expected
    assert bash_decision(command, allow=ALLOW_GIT_STATUS).behavior == "ask"


@pytest.mark.parametrize(
    "command",
    [
        "git status > ~/.bashrc",
        "git status >> ~/.bashrc",
        "git status 2> ~/.bashrc",
        "git status &> /etc/profile",
        "git status >| ../outside",
        "cd /tmp && git status > x",
    ],
)
def test_redirecting_outside_the_project_is_not_allowed_by_a_rule(command: str) -> None:
    assert bash_decision(command, allow=(*ALLOW_GIT_STATUS, "Bash(cd *)")).behavior == "ask"


@pytest.mark.parametrize("command", ["git status 2>&1 >/dev/null", "git status 2>/dev/null | cat"])
def test_redirecting_to_dev_null_is_allowed(command: str) -> None:
    allow = (*ALLOW_GIT_STATUS, "Bash(cat)")
    assert bash_decision(command, allow=allow).behavior == "allow"


def test_redirecting_inside_the_project_is_a_write_the_write_rules_decide() -> None:
    command = "git status > status.txt"
    assert bash_decision(command, allow=ALLOW_GIT_STATUS).behavior == "ask"  # as Write would
    assert bash_decision(command, allow=ALLOW_GIT_STATUS, mode="acceptEdits").behavior == "allow"
    assert bash_decision(command, allow=(*ALLOW_GIT_STATUS, "Edit(./*)")).behavior == "allow"


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("git status $'\\''; rm -rf build", "Bash(rm *)"),
        ("git status #'\nrm -rf build", "Bash(rm *)"),
        ("git status $'\\''; touch /tmp/x", "Bash(touch *)"),
        ("git status #'\ntouch /tmp/x", "Bash(touch *)"),
    ],
)
def test_quoting_tricks_do_not_get_past_a_deny_rule(command: str, rule: str) -> None:
    for mode in ("default", "bypassPermissions"):
        assert bash_decision(command, deny=(rule,), mode=mode).behavior == "deny"


def test_the_allow_rule_still_allows_what_it_names() -> None:
    for command in ("git status", "git status --short", "\"git\" 'status'", "git status ';' x"):
        assert bash_decision(command, allow=ALLOW_GIT_STATUS).behavior == "allow", command


# ---------------------------------------------------------------------------- argv


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git status", [("git", "status")]),
        ("\"git\" 'status'", [("git", "status")]),
        ("g'i't\"\" a\\ b", [("git", "a b")]),
        (r"\rm r\m \"rm\"", [("rm", "rm", '"rm"')]),
        ('echo "a \\$ \\\\ \\` \\" \\x"', [("echo", 'a $ \\ ` " \\x')]),
        ("echo 'it''s' \"it's\"", [("echo", "its", "it's")]),
        ("printf $'a\\tb\\n\\x41\\101\\u0041'", [("printf", "a\tb\nAAA")]),
        ("echo $'\\'' \"'\"", [("echo", "'", "'")]),
        ('echo "a\\\nb"', [("echo", "ab")]),
        ("echo 'a\\\nb'", [("echo", "a\\\nb")]),
        ("echo '#' a#b \\#", [("echo", "#", "a#b", "#")]),
        ("echo '' \"\"", [("echo", "", "")]),
        ("ls *.py [ab].txt ~ ~/x", [("ls", "*.py", "[ab].txt", "~", "~/x")]),
        (
            "find . -name '*.pyc' -exec rm {} \\;",
            [("find", ".", "-name", "*.pyc", "-exec", "rm", "{}", ";")],
        ),
    ],
)
def test_argv_is_what_bash_passes(command: str, expected: list[tuple[str, ...]]) -> None:
    assert argvs(command) == expected


def test_how_commands_are_combined() -> None:
    line = understood("a; b && c || d | e |& f & g\nh")
    assert [(one.argv[0], one.separator) for one in line.commands] == [
        ("a", ";"),
        ("b", "&&"),
        ("c", "||"),
        ("d", "|"),
        ("e", "|&"),
        ("f", "&"),
        ("g", "\n"),
        ("h", ""),
    ]


def test_subshells_groups_and_conditions_are_flattened() -> None:
    assert argvs("(cd sub && make) || { echo failed; exit 1; }") == [
        ("cd", "sub"),
        ("make",),
        ("echo", "failed"),
        ("exit", "1"),
    ]
    assert argvs("if [ -f x ]; then a; elif b; then c; else d; fi") == [
        ("[", "-f", "x", "]"),
        ("a",),
        ("b",),
        ("c",),
        ("d",),
    ]
    assert argvs("while true; do sleep 1; done; until a; do b; done; ! c") == [
        ("true",),
        ("sleep", "1"),
        ("a",),
        ("b",),
        ("c",),
    ]


def test_assignments() -> None:
    line = understood("A=1 B='two words' git diff; C=")
    assert line.commands[0].assignments == ("A=1", "B=two words")
    assert line.commands[0].argv == ("git", "diff")
    assert line.commands[1] == SimpleCommand(argv=(), assignments=("C=",), separator="")


def test_redirections() -> None:
    line = understood("make 2>&1 >build.log 3<in <&- >&2 &>>all.log >|forced < input.txt")
    got = [(r.operator, r.fd, r.target, r.kind) for r in line.commands[0].redirects]
    assert got == [
        (">&", 2, "1", "dup"),
        (">", None, "build.log", "write"),
        ("<", 3, "in", "read"),
        ("<&-", None, "", "dup"),
        (">&", None, "2", "dup"),
        ("&>>", None, "all.log", "write"),
        (">|", None, "forced", "write"),
        ("<", None, "input.txt", "read"),
    ]


def test_a_redirection_binds_to_the_last_command_of_a_list() -> None:
    # The grammar hangs `> f` on the whole list; bash gives it to `echo x` only.
    line = understood("cd /etc && echo x > passwd")
    assert [one.redirects for one in line.commands] == [
        (),
        (Redirect(operator=">", fd=None, target="passwd", kind="write"),),
    ]
    assert argvs("git >out status") == [("git", "status")]
    group = understood("{ a; b; } > both")
    assert all(one.redirects[0].target == "both" for one in group.commands)


def test_heredocs_and_herestrings() -> None:
    line = understood("cat > notes.md <<'EOF'\n# $HOME `id` \\n\nEOF\necho done")
    cat, echo = line.commands
    assert cat.redirects[1].body == "# $HOME `id` \\n\n"
    assert echo.argv == ("echo", "done")
    assert understood("cat <<-END\n\tplain\n\tEND").commands[0].redirects[0].body == "plain\n"
    assert understood("grep x <<< 'a b'").commands[0].redirects[0].body == "a b"


# ---------------------------------------------------------------------------- fails closed

NOT_UNDERSTOOD = [
    ("echo $(id)", "command substitution"),
    ("echo `id`", "command substitution"),
    ('echo "$(id)"', "command substitution"),
    ("diff <(ls a) <(ls b)", "process substitution"),
    ("tee >(wc)", "process substitution"),
    ("echo $HOME", "parameter expansion"),
    ("echo ${x}", "parameter expansion"),
    ('echo "$x"', "parameter expansion"),
    ("echo $((1+2))", "arithmetic expansion"),
    ("((x++))", "(( … ))"),
    ("[[ -f x ]]", "[[ … ]]"),
    ('echo $"hello"', "locale"),
    ("$cmd arg", "parameter expansion"),
    ("r? -rf x", "command name bash would expand"),
    ("/bin/r[m] x", "command name bash would expand"),
    ("{rm,ls} x", "does not parse"),
    ("r{m,s} x", "command name bash would expand"),
    ("~/bin/tool", "command name bash would expand"),
    ("echo {a,b}", "brace expansion"),
    ("touch f{1..3}", "brace expansion"),
    ("eval 'rm -rf x'", "`eval`"),
    ("exec rm x", "`exec`"),
    ("exec >log", "`exec`"),
    ("source env.sh", "`source`"),
    (". env.sh", "`.`"),
    ("command eval x", "`eval`"),
    ("builtin source x", "`source`"),
    ("\\eval x", "`eval`"),
    ("trap 'rm x' EXIT", "`trap`"),
    ("alias ls='rm -rf'", "`alias`"),
    ("hash -p /tmp/evil git", "`hash`"),
    ("shopt -s expand_aliases", "`shopt`"),
    ("enable -f ./x.so x", "`enable`"),
    ("set -k", "`set -k`"),
    ("set -o posix", "`set -o posix`"),
    ("export PATH=/tmp", "assigns variables"),
    ('"export" PATH=/tmp', "assigns variables"),
    ("declare -x A=1", "assigns variables"),
    ("read PATH <<< /tmp", "assigns variables"),
    ("printf -v PATH /tmp", "`printf -v`"),
    ("[ -v 'a[$(id)]' ]", "`[ -v`"),  # bash evaluates the subscript: runs id
    ("test -v x", "`test -v`"),
    ("mapfile lines < f", "assigns variables"),
    ("unset PATH", "unset"),
    ("f() { rm x; }; f", "function definition"),
    ("function f { x; }", "function definition"),
    ("for f in *; do rm $f; done", "`for` or `select` loop"),
    ("for ((i=0;i<3;i++)); do x; done", "C-style `for`"),
    ("case x in a) rm y;; esac", "`case`"),
    ("coproc rm x", "reads as syntax"),
    ("time { rm x; }", "`time` before a compound command"),
    ("x=(a b)", "array assignment"),
    ("a[$(id)]=1 x", "array assignment"),
    ("select x in a; do b; done", "`select` loop"),
    ("a ;; b", "';;'"),
    ("echo 'unterminated", "does not parse"),
    ("echo (", "does not parse"),
    ("cat <>file", "does not parse"),
    ("{fd}>x echo", "does not parse"),
    ("echo hi >&file", "descriptor copy"),
    ("echo hi >&'a\\b'", "descriptor copy"),
    ("echo x > *.txt", "pattern bash would expand"),
    ("echo x > ~bob/.bashrc", "another user's home"),
    ("echo x > ~+/f", "another user's home"),
    ("echo x > a=~/f", "pattern bash would expand"),
    ("cd - && echo x > f", "the working directory cannot be known"),
    ("popd; cat < f", "the working directory cannot be known"),
    ("while mkdir d; do cd d; done > f", "the working directory cannot be known"),
    # nested loops repeat their bodies: following them stops at a bound
    ("while a; do cd x; " * 12 + "echo > f" + "; done" * 12, "cannot be known"),
    ("HOME=/tmp; cd; echo > f", "an assignment to HOME"),
    ("CDPATH=/etc cd ssh", "an assignment to CDPATH"),
    ("cd *; ls", "`cd` to a pattern"),
    ("cat <<EOF\n$HOME\nEOF", "unquoted delimiter"),
    ("cat <<EOF\nx\nEOF \nrm y\nEOF", "end bash finds elsewhere"),
    ("python - <<'EOF'\nprint(1)\nEOF", "text the parser skipped"),  # the grammar drops `-`
    ("echo \\ #; rm -rf x", "backslash between words"),
    ("g'i't\"\"\\ status", "backslash between words"),  # bash: one word, `git status`
    ("echo $'\\\\'\nrm -rf x\necho '", "read differently"),
    ("git sta\\\ntus", "line continuation that joins two words"),
    ("echo $'\\0'", "not plain ASCII"),
    ("echo $'\\xff'", "not plain ASCII"),
    ("echo $'\\u00e9'", "not plain ASCII"),  # depends on the locale
    ("echo a\\\nb", "line continuation that joins two words"),  # bash: `ab`
    ("echo $'\\cA'", "escape $'…' does not define"),
    ("echo a\r", "carriage return"),
    ("echo a\rrm -rf x", "carriage return"),
    ("echo \x00 rm", "NUL byte"),
    ("echo \x1b[2Jsafe", "escape"),
    ("echo \u202egnp.exe", "right-to-left override"),
    ("echo a\u200bb", "zero width space"),
    ("echo\u00a0rm", "no-break space"),
]


@pytest.mark.parametrize(("command", "expected"), NOT_UNDERSTOOD)
def test_what_is_not_understood_says_why(command: str, expected: str) -> None:
    assert expected in reason(command)


@pytest.mark.parametrize("command", [case for case, _ in NOT_UNDERSTOOD])
def test_no_allow_rule_but_bash_itself_allows_what_is_not_understood(command: str) -> None:
    # `Bash(**)` matches any text, but is a pattern: it allows understood lines only.
    assert bash_decision(command, allow=("Bash(**)",)).behavior == "ask"
    assert bash_decision(command, allow=("Bash",)).behavior == "allow"


def test_an_empty_or_comment_only_line_is_not_allowed_by_a_rule() -> None:
    assert understood("# just a comment").commands == ()
    assert bash_decision("  # x", allow=("Bash(*)",)).behavior == "allow"  # Bash(*) is all of Bash
    assert bash_decision("  # x", allow=("Bash(ls*)",)).behavior == "ask"


# ---------------------------------------------------------------------------- adversarial


@pytest.mark.parametrize(
    "command",
    [
        "\\rm -rf build",
        "r\\m -rf build",
        '"rm" -rf build',
        "'r'm -rf build",
        "$'rm' -rf build",
        "$'\\x72\\x6d' -rf build",
        "/bin/rm -rf build",
        "command rm -rf build",
        "command -p rm -rf build",
        "builtin command rm -rf build",
        "env rm -rf build",
        "env -i PATH=/bin A=1 rm -rf build",
        "sudo rm -rf build",
        "sudo -u root -- rm -rf build",
        "nohup rm -rf build &",
        "nice -n 10 rm -rf build",
        "timeout 5 rm -rf build",
        "time rm -rf build",
        "time -p rm -rf build",
        "stdbuf -o0 rm -rf build",
        "ls | xargs rm",
        "find . -name '*.o' -exec rm {} +",
        "bash -c 'rm -rf build'",
        'sh -c "rm -rf build"',
        "bash -lc 'cd x && rm -rf build'",
        "sudo sh -c 'rm -rf build'",
        "bash -c \"bash -c 'rm -rf build'\"",
        "eval 'rm -rf build'",
        "eval rm -rf build",
        "bash <<'EOF'\nrm -rf build\nEOF",
        "sh <<< 'rm -rf build'",
        "echo $(rm -rf build)",
        "echo `rm -rf build`",
        'echo "$(rm -rf build)"',
        "cat <(rm -rf build)",
        "f() { rm -rf build; }; f",
        "for x in a; do rm -rf $x; done",
        "if true; then rm -rf build; fi",
        "(rm -rf build)",
        "{ rm -rf build; }",
        "! rm -rf build",
        "true && rm -rf build",
        "true || rm -rf build",
        "true\nrm -rf build",
        "true;rm -rf build",
        "true&rm -rf build",
        "true|rm -rf build",
        "true |& rm -rf build",
        "rm -rf $HOME",
        "A=1 rm -rf build",
        ">log rm -rf build",
        "rm >/dev/null -rf build",
        "echo \\ #; rm -rf build",
        'cat <<E"OF"\nx\nEOF\nrm -rf build\nEOF',
        "echo x$'\\\\'\nrm -rf build\necho '",
        "echo a\r\nrm -rf build",
        # review-a, round 2: wrappers and shells that got past in bypassPermissions
        "env --split-string='rm -rf build'",
        "env -S'rm -rf build'",
        "busybox rm -rf build",
        "chroot / rm -rf build",
        "unshare -r rm -rf build",
        "setpriv --reuid 0 rm -rf build",
        "nsenter -t 1 rm -rf build",
        "pkexec rm -rf build",
        "systemd-run --user rm -rf build",
        "sg wheel 'rm -rf build'",
        "script -qc 'rm -rf build' /dev/null",
        "ssh -p 22 localhost 'rm -rf build'",
        "parallel rm -rf ::: build",
        "coproc rm -rf build",
        "bash -c -- 'rm -rf build'",
        "bash -o errexit -c 'rm -rf build'",
        "fish -c 'rm -rf build'",
        "tcsh -c 'rm -rf build'",
        "ksh93 -c 'rm -rf build'",
        "pwsh -Command 'rm -rf build'",
        # four shells deep: not looked into, so any deny rule matches
        'bash -c \'bash -c "bash -c \\"bash -c ls\\""\'',
    ],
)
def test_deny_rules_see_through_quoting_wrappers_and_syntax(command: str) -> None:
    for mode in ("default", "bypassPermissions"):
        decision = bash_decision(command, deny=("Bash(rm *)",), mode=mode)
        assert decision.behavior == "deny", (command, analyze(command))


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("{rm,-rf,build}", "Bash(rm *)"),  # brace expansion the grammar cannot parse
        ("{rm,-rf,build} x", "Bash(rm *)"),
        ("rm {-rf,build}", "Bash(rm -rf *)"),
        ("rm -{r,f} build", "Bash(rm -rf *)"),
        ("/bin/r[m] -rf build", "Bash(rm *)"),  # a globbed command name
        ("/usr/bin/r? -rf build", "Bash(rm *)"),
        ("/???/rm -rf build", "Bash(rm *)"),
        ("r* -rf build", "Bash(rm *)"),
        ("sudo /bin/r[m] -rf build", "Bash(rm *)"),
        ("rm -r? build", "Bash(rm -rf *)"),  # a file named -rf makes it rm -rf
        ("X=rm; $X -rf build", "Bash(rm *)"),  # a command name only the shell knows
        ("cat ~/.ssh/id_rsa", "Bash(cat /root/*)"),  # ~ is a directory only bash knows
        ("bash -c '/bin/r[m] -rf build'", "Bash(rm *)"),
    ],
)
def test_deny_rules_over_match_what_they_cannot_read(command: str, rule: str) -> None:
    for mode in ("default", "acceptEdits", "bypassPermissions"):
        decision = bash_decision(command, deny=(rule,), mode=mode)
        assert decision.behavior == "deny", (command, analyze(command))


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("ls *.py", "Bash(rm *)"),
        ("echo {a,b}", "Bash(rm *)"),
        ("rm -f *.o", "Bash(rm -rf *)"),  # the words before the glob already differ
        ("echo $HOME", "Bash(rm *)"),
        ("git add src/*.py", "Bash(git push:*)"),
    ],
)
def test_over_matching_stops_where_the_words_before_an_expansion_differ(
    command: str, rule: str
) -> None:
    decision = bash_decision(command, deny=(rule,), mode="bypassPermissions")
    assert decision.behavior == "allow", (command, analyze(command))


@pytest.mark.parametrize(
    "command",
    [
        "command rm -rf build",
        "env rm x",
        "sudo rm x",
        "nohup git status",
        "time git status",
        "xargs git status",
        "bash -c 'git status'",
        "GIT_EXTERNAL_DIFF=./evil git status",
        "LD_PRELOAD=./evil.so git status",
        "PATH=. git status",
    ],
)
def test_allow_rules_must_match_the_whole_command_wrapper_and_assignments_included(
    command: str,
) -> None:
    assert bash_decision(command, allow=ALLOW_GIT_STATUS).behavior == "ask"


def test_a_standalone_assignment_is_never_allowed_by_a_rule() -> None:
    # `PATH=.; git status` would run ./git.
    assert bash_decision("PATH=.; git status", allow=ALLOW_GIT_STATUS).behavior == "ask"
    both = (*ALLOW_GIT_STATUS, "Bash(PATH=*)")
    assert bash_decision("PATH=.\ngit status", allow=both).behavior == "ask"


def test_look_alike_letters_are_other_commands() -> None:
    for command in ("gіt status", "ｇｉｔ status", "git ѕtatus"):  # Cyrillic, fullwidth
        assert bash_decision(command, allow=ALLOW_GIT_STATUS).behavior == "ask"
    assert bash_decision("ｒｍ -rf x", deny=("Bash(rm *)",)).behavior == "ask"


def test_a_word_with_spaces_does_not_pass_for_two_words() -> None:
    # python 'script.py x' runs a different file than python script.py x.
    allow = ("Bash(python script.py:*)",)
    assert bash_decision("python script.py x", allow=allow).behavior == "allow"
    assert bash_decision("python 'script.py x'", allow=allow).behavior == "ask"
    assert render(("python", "script.py x", "")) == "python 'script.py x' ''"


def test_comments_with_quotes_and_backgrounding() -> None:
    assert argvs('ls # don\'t "stop" ( here\nls -a') == [("ls",), ("ls", "-a")]
    assert bash_decision("git status & git status", allow=ALLOW_GIT_STATUS).behavior == "allow"
    assert bash_decision("git status & rm x", allow=ALLOW_GIT_STATUS).behavior == "ask"
    assert bash_decision("git status |& rm x", allow=ALLOW_GIT_STATUS).behavior == "ask"


def test_very_long_input_is_bounded() -> None:
    with cpu_time() as spent:
        long_line = "echo " + "a " * 40_000  # 80k characters, 40k words
        assert isinstance(analyze(long_line), Understood)
        many = "true;" * 15_000
        assert isinstance(analyze(many), (Understood, NotUnderstood))
    assert spent.seconds < 5  # ~0.3 s
    too_long = "git status; " + "x" * MAX_COMMAND_CHARS
    analysis = analyze(too_long)
    assert isinstance(analysis, NotUnderstood) and analysis.unchecked
    # Too long to check against deny rules: every Bash deny rule matches it.
    assert bash_decision(too_long, deny=("Bash(rm *)",)).behavior == "deny"
    assert bash_decision(too_long, allow=("Bash(git status*)",)).behavior == "ask"


@pytest.mark.parametrize(
    "command",
    [
        "(" * 5000 + "rm x" + ")" * 5000,
        "{ " * 3000 + "rm x; " + "} " * 3000,
        "echo " + '"$(' * 2000 + "rm x" + ')"' * 2000,
        "if a; then " * 2000 + "rm x; " + "fi; " * 2000,
        "a && " * 5000 + "rm x",
    ],
)
def test_deeply_nested_input_is_bounded_and_still_denied(command: str) -> None:
    with cpu_time() as spent:
        analysis = analyze(command)
        assert isinstance(analysis, NotUnderstood)
        assert bash_decision(command, deny=("Bash(rm *)",)).behavior == "deny"
    assert spent.seconds < 5


# ---------------------------------------------------------------------------- matching


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("git status*", "git status", True),
        ("git status*", "git statusx", True),
        ("git status:*", "git statusx", False),
        ("git status:*", "git status --short", True),
        ("git status", "git status --short", False),
        ("npm run *", "npm run build -- --out=dist/a b", True),
        ("*--version", "python --version", True),
        ("a*b*c", "a-x-b-y-c", True),
        ("a*b*c", "a-x-c-y-b", False),
        ("a*a", "a", False),
        ("rm   -rf *", "rm -rf /tmp/x", True),
        ("echo [x]?", "echo [x]?", True),
    ],
)
def test_patterns(pattern: str, text: str, expected: bool) -> None:
    assert pattern_matches(pattern, text) is expected


def test_pattern_matching_is_linear() -> None:
    text = "a" * 100_000
    with cpu_time() as spent:
        assert not pattern_matches("*a*a*a*a*a*b", text)
    assert spent.seconds < 0.5


def test_allow_matching_helpers() -> None:
    assert not allows("git*", understood("A=1 git x").commands[0])
    assert deny_matches("id", analyze("echo $(id)"))


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git commit -m 'wip'", ("Bash(git commit:*)",)),
        ("npm test && npm run lint", ("Bash(npm test:*)", "Bash(npm run:*)")),
        ("ls -la /tmp", ("Bash(ls:*)",)),
        ("'my tool' run", ("Bash('my tool' run:*)",)),
        ("git status > out", ("Bash(git status:*)",)),
        ("echo $(id)", ()),
        ("A=1 make", ()),
        ("# nothing", ()),
        # Claude Code 2.1.197 offers these exact commands too (permission_updates/suggest_bash)
        ("rm -rf x", ("Bash(rm -rf x)",)),
        ("rm -rf build && npm test", ("Bash(rm -rf build)", "Bash(npm test:*)")),
        ("sudo rm -rf /tmp/x", ("Bash(sudo rm -rf /tmp/x)",)),
        ("chmod -R 777 .", ("Bash(chmod -R 777 .)",)),
        ("kill -9 1234", ("Bash(kill -9 1234)",)),
        ("cp -r a b", ("Bash(cp -r a b)",)),
        ("find . -name '*.pyc' -delete", ()),
        # where it offers a prefix that allows losing work, the exact command
        ("git push --force origin main", ("Bash(git push --force origin main)",)),
        ("git push origin +main", ("Bash(git push origin +main)",)),
        ("git reset --hard HEAD~1", ("Bash(git reset --hard HEAD~1)",)),
        ("git clean -fdx", ("Bash(git clean -fdx)",)),
        ("git stash drop", ("Bash(git stash drop)",)),
        ("git -C sub push", ("Bash(git -C sub push)",)),
        ("mv a b", ("Bash(mv a b)",)),
        ("bash -c 'make x'", ("Bash(bash -c 'make x')",)),
        ("xargs rm", ("Bash(xargs rm)",)),
        ("node -e 1", ("Bash(node -e 1)",)),
        ("find . -exec rm {} +", ()),
        ("rm -rf *.o", ()),  # the exact rule would be a wildcard
        # ordinary uses keep their prefix
        ("git push -u origin x", ("Bash(git push:*)",)),
        ("git stash", ("Bash(git stash:*)",)),
        ("python3 x.py", ("Bash(python3 x.py:*)",)),
        # a compound line: a rule per command, in order, as Claude Code 2.1.197's dialog
        # (approval_dialog_compound.txt); a destructive part keeps its exact rule
        ("npm test && npm test -- -u", ("Bash(npm test:*)",)),
        (
            "git status && git push --force origin main",
            (
                "Bash(git status:*)",
                "Bash(git push --force origin main)",
            ),
        ),
        (
            "make lint | tee log; cargo test",
            (
                "Bash(make lint:*)",
                "Bash(tee log:*)",
                "Bash(cargo test:*)",
            ),
        ),
        # more than five: the first five, as Claude Code 2.1.197 (the rest still ask)
        ("a && b && c && d && e && f", tuple(f"Bash({c}:*)" for c in "abcde")),
        # one part no rule can allow: no offer at all (it would still ask)
        ("npm test && rm -rf *.o", ()),
        ("npm test && find . -delete", ()),
        ("npm test && A=1 make", ()),
    ],
)
def test_suggested_rules(command: str, expected: tuple[str, ...]) -> None:
    suggestions = suggest_rules(analyze(command))
    assert suggestions == expected
    covered = suggest_rules(analyze(command), covered=lambda one: one.argv[0] == "npm")
    assert covered == tuple(rule for rule in expected if not rule.startswith("Bash(npm "))
    if 0 < len(suggestions) < MAX_SUGGESTED_RULES:  # once allowed, they cover the line
        assert bash_decision(command, allow=suggestions, mode="acceptEdits").behavior == "allow"
        for rule in suggestions:  # and an exact rule nothing more
            if not rule.endswith(":*)"):
                wider = bash_decision(f"{rule[5:-1]} ~", allow=suggestions, mode="acceptEdits")
                assert wider.behavior == "ask"


# ---------------------------------------------------------------------------- paths


def test_written_and_read_paths(tmp_path: Path) -> None:
    home = tmp_path / "home"
    line = understood(
        "make >build.log 2>&1; cd sub && echo x >> out.txt 2>/dev/null && cd ~/notes && "
        'cat < in.txt > "~/literal" && cd && echo > ~/.bashrc && cd / && echo >| etc/f'
    )
    assert written_paths(line, cwd=tmp_path, home=home) == (
        tmp_path / "build.log",
        tmp_path / "sub" / "out.txt",
        home / "notes" / "~" / "literal",
        home / ".bashrc",
        Path("/etc/f"),
    )
    assert read_paths(line, cwd=tmp_path, home=home) == (home / "notes" / "in.txt",)


def test_a_cd_that_may_fail_leaves_both_places(tmp_path: Path) -> None:
    line = understood("cd sub; echo > f; cd /; cat < g")
    assert set(written_paths(line, cwd=tmp_path)) == {tmp_path / "f", tmp_path / "sub" / "f"}
    assert set(read_paths(line, cwd=tmp_path)) == {
        Path("/g"),
        tmp_path / "g",
        tmp_path / "sub" / "g",
    }


@pytest.mark.parametrize(
    "command",
    [
        "cd /etc & echo > f",  # a background job
        "(cd /etc); echo > f",  # a subshell
        "cd /etc | true; echo > f",  # a pipeline stage
        "true | cd /etc; echo > f",
        "cd /etc || echo > f",  # runs only when the cd failed
        "! cd /etc && echo > f",
        "if cd /etc; then :; else echo > f; fi",
        "true && cd /etc 2>/dev/null | true; echo > f",  # the grammar: (true && cd 2>…) | true
    ],
)
def test_a_cd_that_does_not_move_this_shell_moves_nothing(tmp_path: Path, command: str) -> None:
    assert written_paths(understood(command), cwd=tmp_path) == (tmp_path / "f",)


@pytest.mark.parametrize(
    "command",
    [
        "false && cd /etc; echo > f",
        "if false; then cd /etc; fi; echo > f",
        "if true; then :; elif false; then :; else cd /etc; fi; echo > f",
        "while false; do cd /etc; done; echo > f",
        "until true; do cd /etc; done; echo > f",
        "while true; do echo > f; cd /etc; done",  # the second round writes /etc/f
        "{ cd /etc; } 2>/dev/null; echo > f",
        "time cd /etc; echo > f",
        "cd /etc 2>/dev/null; echo > f",
    ],
)
def test_a_cd_that_may_run_is_followed_both_ways(tmp_path: Path, command: str) -> None:
    assert set(written_paths(understood(command), cwd=tmp_path)) == {
        tmp_path / "f",
        Path("/etc/f"),
    }


@pytest.mark.parametrize(
    "command",
    [
        # The grammar nests these as `(cd /etc && x >/dev/null) | y`; bash reads
        # `cd /etc && (x >/dev/null | y)`: the cd is in this shell.
        "cd /etc && x >/dev/null | y; echo > f",
        "cd /etc 2>/dev/null && x 2>/dev/null |& y; echo > f",
        "false || cd /etc && x >/dev/null | y && echo > f",
    ],
)
def test_pipelines_bind_tighter_than_and_or_whatever_the_grammar_nests(
    tmp_path: Path, command: str
) -> None:
    assert Path("/etc/f") in written_paths(understood(command), cwd=tmp_path)


def test_a_cd_through_a_symlink_and_up_is_checked_both_ways(tmp_path: Path) -> None:
    """bash reads `link/..` lexically, but takes the physical way when the lexical
    directory does not exist: a planted symlink cannot hide where `..` leads."""
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    project = tmp_path / "proj"
    project.mkdir()
    (project / "link").symlink_to(outside / "deep")
    line = understood("cd link/../x && echo > f")
    assert set(written_paths(line, cwd=project)) == {project / "x" / "f", outside / "x" / "f"}


def test_written_paths_follow_symlinks(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "link").symlink_to(outside)
    line = understood("echo x > link/file")
    assert written_paths(line, cwd=tmp_path / "proj") == (outside / "file",)


# ---------------------------------------------------------------------------- start-up


def test_tree_sitter_loads_only_when_a_command_is_checked() -> None:
    code = (
        "import sys, caliban.cli, caliban.permissions.policy, caliban.shell; "
        "assert 'tree_sitter' not in sys.modules; "
        "caliban.shell.analyze('ls'); assert 'tree_sitter' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------------- against bash
# An understood line must never run a command the analysis did not report: each line is run
# by real bash with logging stand-ins for every command name, in a scratch directory.

FAKE_COMMANDS = ("a", "b", "git", "rm", "touch", "make", "x")


class Bash:
    """Runs lines in bash with PATH holding only logging stand-ins."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.home = root / "home"
        self.logs = root / "logs"
        for directory in (self.bin, self.home, self.logs):
            directory.mkdir()
        for name in FAKE_COMMANDS:
            script = self.bin / name
            # One file per run: background and piped commands run concurrently.
            script.write_text(f'#!{BASH}\nprintf "%s\\0" {name} "$@" > "$LOGS/$$.$RANDOM"\n')
            script.chmod(0o755)
        self.runs = 0

    def run(self, line: str) -> tuple[list[tuple[str, ...]], set[Path]] | None:
        """The argvs the stand-ins saw and the files written; None on a timeout."""
        self.runs += 1
        work = self.root / f"w{self.runs}"
        work.mkdir()
        env = {"PATH": str(self.bin), "HOME": str(self.home), "LOGS": str(self.logs)}
        process = subprocess.Popen(
            [BASH, "-c", line],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            process.wait(timeout=5)
            deadline = time.monotonic() + 5
            while _group_alive(process.pid):  # background jobs outlive bash -c
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.002)
        except subprocess.TimeoutExpired:
            return None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
            process.wait()
        ran = []
        for log in self.logs.iterdir():
            ran.append(tuple(part.decode() for part in log.read_bytes().split(b"\0")[:-1]))
            log.unlink()
        return ran, {path.resolve() for path in work.rglob("*") if path.is_file()}

    def check(self, line: str) -> list[str]:
        """Problems: commands bash ran, or files it wrote, that the analysis missed."""
        analysis = analyze(line)
        if not isinstance(analysis, Understood):
            return []
        outcome = self.run(line)
        if outcome is None:
            return []
        ran, files = outcome
        reported = [_without_time(one.argv) for one in analysis.commands]
        problems = []
        for argv in sorted(ran, key=lambda argv: argv not in reported):
            if argv in reported:
                match: tuple[str, ...] | None = argv
            else:
                match = next((m for m in reported if _same_run(m, argv, self.home)), None)
            if match is None:
                problems.append(f"{line!r}: bash ran {argv!r}, analysis has {reported!r}")
            else:
                reported.remove(match)
        work = self.root / f"w{self.runs}"
        written = set(written_paths(analysis, cwd=work.resolve(), home=self.home))
        problems += [f"{line!r}: bash wrote {path}" for path in files - written]
        return problems


def _group_alive(group: int) -> bool:
    """Whether a process of the group still runs (zombies left to init do not count)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == group:
            return True
    return False


def _without_time(argv: tuple[str, ...]) -> tuple[str, ...]:
    # `time` is a keyword: bash runs what follows it.
    while argv[:1] == ("time",):
        argv = argv[1:]
        while argv[:1] in (("-p",), ("--",)):
            argv = argv[1:]
    return argv


def _same_run(reported: tuple[str, ...], ran: tuple[str, ...], home: Path) -> bool:
    """Equal, up to what the analysis keeps as written on purpose: globs, ~ in arguments."""
    if reported == ran:
        return True
    if any(char in word for word in reported for char in "*?["):
        return reported[0] == ran[0]
    return len(reported) == len(ran) and all(
        mine == theirs
        or (mine.startswith("~") and theirs == str(home) + mine[1:])
        or ("=~" in mine and theirs == mine.replace("=~", f"={home}", 1))
        for mine, theirs in zip(reported, ran, strict=True)
    )


@pytest.fixture
def real_bash(tmp_path: Path) -> Bash:
    if not os.access(BASH, os.X_OK):
        pytest.skip("needs /bin/bash")
    return Bash(tmp_path)


CORPUS = [
    QUOTE_TRICK.replace("/tmp/x", "made"),
    COMMENT_TRICK.replace("/tmp/x", "made"),
    "git status > out; git status >> out 2> err &> both >| forced",
    "a; b && x || git | rm |& make & touch t\nx",
    "(a; b) && { x; git status; } > grouped",
    "if a; then b; elif x; then git; else rm; fi; while false; do a; done; ! b",
    "\\rm r\\m \"rm\" 'r'm $'\\x72m' $'\\'' \"\\$ \\\\\" '#' a#b",
    "git commit -m 'a && b; c | d' -m \"x > y\" # trailing 'comment",
    "A=1 B='x y' git diff; C=2",
    "touch made <<'EOF'\n$HOME `id` \\\nEOF\nx after",
    "a <<-END > heredoc.out\n\tbody\n\tEND\nb",
    "git status 2>&1 | x; a >&2 3>&1 3>&-",
    "cd sub 2>/dev/null; mkdir() { :; }",
    "time a -p; time -p b",
    "x 'a\nb' \"c\nd\" $'e\\nf'",
    "a\\\n  b",
    "a | b |& x &",
]


@pytest.mark.slow
def test_understood_lines_run_exactly_the_reported_commands(real_bash: Bash) -> None:
    problems = [problem for line in CORPUS for problem in real_bash.check(line)]
    assert not problems
    assert real_bash.runs >= len(CORPUS) - 2  # nearly all of them were understood and ran


_SPECIAL = list(";|&#\"'\\$ \n\t(){}<>*?~`!=")


def _random_word(rng: random.Random) -> str:
    def piece() -> str:
        kind = rng.randrange(7)
        if kind == 0:
            return (
                "'" + "".join(rng.choice([*_SPECIAL, "a"]) for _ in range(3)).replace("'", "") + "'"
            )
        if kind == 1:
            return '"' + "".join(rng.choice([*_SPECIAL, "a"]) for _ in range(3)) + '"'
        if kind == 2:
            escapes = ["\\'", "\\\\", "\\n", "\\x41", "\\101", ";", " ", '\\"', "\\u00e9", "'"]
            return "$'" + "".join(rng.choice(escapes) for _ in range(2)) + "'"
        if kind == 3:
            return "\\" + rng.choice([*_SPECIAL, "a"])
        if kind == 4:
            return rng.choice(["~", "~/", "*", "{a,b}", "[a]", "#", "=", "x=", "--", "-"])
        return rng.choice(["a", "b", "o", "f", "-rf", "status"])

    return "".join(piece() for _ in range(rng.randint(1, 3)))


def _random_command(rng: random.Random) -> str:
    words = [rng.choice(["a", "b", "git", "rm", "'a'", '"git"', "\\rm", "r\\m", "time a", "! b"])]
    for _ in range(rng.randint(0, 3)):
        if rng.random() < 0.2:
            operator = rng.choice([">", ">>", "2>", "&>", ">|", "2>&1", ">&2", "<", ">&"])
            words.append(operator + rng.choice(["", " "]) + _random_word(rng))
        else:
            words.append(_random_word(rng))
    return rng.choice([" ", "  ", "\t"]).join(words)


def _random_line(rng: random.Random) -> str:
    line = _random_command(rng)
    for _ in range(rng.randint(0, 3)):
        separator = rng.choice(
            [";", " && ", " || ", " | ", " & ", "\n", " |& ", " \\\n", " # c'x\n", "#'\n"]
        )
        line += separator + rng.choice(
            [
                _random_command(rng),
                "{ " + _random_command(rng) + "; }",
                "(" + _random_command(rng) + ")",
            ]
        )
    if rng.random() < 0.3:  # a stray special character anywhere
        at = rng.randint(0, len(line))
        line = line[:at] + rng.choice(_SPECIAL) + line[at:]
    return line


@pytest.mark.slow
def test_random_understood_lines_run_exactly_the_reported_commands(real_bash: Bash) -> None:
    # Seeded: the same lines every run. For a longer campaign:
    #   CALIBAN_SHELL_FUZZ_LINES=20000 CALIBAN_SHELL_FUZZ_SEED=7 pytest -m slow -k random
    # Each bug such runs found during development has a case in NOT_UNDERSTOOD above.
    lines = int(os.environ.get("CALIBAN_SHELL_FUZZ_LINES", "400"))
    rng = random.Random(int(os.environ.get("CALIBAN_SHELL_FUZZ_SEED", "14")))
    problems = [problem for _ in range(lines) for problem in real_bash.check(_random_line(rng))]
    assert not problems
    assert real_bash.runs > lines // 5


# ---------------------------------------------------------------------------- the executable


def _caliban(server: object, cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    from fake_model_server import FakeModelServer

    assert isinstance(server, FakeModelServer)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(
        HOME=str(home),
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=server.anthropic_base_url,
    )
    return subprocess.run(
        [sys.executable, "-m", "caliban", "-p", "--output-format", "json", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )


def _bash_calls(*commands: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "Bash", "arguments": {"command": c}} for c in commands]}


@pytest.fixture
def attack_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.mark.slow
def test_allow_rule_bypasses_fail_through_the_executable(
    fake_model_server: object, project: Path, attack_home: Path, tmp_path: Path
) -> None:
    from fake_model_server import FakeModelServer

    assert isinstance(fake_model_server, FakeModelServer)
    made = tmp_path / "made"
    fake_model_server.add(
        _bash_calls(
            f"git status $'\\''; touch {made}1",
            f"git status #'\ntouch {made}2",
            "git status > ~/.bashrc",
            "git status >> ~/.bashrc",
            "git status 2> ~/.bashrc",
            "git status > status.txt",  # allowed: inside the project, in acceptEdits
        ),
        {"text": "done"},
    )
    result = _caliban(
        fake_model_server,
        project,
        attack_home,
        "--allowed-tools",
        "Bash(git status*)",
        "--permission-mode",
        "acceptEdits",
        "go",
    )
    assert result.returncode == 0, result.stderr
    assert not list(tmp_path.glob("made*"))
    assert not (attack_home / ".bashrc").exists()
    assert (project / "status.txt").exists()  # the rule still allows what it names
    sent = str(fake_model_server.requests[1].body["messages"])
    assert sent.count("requires approval") == 5


@pytest.mark.slow
def test_deny_rule_bypasses_fail_through_the_executable(
    fake_model_server: object, project: Path, attack_home: Path, tmp_path: Path
) -> None:
    from fake_model_server import FakeModelServer

    assert isinstance(fake_model_server, FakeModelServer)
    victim = tmp_path / "victim"
    victim.mkdir()
    fake_model_server.add(
        _bash_calls(
            f"git status $'\\''; rm -rf {victim}",
            f"git status #'\nrm -rf {victim}",
            f"git status $'\\''; touch {tmp_path}/made1",
            f"git status #'\ntouch {tmp_path}/made2",
            f"echo ok > {tmp_path}/ran",  # not denied: bypassPermissions runs it
        ),
        {"text": "done"},
    )
    result = _caliban(
        fake_model_server,
        project,
        attack_home,
        "--permission-mode",
        "bypassPermissions",
        "--disallowed-tools",
        "Bash(rm *),Bash(touch *)",
        "go",
    )
    assert result.returncode == 0, result.stderr
    assert victim.is_dir()
    assert not list(tmp_path.glob("made*"))
    assert (tmp_path / "ran").read_text() == "ok\n"
    sent = str(fake_model_server.requests[1].body["messages"])
    assert sent.count("denies it") == 4


# ---------------------------------------------------------------------------- git discovery


def _bare(directory: Path) -> Path:
    for name in ("objects", "refs"):
        (directory / name).mkdir(parents=True)
    (directory / "HEAD").write_text("ref: refs/heads/main\n")
    return directory


def test_git_commands_report_the_bare_repositories_they_would_use(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    _bare(project / ".git")  # the project's own: a .git directory
    _bare(project / "vendor" / "lib" / ".git")  # a nested clone: its config is protected
    bare = _bare(project / "vendor" / "x")
    (project / "sub").mkdir()
    (project / "sub" / ".git").write_text("gitdir: ../vendor/x\n")  # a .git file naming it

    def repositories(command: str) -> tuple[Path, ...]:
        effects = line_effects(analyze(command), cwd=project)
        assert effects.unknown is None, effects
        return effects.repositories

    for plain in ("git status", "cd vendor/lib && git log", "cd .git && git status", "ls x"):
        assert repositories(plain) == (), plain
    for planted in (
        "cd vendor/x && git status",
        "cd vendor/x/objects; git status",  # from inside, and whether or not the cd failed
        "git -C vendor -C x status",
        "git --git-dir=vendor/x log",
        "sudo git --git-dir vendor/x log",
        "(cd vendor/x && git status)",
        "cd sub && git status",
    ):
        assert repositories(planted) == (bare,), planted
    assert line_effects(analyze("popd; git status"), cwd=project).unknown is not None
