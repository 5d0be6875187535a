"""A small OpenAI-compatible chat server on 127.0.0.1, for tests that go through the real
litellm/openai HTTP path (and for the real opencode CLI in the ``real-opencode`` tox env).

Each request to ``POST /v1/chat/completions`` (or ``/chat/completions``), or to the Responses
API's ``POST /v1/responses`` (as Codex speaks it: SSE events with ``function_call`` and
``message`` items), takes the next scripted reply; when the script runs out the last one repeats. A reply is one of:

- ``{"content": "..."}`` or ``{"tool_calls": [{"name": ..., "arguments": {...}}]}``:
  a normal answer (as SSE chunks when the request asks for ``stream``);
- ``{"status": 401, "body": {...}}``: an HTTP error with an OpenAI-style error body;
- ``{"raw": "not json"}``: a garbage 200 body; ``{"empty_choices": True}``: ``choices: []``;
- ``{"hang": seconds}``: accept the request, then say nothing for that long;
- ``{"content": "...", "drip": seconds}``: streamed, one chunk every ``seconds`` (a slow stream);
- any reply with ``"before": callable``: the callable runs first (what the world does
  between two turns: a person's editor changing a file), in-process only.

``POST /v1/messages`` speaks Anthropic's Messages API (as Claude Code does, streamed as SSE
events: a ``tool_use`` content block per scripted tool call, else a ``text`` block), and
``/v1/messages/count_tokens`` counts a constant.

Every request body is kept in ``server.requests`` (with its headers and ``at``, the
``time.monotonic()`` of its arrival). With ``server.untooled`` set, requests that
offer no tools get that reply and leave the script alone (a CLI's side requests, such as a
session title, then do not eat the scripted turns). ``GET /v1/models`` lists ``server.models``.

``python tests/plugins/model_server.py PORT_FILE [SCRIPT_JSON]`` runs one in the foreground
and writes its port to ``PORT_FILE`` (the tox ``real-opencode`` env uses this).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def _message(reply: dict[str, Any], n: int) -> dict[str, Any]:
    calls = [
        {
            "id": f"call_{n}_{i}",
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))},
        }
        for i, c in enumerate(reply.get("tool_calls", ()))
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    if calls:
        message["tool_calls"] = calls
    return message


class _Handler(BaseHTTPRequestHandler):
    server: ModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        return

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            data = {
                "object": "list",
                "data": [{"id": m, "object": "model", "owned_by": "test"} for m in self.server.models],
            }
            self._send(200, json.dumps(data).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unparsable": raw.decode("utf-8", "replace")}
        route = self.path.split("?", 1)[0].rstrip("/")
        if route.endswith("/messages/count_tokens"):
            self._send(200, b'{"input_tokens": 11}')
            return
        responses = route.endswith("/responses")
        messages = route.endswith("/messages")
        if not responses and not messages and not route.endswith("/chat/completions"):
            self._send(404, b'{"error": {"message": "no such route"}}')
            return
        with self.server.lock:
            self.server.requests.append({"body": body, "headers": dict(self.headers), "at": time.monotonic()})
            n = len(self.server.requests)
            if self.server.untooled is not None and not body.get("tools"):
                reply = self.server.untooled  # e.g. a client's side request for a session title
            else:
                self.server.served += 1
                script = self.server.script
                reply = script[min(self.server.served - 1, len(script) - 1)] if script else {"content": "ok"}
        if callable(reply.get("before")):
            reply["before"]()
        if "hang" in reply:
            self.server.hung.wait(float(reply["hang"]))
            return
        if "status" in reply:
            error = reply.get("body") or {"error": {"message": f"error {reply['status']}", "type": "server_error"}}
            self._send(int(reply["status"]), json.dumps(error).encode())
            return
        if "raw" in reply:
            self._send(200, str(reply["raw"]).encode())
            return
        model = body.get("model", "test-model")
        if messages:
            self._anthropic(model, n, reply, bool(body.get("stream")))
            return
        if responses:
            self._respond(model, n, reply)
            return
        if reply.get("empty_choices"):
            data = {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": model, "choices": []}
            self._send(200, json.dumps(data).encode())
            return
        message = _message(reply, n)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        if body.get("stream"):
            self._stream(model, n, message, finish, float(reply.get("drip", 0)))
            return
        data = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": USAGE,
        }
        self._send(200, json.dumps(data).encode())

    def _respond(self, model: str, n: int, reply: dict[str, Any]) -> None:
        """The Responses API (``POST /v1/responses``, as Codex speaks it), always as SSE events:
        one ``function_call`` item per scripted tool call, else one ``message`` item."""
        items: list[dict[str, Any]] = [
            {
                "type": "function_call",
                "id": f"fc_{n}_{i}",
                "call_id": f"call_{n}_{i}",
                "name": c["name"],
                "arguments": json.dumps(c.get("arguments", {})),
                "status": "completed",
                **({"namespace": c["namespace"]} if "namespace" in c else {}),  # Codex's MCP tools
            }
            for i, c in enumerate(reply.get("tool_calls", ()))
        ]
        if not items:
            text = str(reply.get("content") or "")
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{n}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        response: dict[str, Any] = {"id": f"resp_{n}", "object": "response", "model": model, "status": "in_progress"}
        usage = {
            "input_tokens": USAGE["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": USAGE["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": USAGE["total_tokens"],
        }
        events: list[dict[str, Any]] = [{"type": "response.created", "response": response}]
        for i, item in enumerate(items):
            events.append({"type": "response.output_item.added", "output_index": i, "item": item})
            if item["type"] == "message":
                text = item["content"][0]["text"]
                events.append(
                    {"type": "response.output_text.delta", "item_id": item["id"], "output_index": i, "delta": text}
                )
            events.append({"type": "response.output_item.done", "output_index": i, "item": item})
        done = {**response, "status": "completed", "output": items, "usage": usage}
        events.append({"type": "response.completed", "response": done})
        body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
        self._send(200, body, "text/event-stream")

    def _anthropic(self, model: str, n: int, reply: dict[str, Any], stream: bool) -> None:
        """Anthropic's Messages API: a ``tool_use`` block per scripted call, else one ``text`` block."""
        blocks: list[dict[str, Any]] = [
            {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": c["name"], "input": c.get("arguments", {})}
            for i, c in enumerate(reply.get("tool_calls", ()))
        ] or [{"type": "text", "text": str(reply.get("content") or "")}]
        stop = "tool_use" if blocks[0]["type"] == "tool_use" else "end_turn"
        usage = {"input_tokens": USAGE["prompt_tokens"], "output_tokens": USAGE["completion_tokens"]}
        message = {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": model}
        if not stream:
            done = {**message, "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}
            self._send(200, json.dumps(done).encode())
            return
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1},
        }
        events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
        for i, block in enumerate(blocks):
            if block["type"] == "tool_use":
                opened = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            else:
                opened, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
            events += [
                {"type": "content_block_start", "index": i, "content_block": opened},
                {"type": "content_block_delta", "index": i, "delta": delta},
                {"type": "content_block_stop", "index": i},
            ]
        events += [
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage},
            {"type": "message_stop"},
        ]
        body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
        self._send(200, body, "text/event-stream")

    def _stream(self, model: str, n: int, message: dict[str, Any], finish: str, drip: float = 0.0) -> None:
        def chunk(delta: dict[str, Any], finish_reason: str | None = None, usage: Any = None) -> bytes:
            data: dict[str, Any] = {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
            if usage is not None:
                data["usage"] = usage
            return b"data: " + json.dumps(data).encode() + b"\n\n"

        parts = [chunk({"role": "assistant", "content": ""})]
        text = message.get("content") or ""
        for i in range(0, len(text), 8):
            parts.append(chunk({"content": text[i : i + 8]}))
        for i, call in enumerate(message.get("tool_calls", ())):
            parts.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["function"]["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            parts.append(
                chunk({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]})
            )
        parts.append(chunk({}, finish, USAGE))
        parts.append(b"data: [DONE]\n\n")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for i, part in enumerate(parts):
            if drip and i and self.server.hung.wait(drip):
                return  # shutting down
            try:
                self.wfile.write(part)
                self.wfile.flush()
            except OSError:  # the client gave up (a deadline): fine
                return
        self.close_connection = True


class ModelServer(ThreadingHTTPServer):
    """The server; ``with ModelServer(script) as s: s.base_url`` runs it in a daemon thread."""

    daemon_threads = True

    def __init__(self, script: list[dict[str, Any]] | None = None, models: tuple[str, ...] = ("test-model",)) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script: list[dict[str, Any]] = list(script or [])
        self.models = models
        self.requests: list[dict[str, Any]] = []
        self.served = 0  # scripted replies handed out
        self.untooled: dict[str, Any] | None = None  # when set: the reply to any request without tools
        self.lock = threading.Lock()
        self.hung = threading.Event()  # set on shutdown so hanging handlers end
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> ModelServer:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.hung.set()
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(5)


if __name__ == "__main__":
    script = json.loads(Path(sys.argv[2]).read_text()) if len(sys.argv) > 2 else None
    server = ModelServer(script)
    server.untooled = {"content": "snodo task"}
    Path(sys.argv[1]).write_text(str(server.server_address[1]))
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
