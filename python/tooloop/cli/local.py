"""What the CLI knows about models and servers: context windows (a small table, `--context-window`, or
what a local llama.cpp-style server reports), defaults that help small local models (low temperature,
max_tokens that fit the context, a compact prompt), and tool calls that such models write as text.

Context windows of known models come from the core's table (`tooloop.compaction::context_window`), so the
status bar and compaction agree. Must never: fail a start because a server did not answer a probe (it falls back
quietly), or send a key anywhere but the configured endpoint. Standard library only.
"""

from __future__ import annotations

import json
import re
import urllib.request
from typing import Any, Dict, List, Optional
from urllib.parse import urlsplit, urlunsplit

DEFAULT_LOCAL_TEMPERATURE = 0.2
#: The temperature of the one request after a turn stuck on a failure (progress_guard's unstick_temperature):
#: replayed at two such moments of real runs, a small model's next call fixed the cause 1 of 4 and 0 of 4
#: times at 0.2, 3 of 6 and 2 of 6 at 0.8.
UNSTICK_TEMPERATURE = 0.8
#: Below this context size (tokens) the compact prompt is used unless --prompt says otherwise.
COMPACT_BELOW = 16_384
#: Seconds a request to a local server may take: a model on a busy CPU reads a first prompt at a few tokens a
#: second and writes one token every few seconds, far past the hosted APIs' 600 s.
LOCAL_TIMEOUT = 3600.0
#: The tools the compact prompt offers: no planning, subagents or skills (`--prompt full` brings them back).
SMALL_MODEL_TOOLS = ("bash", "read_file", "write_file", "edit_file")

_OFFICIAL_HOSTS = ("api.anthropic.com", "api.openai.com")


def known_window(model: str) -> Optional[int]:
    """The model's context window from the core's table (the one the agent compacts against), or None."""
    import tooloop

    return tooloop.model_context_window(model)


_HOSTED_MODEL = re.compile(r"^(claude|gpt-|chatgpt|o\d)", re.I)


def hosted_model(model: str) -> bool:
    """A model of the hosted APIs (Claude, GPT, o-series): its window is the table's even behind a proxy.
    Any other model at a custom endpoint runs with whatever context its server was started with."""
    return bool(_HOSTED_MODEL.match(model or ""))


def is_custom_endpoint(base_url: Optional[str]) -> bool:
    """A base URL that is not the provider's own API: a local or self-hosted server."""
    if not base_url:
        return False
    host = (urlsplit(base_url).hostname or "").lower()
    return host not in _OFFICIAL_HOSTS


def probe_context(base_url: str, api_key: Optional[str] = None, timeout: float = 2.0) -> Optional[int]:
    """The context size a llama.cpp-style server reports: ``GET /props`` →
    ``default_generation_settings.n_ctx``, else ``GET /v1/models`` → ``data[0].meta.n_ctx_train``.
    None when the server does not say (any error, quietly)."""
    parts = urlsplit(base_url)
    root = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    path = parts.path.rstrip("/")
    models_url = urlunsplit((parts.scheme, parts.netloc, (path or "/v1") + "/models", "", ""))
    for url, pick in ((root + "/props", _n_ctx_props), (models_url, _n_ctx_models)):
        data = _get_json(url, api_key, timeout)
        n = pick(data) if data is not None else None
        if n:
            return n
    return None


def _get_json(url: str, api_key: Optional[str], timeout: float) -> Any:
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read(1_000_000).decode("utf-8", "replace"))
    except Exception:
        return None


def _n_ctx_props(data: Any) -> Optional[int]:
    try:
        n = data["default_generation_settings"]["n_ctx"]
    except (KeyError, TypeError):
        try:
            n = data["n_ctx"]
        except (KeyError, TypeError):
            return None
    return int(n) if isinstance(n, int) and n > 0 else None


def _n_ctx_models(data: Any) -> Optional[int]:
    try:
        meta = data["data"][0].get("meta") or {}
        n = meta.get("n_ctx") or meta.get("n_ctx_train")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    return int(n) if isinstance(n, int) and n > 0 else None


def fit_max_tokens(max_tokens: int, window: Optional[int]) -> int:
    """max_tokens no larger than the context can spare: at most an eighth of a small window, never below 256.
    The prompt, the tools' definitions and the conversation need the rest; and a small model's answer that
    runs to its limit is one that repeats itself (every cut answer of the local benchmark's runs was), so a
    lower limit wastes less: 512 tokens of a 4096 window are a 60-line file, about two minutes on a CPU."""
    if not window:
        return max_tokens
    return max(256, min(max_tokens, window // 8))


# -- tool calls written as text ----------------------------------------------------------------------------

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCED = re.compile(r"```(?:json|tool_call|tool)?\s*\n(\{.*?\})\s*\n```", re.S)
_TOOLS_ECHO = re.compile(r"<tools>.*?</tools>|<tools>", re.S)
#: An answer that opens with the chat template's wrapper of a tool's result (Qwen's `<tool_response>`): the
#: model wrote the results of its last calls back as its answer. In issue 41's n=3 run, Qwen2.5-Coder-1.5B did
#: this after its draft's test failed in 4 of the first 4 runs of add_test, and the command ended 0.
_RESULTS_ECHO = re.compile(r"\A\s*<tool_response>")


def text_tool_call(text: str, tool_names: List[str]) -> Optional[str]:
    """If an answer is a tool call written as text (small models do this), the name of the tool (or
    "tools" for an echoed <tools> block, "tool_response" for tool results written back); else None."""
    if not text:
        return None
    if _TOOLS_ECHO.search(text):
        return "tools"
    if _RESULTS_ECHO.search(text):
        return "tool_response"
    for m in _TAGGED.finditer(text):
        name = _call_name(m.group(1))
        if name:
            return name
    for m in _FENCED.finditer(text):
        name = _call_name(m.group(1))
        if name and name in tool_names:
            return name
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        name = _call_name(stripped)
        if name and name in tool_names:
            return name
    return None


def repeats_a_call(text: str, calls: Any) -> bool:
    """Whether the tool call written as text in an answer is one the run already made (same tool, same
    input). Such an answer is not corrected: asking the model to make that call properly only restarts the
    loop of a model that was done (typically its answer to the wrap-up turn, when tools were off)."""
    blobs = [m.group(1) for m in _TAGGED.finditer(text or "")] + [m.group(1) for m in _FENCED.finditer(text or "")]
    stripped = (text or "").strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        blobs.append(stripped)
    made = set()
    for c in calls or []:
        try:
            made.add((str(c.name), json.dumps(c.input, sort_keys=True)))
        except (AttributeError, TypeError, ValueError):
            continue
    for blob in blobs:
        try:
            data = json.loads(blob)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        fn_raw = data.get("function")
        fn: Dict[str, Any] = fn_raw if isinstance(fn_raw, dict) else {}
        name = data.get("name") or fn.get("name")
        args = data.get("arguments", data.get("parameters", fn.get("arguments", {})))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                continue
        if (str(name), json.dumps(args, sort_keys=True)) in made:
            return True
    return False


def _call_name(blob: str) -> Optional[str]:
    try:
        data = json.loads(blob)
    except ValueError:
        m = re.search(r'"name"\s*:\s*"([A-Za-z0-9_.-]+)"', blob)
        return m.group(1) if m else None
    if not isinstance(data, dict):
        return None
    fn = data.get("function")
    name = data.get("name") or (fn.get("name") if isinstance(fn, dict) else None) or data.get("tool")
    return str(name) if isinstance(name, str) and name else None


def correction(name: str) -> str:
    """The one line sent back when a tool call arrived as text."""
    if name == "tools":
        return ("Your last answer repeated the tool list as text. Call a tool through the tool-calling "
                "interface, or, if the task is done, answer in plain words without calling a tool.")
    if name == "tool_response":
        return ("Your last answer repeated tool results as text; it is not an answer. If a result shows a "
                "failure, fix it with the tools and run it again; if the task is done, say in plain words what "
                "you did.")
    return (f"Your last answer wrote a {name} call as text, so it did not run. Call the tool through the "
            "tool-calling interface (not as text), or, if the task is done, answer without calling a tool.")


def cut_off_correction(limit: Optional[int], name: Optional[str]) -> str:
    """The one line sent back when an answer stopped at max_tokens (`limit`), cut inside a `name` call."""
    size = f" ({limit} tokens)" if limit else ""
    cut = f", inside a {name} call, which did not run" if name else ""
    return (f"Your last answer was cut off at the output token limit{size}{cut}. Write less at a time: a "
            "shorter file or command, or a long file in parts (write_file the first part, then edit_file to "
            "add the rest). If the task is done, answer in plain words without calling a tool.")


def extra_body(temperature: Optional[float]) -> Optional[Dict[str, Any]]:
    return None if temperature is None else {"temperature": temperature}
