"""`tooloop` exports its spans over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set (python/tooloop/cli/otel.py):
a small OTLP/HTTP receiver here decodes each ExportTraceServiceRequest with the opentelemetry-proto package;
the spans of a `tooloop -p` run against the mock arrive before the command exits. Without the variable nothing
is exported and OpenTelemetry is not imported."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from _support import cli_env, run_cli, run_script, text_reply, tool_reply

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402


class Receiver:
    """An OTLP/HTTP traces endpoint on 127.0.0.1: every request's path, headers and decoded body."""

    def __init__(self) -> None:
        self.requests: List[Tuple[str, Dict[str, str], ExportTraceServiceRequest]] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                receiver.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, req))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> List[Tuple[Dict[str, Any], Any]]:
        """Every span received, with its resource's attributes."""
        out = []
        for _, _, req in self.requests:
            for rs in req.resource_spans:
                resource = {a.key: a.value.string_value for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    out.extend((resource, s) for s in ss.spans)
        return out

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.stop()


def attr(span: Any, key: str) -> Any:
    for a in span.attributes:
        if a.key == key:
            v = a.value
            return v.string_value if v.HasField("string_value") else v.int_value
    return None


def test_print_mode_exports_its_spans_over_otlp_http_before_it_exits(tooloop_exe: str, ws: Path, tmp_path: Path,
                                                                     mock: Any, receiver: Receiver) -> None:
    server = mock({"responses": [tool_reply(("toolu_ls", "glob", {"pattern": "*.txt"})), text_reply("one file")]})
    (ws / "a.txt").write_text("hi\n")
    env = cli_env(tmp_path, server, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="otel-test",
                  OTEL_EXPORTER_OTLP_HEADERS="x-team=agents")
    proc = run_cli(tooloop_exe, ws, env, "-p", "which text files are there?")
    assert proc.returncode == 0
    assert "one file" in proc.stdout
    assert receiver.requests, "nothing was exported before the command exited"
    path, headers, _ = receiver.requests[0]
    assert path == "/v1/traces"
    assert headers["content-type"] == "application/x-protobuf"
    assert headers["x-team"] == "agents"
    spans = receiver.spans()
    assert {res["service.name"] for res, _ in spans} == {"otel-test"}
    by_name = {s.name: s for _, s in spans}
    run = by_name["invoke_agent"]
    assert attr(run, "gen_ai.operation.name") == "invoke_agent"
    assert attr(run, "gen_ai.provider.name") == "anthropic"
    assert run.parent_span_id == b""
    chats = [s for _, s in spans if s.name.startswith("chat ")]
    assert len(chats) == 2
    assert all(c.parent_span_id == run.span_id and c.trace_id == run.trace_id for c in chats)
    tool = by_name["execute_tool glob"]
    assert tool.parent_span_id == run.span_id
    assert attr(tool, "gen_ai.tool.call.id") == "toolu_ls"


def test_without_an_endpoint_nothing_is_exported_and_opentelemetry_is_not_imported(tooloop_exe: str, ws: Path,
                                                                                   tmp_path: Path, mock: Any,
                                                                                   receiver: Receiver) -> None:
    server = mock({"responses": [text_reply("hello")]})
    proc = run_cli(tooloop_exe, ws, cli_env(tmp_path, server), "-p", "hi")
    assert proc.returncode == 0
    assert receiver.requests == []
    code = ("import sys\nfrom tooloop.cli import otel\nassert otel.start() is None\n"
            "assert not [m for m in sys.modules if m.startswith('opentelemetry')]\n")
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ""}
    assert run_script(code, env).returncode == 0


def test_an_endpoint_without_the_packages_says_in_one_line_how_to_install_them() -> None:
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.startswith('opentelemetry'):\n"
            "            raise ImportError(name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "from tooloop.cli import otel\n"
            "assert otel.start() is None\n")
    proc = run_script(code, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("\n") == 1
    assert "pip install 'tooloop[otel]'" in proc.stderr
