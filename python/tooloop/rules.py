"""Permission rules as the core reads them, for hosts that decide or show calls themselves (the ``tooloop``
command's plan mode and its "allow always" answers): the same matcher ``Agent(permission_rules=...)`` uses.

    from tooloop import rules

    rules.match_rules({"allow": ["bash(npm test:*)"]}, "bash", {"command": "npm test -- -k x"}, ".")
    # -> ("allow", "bash(npm test:*)")

Must never: hold a second copy of the rule language (it lives in the core, ``src/rules.rs``).
"""

from __future__ import annotations

import os

from . import _tooloop

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = ["match_rules", "read_only_command", "split_command", "check_files"]


def match_rules(rules: Mapping[str, Sequence[str]], name: str, input: Any,
                workspace: Union[str, os.PathLike[str]]) -> Optional[Tuple[str, str]]:
    """What ``rules`` (``{"allow": [...], "ask": [...], "deny": [...]}``) say about the call ``name(input)``
    in ``workspace``: ``("allow" | "ask" | "deny", the rule that decided)``, or None when no rule matches.
    Deny beats ask beats allow; Claude Code's tool names (``Bash``, ``Read``, ...) are accepted.

    A bash command is read with bash's grammar: an allow rule applies only when the whole command is plain
    commands each matched; a deny or ask rule matches a command anywhere in it (``bash -c``, ``eval``,
    ``xargs``, substitutions, ``\\rm``, ``/bin/rm``) and also one it cannot read. Paths are judged as written
    and as resolved inside ``workspace`` (symlinks followed); a ``Read`` rule covers ``grep`` and ``glob``,
    and a denied path stops a search whose walk reaches it."""
    return _tooloop.match_rules({k: list(v) for k, v in rules.items()}, name, input, os.fspath(workspace))


def read_only_command(command: str) -> bool:
    """Whether a bash command only reads: the whole command plain (literal words, no redirection but to
    ``/dev/null``, no substitution, assignment or comment) and every command a known reader named by its bare
    name, with none of its options that write or run a program (never ``awk``; not ``sed -i``/``e``/``w``,
    ``sort -o``, ``git -c``, ``find -exec``). A guess that decides whether to ask: the host runs what it
    lets through under the read-only sandbox."""
    return _tooloop.read_only_command(command)


def split_command(command: str) -> List[str]:
    """The commands of a shell command line (``a && b | c``, and those inside substitutions), read with bash's
    grammar, wrappers such as ``timeout 5`` looked through, each as its words joined by spaces: for showing
    and for "allow always" prefixes (deciding is ``match_rules``)."""
    return _tooloop.split_command(command)


def check_files(command: str, workspace: Union[str, os.PathLike[str]]) -> List[str]:
    """The workspace files and folders a check command runs or names, as ``Agent(check=command)`` holds
    them read-only for a run: every literal word of every command in it (bash's grammar; a pytest node id
    ``tests/test_x.py::test_add`` names its file) that is a relative path, without ``..``, to something
    existing in ``workspace``, other than the workspace itself. Sorted, relative, with ``/`` between parts."""
    return _tooloop.check_files(command, os.fspath(workspace))
