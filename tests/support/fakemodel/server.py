"""T25's fake model server: the one boundary the tests fake.

It answers the Anthropic Messages, OpenAI Responses and Chat Completions, and Gemini APIs on
127.0.0.1 the way a model would for one scripted task: the first turn calls a tool that writes
a file (with whichever tool the CLI offers), the next turn gives the final answer. Given a
`command`, the first turn is instead one call of the CLI's shell tool running it (Claude Code
`Bash`, Codex `exec_command` or `shell`, Gemini CLI `run_shell_command`, opencode `bash`),
as a prompt-injected model's would be; aider has no tools, so it only ever gets the whole-file
edit of `file`. What each CLI sent back from its tools is in `tool_results()`. It can
inject the provider errors real CLIs see (429, quota, usage limit, overload), and it is also
the HTTPS proxy of every run: a CONNECT or an absolute-URI request - anything trying to reach
the internet - is refused with 403 and logged, so a test can prove nothing left the machine.

    with FakeModel(file="greeting.txt", content="hi\\n", final='{"summary": "..."}') as fake:
        fake.base_url          http://127.0.0.1:PORT
        fake.fail_next("quota", times=1, api="anthropic")
        fake.requests          what was served;  fake.escapes  what was refused
        fake.tool_results()    what the CLI's tools answered, as the CLI sent it back

    FakeModel(command="touch /etc/x", final=...)   the first turn runs `touch /etc/x`
"""

from __future__ import annotations

import gzip
import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ERRORS: dict[str, dict[str, tuple[int, dict, dict]]] = {
    # api -> kind -> (status, body, headers)
    "anthropic": {
        "429": (
            429,
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "This request would exceed the rate limit for your organization of 50 "
                    "requests per minute.",
                },
            },
            {"retry-after": "60"},
        ),
        "quota": (
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "Your credit balance is too low to access the Anthropic API. Please go to "
                    "Plans & Billing to upgrade or purchase credits.",
                },
            },
            {},
        ),
        "usage": (
            429,
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "This request would exceed your account's rate limit. Please try again "
                    "later.",
                },
            },
            {
                "anthropic-ratelimit-unified-status": "rejected",
                "anthropic-ratelimit-unified-reset": "1796015794",
            },
        ),
        "overload": (
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            {},
        ),
    },
    "openai": {
        "429": (
            429,
            {
                "error": {
                    "message": "Rate limit reached for requests. Please try again in 1s.",
                    "type": "requests",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            },
            {"retry-after": "1"},
        ),
        "quota": (
            429,
            {
                "error": {
                    "message": "You exceeded your current quota, please check "
                    "your plan and billing details.",
                    "type": "insufficient_quota",
                    "param": None,
                    "code": "insufficient_quota",
                }
            },
            {},
        ),
        "usage": (
            429,
            {
                "error": {
                    "type": "usage_limit_reached",
                    "message": "The usage limit has been reached",
                    "plan_type": "plus",
                    "resets_in_seconds": 3600,
                }
            },
            {},
        ),
        "overload": (
            529,
            {
                "error": {
                    "message": "The server is overloaded.",
                    "type": "server_is_overloaded",
                    "code": "server_is_overloaded",
                }
            },
            {},
        ),
    },
    "gemini": {
        "quota": (
            429,
            {
                "error": {
                    "code": 429,
                    "message": "You exceeded your current quota, "
                    "please check your plan and billing details.",
                    "status": "RESOURCE_EXHAUSTED",
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                            "violations": [
                                {
                                    "quotaMetric": "generativelanguage.googleapis.com/"
                                    "generate_content_free_tier_requests",
                                    "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                                }
                            ],
                        },
                        {"@type": "type.googleapis.com/google.rpc.Help", "links": []},
                    ],
                }
            },
            {},
        ),
    },
}


@dataclass
class Fault:
    kind: str
    times: int
    api: str | None = None


@dataclass
class FakeModel:
    """The server and its script. Use as a context manager; it runs in a thread."""

    file: str = "greeting.txt"
    content: str = "hello from the agent\n"
    final: str = "Done."
    command: str | None = None  # a shell command for the first turn, instead of writing `file`
    usage_in: int = 1200
    usage_out: int = 42
    requests: list[dict] = field(default_factory=list)
    escapes: list[dict] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fail_next(self, kind: str, *, times: int = 1, api: str | None = None) -> None:
        """Answer the next `times` model calls (of `api`, or any) with error `kind`."""
        with self.lock:
            self.faults.append(Fault(kind, times, api))

    def proxy_env(self) -> dict[str, str]:
        return {
            "HTTPS_PROXY": self.base_url,
            "HTTP_PROXY": self.base_url,
            "https_proxy": self.base_url,
            "http_proxy": self.base_url,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }

    def _fault_for(self, api: str) -> str | None:
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and fault.api in (None, api) and fault.kind in ERRORS[api]:
                    fault.times -= 1
                    return fault.kind
        return None

    def tool_results(self) -> list[str]:
        """The tool results every CLI sent back, in order, as text (whatever its API)."""
        with self.lock:
            bodies = [r["body"] for r in self.requests if r.get("body")]
        found: list[str] = []
        for body in bodies:
            for m in body.get("messages") or []:  # Anthropic blocks, Chat Completions roles
                if not isinstance(m, dict):
                    continue
                if m.get("role") == "tool":
                    found.append(_text(m.get("content")))
                if isinstance(m.get("content"), list):
                    found += [
                        _text(b.get("content"))
                        for b in m["content"]
                        if isinstance(b, dict) and b.get("type") == "tool_result"
                    ]
            found += [  # OpenAI Responses
                _text(i.get("output"))
                for i in body.get("input") or []
                if isinstance(i, dict)
                and i.get("type") in ("function_call_output", "custom_tool_call_output")
            ]
            found += [  # Gemini
                _text(p["functionResponse"])
                for c in body.get("contents") or []
                if isinstance(c, dict)
                for p in c.get("parts") or []
                if isinstance(p, dict) and "functionResponse" in p
            ]
        return list(dict.fromkeys(found))  # each turn resends the earlier ones

    # -- the script: a tool call that writes the file, then the final answer -----------------

    def shell(self) -> str:
        """The first turn's shell command: the given one, or one that writes the file."""
        if self.command is not None:
            return self.command
        return f"printf '%s' {_shell_quote(self.content)} > {_shell_quote(self.file)}"

    def anthropic(self, body: dict) -> list[tuple[str, dict]]:
        done = any(
            isinstance(block, dict) and block.get("type") == "tool_result"
            for m in body.get("messages", [])
            if m.get("role") == "user" and isinstance(m.get("content"), list)
            for block in m["content"]
        )
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        model = body.get("model", "claude-fake")
        mid = f"msg_fake{next(self.ids)}"
        events = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": mid,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {
                            "input_tokens": self.usage_in,
                            "output_tokens": 1,
                            "cache_creation_input_tokens": 0,
                            "cache_read_input_tokens": 0,
                        },
                    },
                },
            )
        ]
        if done or "Bash" not in tools:
            text = self.final if done else _schema_answer(body) or self.final
            events += [
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": text},
                    },
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ]
            stop = "end_turn"
        else:
            events += [
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {
                            "type": "tool_use",
                            "id": f"toolu_fake{next(self.ids)}",
                            "name": "Bash",
                            "input": {},
                        },
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(
                                {"command": self.shell(), "description": "write the file"}
                            ),
                        },
                    },
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ]
            stop = "tool_use"
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": self.usage_out},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return events

    def responses(self, body: dict) -> list[tuple[str | None, dict]]:
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        done = any(
            i.get("type") in ("function_call_output", "custom_tool_call_output") for i in items
        )
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        rid = f"resp_fake{next(self.ids)}"
        if done:
            item = {
                "type": "message",
                "id": f"msg_{rid}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": self.final, "annotations": []}],
            }
        elif "apply_patch" in tools and self.command is None:
            lines = "".join(f"+{line}\n" for line in self.content.splitlines())
            item = {
                "type": "custom_tool_call",
                "id": f"ctc_{rid}",
                "status": "completed",
                "call_id": f"call_{rid}",
                "name": "apply_patch",
                "input": f"*** Begin Patch\n*** Add File: {self.file}\n{lines}*** End Patch\n",
            }
        else:
            item = {
                "type": "function_call",
                "id": f"fc_{rid}",
                "status": "completed",
                "call_id": f"call_{rid}",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": self.shell()}),
            }
            if "exec_command" not in tools and "shell" in tools:
                item["name"] = "shell"
                item["arguments"] = json.dumps({"command": ["sh", "-c", self.shell()]})
        usage = {
            "input_tokens": self.usage_in,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": self.usage_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.usage_in + self.usage_out,
        }
        response = {
            "id": rid,
            "object": "response",
            "model": body.get("model"),
            "status": "completed",
            "output": [item],
            "usage": usage,
        }
        events: list[tuple[str | None, dict]] = [
            (
                "response.created",
                {
                    "type": "response.created",
                    "response": {**response, "status": "in_progress", "output": []},
                },
            ),
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": item},
            ),
        ]
        if item["type"] == "message":
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": 0,
                        "content_index": 0,
                        "delta": self.final,
                    },
                )
            )
        events += [
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            ("response.completed", {"type": "response.completed", "response": response}),
        ]
        return events

    def chat(self, body: dict) -> list[dict]:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        done = any(m.get("role") == "tool" for m in messages)
        tools = {
            (t.get("function") or {}).get("name")
            for t in body.get("tools") or []
            if isinstance(t, dict)
        }
        cid, model = f"chatcmpl-fake{next(self.ids)}", body.get("model", "fake-model")
        base = {"id": cid, "object": "chat.completion.chunk", "created": 1796000000, "model": model}
        if done or not tools:
            text = self.final if done or tools else _chat_text(self, messages)
            chunks = [
                {
                    **base,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": text},
                            "finish_reason": None,
                        }
                    ],
                },
                {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            ]
        else:
            name, args = (
                ("bash", {"command": self.shell(), "description": "write the file"})
                if "bash" in tools
                else ("write", {"filePath": self.file, "content": self.content})
            )
            chunks = [
                {
                    **base,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "role": "assistant",
                                "content": None,
                                "tool_calls": [
                                    {
                                        "index": 0,
                                        "id": f"call_fake{next(self.ids)}",
                                        "type": "function",
                                        "function": {"name": name, "arguments": json.dumps(args)},
                                    }
                                ],
                            },
                            "finish_reason": None,
                        }
                    ],
                },
                {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            ]
        chunks.append(
            {
                **base,
                "choices": [],
                "usage": {
                    "prompt_tokens": self.usage_in,
                    "completion_tokens": self.usage_out,
                    "total_tokens": self.usage_in + self.usage_out,
                },
            }
        )
        return chunks

    def gemini(self, body: dict, model: str = "gemini-fake") -> dict:
        contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
        done = any(
            isinstance(p, dict) and "functionResponse" in p
            for c in contents
            for p in c.get("parts") or []
        )
        config = body.get("generationConfig") or {}
        if config.get("responseJsonSchema") or config.get("responseSchema"):
            parts = [
                {
                    "text": _schema_answer(
                        {"schema": config.get("responseJsonSchema") or config.get("responseSchema")}
                    )
                    or "{}"
                }
            ]
        elif done:
            parts = [{"text": self.final}]
        else:
            call = (
                {"name": "write_file", "args": {"file_path": self.file, "content": self.content}}
                if self.command is None
                else {"name": "run_shell_command", "args": {"command": self.command}}
            )
            parts = [
                {
                    "functionCall": call,
                    "thoughtSignature": "skip_thought_signature_validator",
                }
            ]
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": self.usage_in,
                "candidatesTokenCount": self.usage_out,
                "totalTokenCount": self.usage_in + self.usage_out,
            },
            "modelVersion": model,
        }


def _text(value: object) -> str:
    """A tool result's content as text: a string, or text blocks, or any JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, dict) and "text" in b for b in value):
        return "".join(str(b["text"]) for b in value)
    return json.dumps(value)


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _chat_text(fake: FakeModel, messages: list[dict]) -> str:
    """A chat without tools (aider, title generation): whole-file edit format, or a title."""
    system = str(messages[0].get("content", "")) if messages else ""
    if "title" in system.lower() or "commit message" in system.lower():
        return "Add greeting"
    return f"{fake.file}\n```\n{fake.content}```\n\n{fake.final}"


def _schema_answer(body: dict) -> str | None:
    """A JSON answer to a side request that demands a schema (titles, routing)."""
    schema = body.get("schema")
    if schema is None:
        fmt = (body.get("output_config") or {}).get("format") or {}
        schema = fmt.get("schema")
    if not isinstance(schema, dict):
        return None
    out: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        kind = str((prop or {}).get("type", "string")).lower()
        out[name] = (
            10
            if kind in ("integer", "number")
            else False
            if kind == "boolean"
            else []
            if kind == "array"
            else "Add greeting"
        )
    return json.dumps(out)


def _handler(fake: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _refuse(self) -> None:
            with fake.lock:
                fake.escapes.append(
                    {"method": self.command, "target": self.path, "host": self.headers.get("Host")}
                )
            body = b"blocked by the T25 fake model server: no internet in tests\n"
            self.send_response(403, "blocked by t25 fake model")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        def do_CONNECT(self) -> None:
            self._refuse()

        def _body(self) -> dict:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                raw = gzip.decompress(raw)
            try:
                value = json.loads(raw or b"{}")
            except ValueError:
                return {}
            return value if isinstance(value, dict) else {}

        def _send(
            self, status: int, body: bytes, content_type: str, headers: dict | None = None
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, value: object, headers: dict | None = None) -> None:
            self._send(status, json.dumps(value).encode(), "application/json", headers)

        def _sse(self, events: list[tuple[str | None, dict]], done: bool = False) -> None:
            text = "".join(
                (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
                for name, data in events
            ) + ("data: [DONE]\n\n" if done else "")
            self._send(200, text.encode(), "text/event-stream", {"Cache-Control": "no-cache"})

        def do_GET(self) -> None:
            if self.path.startswith(("http://", "https://")):
                return self._refuse()
            with fake.lock:
                fake.requests.append({"method": "GET", "path": self.path, "api": None})
            self._json(404, {"error": {"message": "not found"}})
            return None

        do_HEAD = do_GET  # noqa: N815 - the name http.server looks up

        def do_POST(self) -> None:
            if self.path.startswith(("http://", "https://")):
                return self._refuse()
            body = self._body()
            path = self.path.split("?")[0]
            api = (
                "anthropic"
                if path.endswith("/messages")
                else "openai"
                if path.endswith(("/responses", "/chat/completions"))
                else "gemini"
                if ":streamGenerateContent" in path or ":generateContent" in path
                else None
            )
            with fake.lock:
                fake.requests.append(
                    {
                        "method": "POST",
                        "path": self.path,
                        "api": api,
                        "model": body.get("model"),
                        "body": body,
                    }
                )
            if api is None:
                return self._json(404, {"error": {"message": f"no such endpoint {path}"}})
            if kind := fake._fault_for(api):
                status, error, headers = ERRORS[api][kind]
                return self._json(status, error, headers)
            if api == "anthropic":
                if body.get("stream"):
                    return self._sse(fake.anthropic(body))
                return self._json(200, _anthropic_message(fake.anthropic(body)))
            if path.endswith("/responses"):
                return self._sse(fake.responses(body))
            if api == "openai":
                chunks = fake.chat(body)
                if body.get("stream"):
                    return self._sse([(None, c) for c in chunks], done=True)
                return self._json(200, _chat_message(chunks))
            reply = fake.gemini(body, path.rsplit("/", 1)[-1].split(":")[0])
            if ":streamGenerateContent" in path:
                return self._sse([(None, reply)])
            return self._json(200, reply)

    return Handler


def _anthropic_message(events: list[tuple[str, dict]]) -> dict:
    """A non-streamed Messages reply assembled from the streamed events."""
    message = dict(events[0][1]["message"])
    blocks: list[dict] = []
    for _, event in events:
        if event["type"] == "content_block_start":
            blocks.append(dict(event["content_block"]))
        elif event["type"] == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                blocks[-1]["text"] += delta["text"]
            else:
                blocks[-1]["input"] = json.loads(delta["partial_json"])
        elif event["type"] == "message_delta":
            message.update(event["delta"])
            message["usage"] = {**message["usage"], **event["usage"]}
    message["content"] = blocks
    return message


def _chat_message(chunks: list[dict]) -> dict:
    delta = chunks[0]["choices"][0]["delta"]
    message = {"role": "assistant", "content": delta.get("content")}
    if delta.get("tool_calls"):
        message["tool_calls"] = [
            {k: v for k, v in call.items() if k != "index"} for call in delta["tool_calls"]
        ]
    return {
        "id": chunks[0]["id"],
        "object": "chat.completion",
        "model": chunks[0]["model"],
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": chunks[1]["choices"][0]["finish_reason"],
            }
        ],
        "usage": chunks[-1]["usage"],
    }
