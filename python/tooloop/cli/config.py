"""Settings of one CLI start: flags first, then the environment, then ``<workspace>/.env``, then defaults.

Keys and defaults the CLI reads (from the environment or the workspace's .env file):
ANTHROPIC_API_KEY, OPENAI_API_KEY, ANTHROPIC_BASE_URL, OPENAI_BASE_URL, TOOLOOP_PROVIDER, TOOLOOP_MODEL,
TOOLOOP_MAX_TURNS, TOOLOOP_THINKING, TOOLOOP_CONTEXT_WINDOW, TOOLOOP_COMPACTION (auto|off),
TOOLOOP_COMPACTION_MODEL. The real environment wins over .env, as with python-dotenv and
docker compose. A base URL from .env counts only with the key from that same file (a cloned
repository must not redirect the user's own key). Must never print or log a key. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"
DEFAULT_BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
DEFAULT_MAX_TURNS = 50
DEFAULT_MAX_TOKENS = 8192

def _provider_table() -> Dict[str, Dict[str, Any]]:
    """The library's provider table (``tooloop.PROVIDERS``) by name: names, key and base-URL variables."""
    from tooloop import PROVIDERS as table   # the compiled module is loaded with the package already

    return {row["name"]: row for row in table}


PROVIDERS = tuple(_provider_table())



class ConfigProblem(Exception):
    """A setting the user must fix; the message is one line that says how. Exit code 2."""


def parse_dotenv(text: str) -> Dict[str, str]:
    """The KEY=VALUE lines of a .env file: `export` prefixes, single and double quotes (double quotes
    understand \\n, \\t, \\" and \\\\), `#` comments on their own line or after an unquoted value.

    Linear in the text's length (no pattern that backtracks over a long run of spaces)."""
    values: Dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _KEY.match(line)
        if not m:
            continue
        key, value = m.group(1), line[m.end():].strip()
        if len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1]
        elif len(value) >= 2 and value[0] == value[-1] == '"':
            value = _unescape(value[1:-1])
        else:
            value = _cut_comment(value)
        values[key] = value
    return values


_KEY = re.compile(r"(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)[ \t]*=")
_ESCAPES = {"n": "\n", "t": "\t"}


def _unescape(text: str) -> str:
    out: List[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(_ESCAPES.get(text[i + 1], text[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _cut_comment(value: str) -> str:
    """An unquoted value up to a `#` that follows whitespace."""
    start = 0
    while True:
        i = value.find("#", start)
        if i < 0:
            return value
        if i > 0 and value[i - 1].isspace():
            return value[:i].strip()
        start = i + 1


DOTENV_MAX_BYTES = 256 * 1024
"""The largest workspace .env read; a bigger one is ignored (with a note on stderr)."""

_dotenv_noted: "set[str]" = set()


def read_dotenv_text(path: Path, limit: int = DOTENV_MAX_BYTES) -> Tuple[Optional[str], str]:
    """(text, problem) of a .env file: read only when it is a regular file (symlinks followed) of at most
    `limit` bytes, opened without blocking, so a FIFO, a device such as /dev/zero or a huge file can neither
    hang the start nor fill memory. A missing file is (None, ""); any other refusal is (None, why)."""
    import stat

    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None, ""
    except OSError as e:
        return None, f"cannot open it ({e.strerror or e})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "it is not a regular file"
        if info.st_size > limit:
            return None, f"it is {info.st_size} bytes; the limit is {limit}"
        chunks: List[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(65536, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            return None, f"it is over {limit} bytes"
        try:
            return b"".join(chunks).decode("utf-8"), ""
        except UnicodeDecodeError:
            return None, "it is not UTF-8 text"
    except OSError as e:
        return None, f"cannot read it ({e.strerror or e})"
    finally:
        os.close(fd)


CONFIG_MAX_BYTES = 1024 * 1024
"""The largest JSON configuration file read (.mcp.json, settings files)."""


def read_config_text(path: Path, what: str) -> Optional[str]:
    """A configuration file a repository may bring (.mcp.json, .tooloop/settings*.json) as text, read like
    the .env file: a regular file of at most CONFIG_MAX_BYTES, without blocking (a FIFO or /dev/zero in
    its place neither hangs the start nor fills memory). None when missing; ConfigProblem otherwise."""
    text, problem = read_dotenv_text(Path(path), CONFIG_MAX_BYTES)
    if problem:
        raise ConfigProblem(f"cannot read {what} {path}: {problem}")
    return text


def load_dotenv(workspace: Path) -> Dict[str, str]:
    path = Path(workspace) / ".env"
    text, problem = read_dotenv_text(path)
    if problem and str(path) not in _dotenv_noted:
        _dotenv_noted.add(str(path))
        import sys
        print(f"tooloop: {path} ignored: {problem}", file=sys.stderr)
    return parse_dotenv(text) if text is not None else {}


def merged_env(workspace: Path, environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """.env values overlaid by the real environment (empty variables count as unset)."""
    return _sources(workspace, environ)[0]


def _sources(workspace: Path, environ: Optional[Mapping[str, str]] = None) -> Tuple[Dict[str, str], Dict[str, str]]:
    """(merged, dotenv_only): the merged settings, and the names whose value came from the workspace's .env
    file (not overridden by the real environment) with those values."""
    environ = os.environ if environ is None else environ
    dotenv = load_dotenv(workspace)
    real = {k: v for k, v in environ.items() if v != ""}
    env = dict(dotenv)
    env.update(real)
    from_file = {k: v for k, v in dotenv.items() if k not in real}
    return env, from_file


@dataclass
class Settings:
    provider: str
    model: str
    api_key: Optional[str]
    base_url: Optional[str]
    max_turns: int
    thinking: Optional[int]
    max_tokens: int
    workspace: Path
    env: Dict[str, str] = field(repr=False, default_factory=dict)
    context_window: Optional[int] = None     # tokens, when known (table, flag or the server)
    temperature: Optional[float] = None      # None: the API's default
    prompt_style: str = "full"               # "full" | "compact"
    sandbox: Optional[str] = None            # the sandbox mode passed to the agent (None: the library's default)
    sandbox_note: str = ""                   # said once in the header, e.g. that Landlock is unavailable
    region: Optional[str] = None             # AWS region (--provider bedrock)
    env_passthrough: List[str] = field(default_factory=list)   # secret-looking variables bash keeps
    network: bool = True                     # bash may use TCP (--no-network: refused by the sandbox)
    compaction: bool = True                  # compact by itself near the window (--no-compaction: False)
    compaction_model: Optional[str] = None   # the model that writes compaction summaries (None: the model)
    fallback_models: List[str] = field(default_factory=list)   # --fallback-model [PROVIDER:]MODEL, in order
    wire_note: str = ""                      # said once (dim) when the CLI picked the wire itself


def compaction_settings(settings: Settings, args: argparse.Namespace) -> None:
    """--no-compaction / TOOLOOP_COMPACTION and --compaction-model / TOOLOOP_COMPACTION_MODEL into
    `settings` (flags win over the environment and .env). Raises ConfigProblem."""
    env = settings.env
    mode = (env.get("TOOLOOP_COMPACTION") or "auto").strip().lower()
    if mode not in ("auto", "off", "on", "true", "false", "1", "0", "yes", "no"):
        raise ConfigProblem(f"TOOLOOP_COMPACTION must be auto or off, got {mode!r}")
    settings.compaction = not getattr(args, "no_compaction", False) and mode not in ("off", "false", "0", "no")
    settings.compaction_model = getattr(args, "compaction_model", None) or env.get("TOOLOOP_COMPACTION_MODEL") or None


def model_ref(text: str) -> Tuple[Optional[str], str]:
    """``[PROVIDER:]MODEL`` as (provider or None, model). Only a known provider counts as the prefix, so
    model names with a colon (``llama3:8b``, Bedrock's ``...-v1:0``) stay whole. Raises ConfigProblem."""
    text = text.strip()
    head, sep, rest = text.partition(":")
    if sep and head.lower() in PROVIDERS:
        if not rest.strip():
            raise ConfigProblem(f"{text!r} names no model after the provider")
        return head.lower(), rest.strip()
    if not text:
        raise ConfigProblem("a model name is needed")
    return None, text


def endpoint(provider: str, workspace: Path) -> Dict[str, str]:
    """The settings a switch to `provider` needs, from the environment and the workspace's .env by the rules
    the start applies (a .env base URL counts only with a key from that same file). Raises ConfigProblem."""
    env, from_file = _sources(workspace)
    if provider == "bedrock":
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if region and not valid_region(region.strip()):
            raise ConfigProblem(f"{region[:40]!r} is not an AWS region")
        return {"region": region.strip()} if region else {}
    prefix = "OPENAI" if provider == "openai" else "ANTHROPIC"
    url_var, key_var = f"{prefix}_BASE_URL", key_variable(provider)
    if from_file.get(url_var) and key_var not in from_file:
        raise ConfigProblem(f"{workspace / '.env'} sets {url_var} but not {key_var}: refusing to send your "
                            f"{key_var} to that URL")
    out = {}
    if env.get(key_var):
        out["api_key"] = env[key_var]
    if env.get(url_var):
        out["base_url"] = env[url_var]
    if not out:
        raise ConfigProblem(no_key_message(provider, workspace))
    return out


def fallback_settings(settings: Settings, args: argparse.Namespace) -> None:
    """--fallback-model (repeatable) into `settings`, each checked. Raises ConfigProblem."""
    refs = list(getattr(args, "fallback_model", None) or [])
    for ref in refs:
        model_ref(ref)
    settings.fallback_models = refs


def fallback_option(settings: Settings) -> List[Any]:
    """The library's ``fallback_models`` for the settings: a model on the session's provider by name (it
    takes the session's key and URL), one on another provider with that provider's key and URL."""
    out: List[Any] = []
    for ref in settings.fallback_models:
        provider, model = model_ref(ref)
        if provider is None or provider == settings.provider:
            out.append(model)
        else:
            out.append({"provider": provider, "model": model, **endpoint(provider, settings.workspace)})
    return out


def env_context_window(settings: Settings) -> Optional[int]:
    """TOOLOOP_CONTEXT_WINDOW (from the environment or .env), checked. Raises ConfigProblem."""
    return _int_setting(settings.env.get("TOOLOOP_CONTEXT_WINDOW"), "TOOLOOP_CONTEXT_WINDOW", 1)


def _int_setting(value: Optional[str], name: str, minimum: int) -> Optional[int]:
    if value is None or value == "":
        return None
    try:
        n = int(value)
    except ValueError:
        raise ConfigProblem(f"{name} must be a whole number, got {value!r}") from None
    if n < minimum:
        raise ConfigProblem(f"{name} must be at least {minimum}, got {n}")
    return n


def key_variable(provider: str) -> str:
    row = _provider_table().get(provider) or {}
    return row.get("key_var") or "ANTHROPIC_API_KEY"


def base_url_variable(provider: str) -> str:
    row = _provider_table().get(provider) or {}
    return row.get("base_url_var") or "ANTHROPIC_BASE_URL"


def responses_note(model: str) -> str:
    return (f"{model} takes tools with reasoning only on the Responses API: using --provider openai-responses "
            f"(POST /v1/responses)")


def resolve(args: argparse.Namespace, environ: Optional[Mapping[str, str]] = None) -> Settings:
    """Settings from parsed arguments (see args.py) and the environment. Raises ConfigProblem."""
    workspace = Path(args.workspace or os.getcwd()).expanduser()
    if not workspace.is_dir():
        raise ConfigProblem(f"workspace {str(workspace)!r} is not a folder")
    workspace = workspace.resolve()
    env, from_file = _sources(workspace, environ)

    provider = (args.provider or env.get("TOOLOOP_PROVIDER") or "anthropic").lower()
    if provider not in PROVIDERS:
        raise ConfigProblem(f"unknown provider {provider!r}: use {', '.join(PROVIDERS[:-1])} or {PROVIDERS[-1]}")
    if provider == "bedrock":
        return _bedrock(args, env, workspace)

    model = args.model or env.get("TOOLOOP_MODEL")
    if not model:
        if provider.startswith("openai"):
            raise ConfigProblem(
                f"--provider {provider} needs a model: pass --model NAME (e.g. gpt-4.1, or the model your "
                "local server serves) or set TOOLOOP_MODEL")
        model = DEFAULT_ANTHROPIC_MODEL

    url_var, key_var = base_url_variable(provider), key_variable(provider)
    base_url = args.base_url or env.get(url_var) or None
    api_key = env.get(key_var) or None
    if not args.base_url and from_file.get(url_var) and key_var not in from_file:
        # A cloned repository must not be able to send the user's own key to a server of its choosing: a
        # base URL from the workspace's .env counts only with a key from that same file (also when no key is
        # set yet: one set later, in the shell, would then go to the repository's URL without a word).
        raise ConfigProblem(
            f"{workspace / '.env'} sets {url_var} but not {key_var}: refusing to send your {key_var} "
            f"to that URL (put the key in the same file, or pass --base-url)")
    if api_key is None and base_url is None:
        raise ConfigProblem(no_key_message(provider, workspace))

    wire_note = ""
    if provider == "openai" and base_url is None:
        # OpenAI's own endpoint (no custom URL): its reasoning models refuse tools with reasoning on Chat
        # Completions, so they get the Responses wire. A local server keeps what it was asked for.
        import tooloop

        if tooloop.model_prefers_responses(model):
            provider, wire_note = "openai-responses", responses_note(model)
    max_turns, thinking, max_tokens = _turn_limits(args, env)
    return Settings(provider=provider, model=model, api_key=api_key, base_url=base_url,
                    max_turns=max_turns, thinking=thinking, max_tokens=max_tokens,
                    workspace=workspace, env=env, wire_note=wire_note)


def _turn_limits(args: argparse.Namespace, env: Mapping[str, str]) -> Tuple[int, Optional[int], int]:
    """max_turns, the thinking budget (None: off) and max_tokens, from the flags or the settings, for every
    provider alike."""
    if args.max_turns is not None:
        max_turns = args.max_turns
    else:
        max_turns = _int_setting(env.get("TOOLOOP_MAX_TURNS"), "TOOLOOP_MAX_TURNS", 1) or DEFAULT_MAX_TURNS
    thinking = args.thinking if args.thinking is not None else _int_setting(
        env.get("TOOLOOP_THINKING"), "TOOLOOP_THINKING", 0)
    thinking = thinking or None
    if thinking is not None and thinking < 1024:
        raise ConfigProblem(f"--thinking budget must be at least 1024 tokens, got {thinking}")
    # The API requires max_tokens above the thinking budget; leave room for the answer itself.
    max_tokens = max(DEFAULT_MAX_TOKENS, (thinking or 0) + 4096)
    return max_turns, thinking, max_tokens


def _aws_credentials_problem() -> Optional[str]:
    """Why the Bedrock provider would find no AWS credentials, or None: the library's own check
    (``tooloop.check_aws_credentials``), which reads the process environment and ~/.aws/credentials exactly as
    the provider will, so a start that passes here never fails later for want of credentials."""
    import tooloop

    try:
        tooloop.check_aws_credentials()
    except tooloop.Error as e:
        return str(e)
    return None


_REGION = re.compile(r"[a-z][a-z0-9-]{0,31}")


def valid_region(region: str) -> bool:
    """The core's rule (`bedrock::check_region`): lowercase letters, digits and `-`, like us-west-2."""
    return (bool(_REGION.fullmatch(region)) and "-" in region and not region.endswith("-")
            and "--" not in region)


def _bedrock(args: argparse.Namespace, env: Mapping[str, str], workspace: Path) -> Settings:
    """Claude on Amazon Bedrock: AWS credentials (the library signs the requests) and a region."""
    region = getattr(args, "region", None) or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if not region:
        raise ConfigProblem("--provider bedrock needs a region: pass --region us-west-2 or set AWS_REGION")
    region = region.strip()
    if not valid_region(region):
        # The region becomes part of the endpoint's host name; a cloned repository's .env sets it too.
        raise ConfigProblem(f"{region[:40]!r} is not an AWS region (a region looks like us-west-2: lowercase "
                            "letters, digits and -); check --region, AWS_REGION and the workspace's .env")
    problem = None if args.base_url else _aws_credentials_problem()
    if problem is not None:
        raise ConfigProblem(f"--provider bedrock: {problem}")
    model = args.model or env.get("TOOLOOP_MODEL") or DEFAULT_BEDROCK_MODEL
    max_turns, thinking, max_tokens = _turn_limits(args, env)
    return Settings(provider="bedrock", model=model, api_key=None, base_url=args.base_url or None,
                    max_turns=max_turns, thinking=thinking, max_tokens=max_tokens, workspace=workspace,
                    env=dict(env), region=region)


def no_key_message(provider: str, workspace: Path) -> str:
    var = key_variable(provider)
    return (f"no API key: set {var} in the environment or in {Path(workspace) / '.env'} "
            f"(or, for a local OpenAI-compatible server, run with --provider openai "
            f"--base-url http://localhost:11434/v1 --model NAME)")
