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

__all__ = ["match_rules", "read_only_command", "split_command"]


def match_rules(rules: Mapping[str, Sequence[str]], name: str, input: Any,
                workspace: Union[str, os.PathLike[str]]) -> Optional[Tuple[str, str]]:
    """What ``rules`` (``{"allow": [...], "ask": [...], "deny": [...]}``) say about the call ``name(input)``
    in ``workspace``: ``("allow" | "ask" | "deny", the rule that decided)``, or None when no rule matches.
    Deny beats ask beats allow; Claude Code's tool names (``Bash``, ``Read``, ...) are accepted."""
    return _tooloop.match_rules({k: list(v) for k, v in rules.items()}, name, input, os.fspath(workspace))


def read_only_command(command: str) -> bool:
    """Whether a bash command only reads: every simple command in it a known read-only one, and no output
    redirection."""
    return _tooloop.read_only_command(command)


def split_command(command: str) -> List[str]:
    """The simple commands of a shell command line (``a && b | c``), wrappers such as ``timeout 5`` looked
    through: what a ``bash(...)`` rule is matched against, one by one."""
    return _tooloop.split_command(command)
