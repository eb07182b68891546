"""Pictures and documents in a prompt: `--image PATH` (repeatable) and `@path/to/picture.png` inside the
text become content blocks (base64, the file's bytes as they are) sent before the text. The core checks
their sizes against the provider's limits before anything is sent.

Must never: read a file outside what the user named, or drop the text of the prompt.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from .config import ConfigProblem

#: Extensions that become blocks, and their media types.
MEDIA_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".webp": "image/webp", ".pdf": "application/pdf"}

#: A content block of a prompt (``{"type": "image", "source": {...}}``, ``{"type": "text", ...}``).
Block = Dict[str, Any]
#: A run's input: the text alone, or content blocks (pictures and documents, then the text).
Prompt = Union[str, List[Block]]

_MENTION = re.compile(r"(?<!\S)@(\S+\.(?:png|jpe?g|gif|webp|pdf))(?=$|[\s,;:!?)]|\.(?:\s|$))", re.IGNORECASE)


def block_for(path: Path) -> Block:
    """The content block of an image or PDF file (base64 of its bytes)."""
    media = MEDIA_TYPES.get(path.suffix.lower())
    if media is None:
        raise ConfigProblem(f"{path}: not an image or PDF (use .png, .jpg, .gif, .webp or .pdf)")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigProblem(f"cannot read {path}: {e.strerror or e}") from None
    kind = "document" if media == "application/pdf" else "image"
    return {"type": kind, "source": {"type": "base64", "media_type": media,
                                     "data": base64.b64encode(data).decode("ascii")}}


def _resolve(name: str, workspace: Path) -> Path:
    p = Path(name).expanduser()
    return p if p.is_absolute() else workspace / p


def mentions(text: str, workspace: Path) -> List[Path]:
    """The `@file.png` mentions in `text` that name existing files (others stay plain text)."""
    found: List[Path] = []
    for m in _MENTION.finditer(text):
        # Relative to the workspace, else to the current folder (`tooloop -w repo "see @shot.png"`).
        for base in (workspace, Path.cwd()):
            p = _resolve(m.group(1), base)
            if p.is_file():
                if p not in found:
                    found.append(p)
                break
    return found


def prompt_input(text: str, workspace: Path, images: Sequence[Union[str, Path]] = ()) -> Prompt:
    """The run's input: `text` alone, or the blocks of `images` and of the `@file` mentions, then the text.
    A missing `--image` file is a ConfigProblem."""
    paths: List[Path] = []
    for name in images:
        p = _resolve(str(name), Path.cwd())
        if not p.is_file():
            raise ConfigProblem(f"--image {name}: no such file")
        paths.append(p)
    for p in mentions(text, workspace):
        if p not in paths:
            paths.append(p)
    if not paths:
        return text
    blocks = [block_for(p) for p in paths]
    blocks.append({"type": "text", "text": text})
    return blocks


def input_text(value: Optional[Prompt]) -> Optional[str]:
    """The text part of a run input."""
    if value is None or isinstance(value, str):
        return value
    return "\n".join(b.get("text", "") for b in value if b.get("type") == "text")
