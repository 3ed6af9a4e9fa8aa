"""A scripted model server that the real Claude Code and Codex CLIs can talk to offline.

It speaks just enough of the Anthropic Messages API (``POST /v1/messages``) and of the OpenAI
Responses API (``POST /v1/responses``) to drive whole agent sessions: a request that carries tools
is an agent turn, answered with the next step of a script (a tool call or a final text).

The server keeps no cursor. The step is read off the conversation in the request itself: the number
of tool results it holds. Retries therefore get the same answer, and several client processes (and
their subagents) can share one server. A script may be a mapping from a marker string to a list of
steps: a conversation follows the list whose marker occurs in its first user message (the empty
marker is the default), so a subagent or a second session can run a script of its own.

Compaction drops tool results from the conversation, so a request for a summary (Claude Code's
``/compact``, Codex's automatic compaction) is answered with a summary that records how many steps
were done (``[scripted steps done: N]``); counting resumes from there.

Standard library only: the server runs in a background thread of the test process.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional, Union

__all__ = [
    "Answer",
    "ModelServer",
    "ReceivedRequest",
    "Script",
    "Step",
    "Text",
    "ToolCall",
    "claude_edit_script",
    "codex_edit_script",
    "codex_patch",
    "when_prompted",
]


@dataclass(frozen=True)
class ToolCall:
    """A scripted tool call; ``input`` is the tool's argument object.

    ``freeform`` marks an OpenAI custom (freeform) tool such as Codex's ``apply_patch``, whose
    argument is a raw string: give it as ``input={"input": "<text>"}``. ``namespace`` is the
    Responses API tool namespace (Codex's subagent tools live in ``multi_agent_v1``).
    ``input_tokens`` overrides the usage reported with this answer (to push a client over its
    compaction threshold).
    """

    name: str
    input: dict[str, Any]
    freeform: bool = False
    namespace: Optional[str] = None
    input_tokens: Optional[int] = None


@dataclass(frozen=True)
class Text:
    """A scripted text answer, which ends the agent's turn."""

    text: str
    input_tokens: Optional[int] = None


Answer = Union[ToolCall, Text]
Step = Union[ToolCall, Text, Callable[[dict[str, Any]], Answer]]
"""An answer, or a function of the request body returning one (e.g. to reuse an id that an
earlier tool result carried)."""
Script = Union[Sequence[Step], Mapping[str, Sequence[Step]]]

SIDE_ANSWER = "Scripted session"
"""The text given to requests without tools that are not summaries (titles and the like)."""

OUT_OF_SCRIPT = "Done."
"""The text given once a conversation has used every step of its script."""

STOP_POLL_S = 0.05
"""How often a server's thread looks for stop()'s request: `shutdown()` blocks until it does, and
socketserver's default of 0.5 s was paid (about half of it on average) by every test's stop."""

_PROGRESS = re.compile(r"\[scripted steps done: (\d+)\]")

# Phrases by which the clients ask for a summary of the conversation (compaction).
_SUMMARY_CUES = (
    "detailed summary of the conversation",  # Claude Code 2.1 /compact
    "CONTEXT CHECKPOINT COMPACTION",  # Codex 0.169 compaction
)


@dataclass
class ReceivedRequest:
    """One request the server received, kept for assertions."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # the decoded JSON body, or None
    answer: str = ""  # "step N", "summary", "side", "count_tokens", "models" or "not_found"

    def __getitem__(self, key: str) -> Any:
        """Read a field of the JSON body, so ``request["model"]`` works as on a dict."""
        return self.body[key]


@dataclass
class Conversation:
    """What the server needs to know about the conversation a request carries."""

    first_user_text: str = ""
    last_user_text: str = ""
    steps_done: int = 0

    @property
    def wants_summary(self) -> bool:
        """Whether the last user message asks for a summary of the conversation."""
        return any(cue in self.last_user_text for cue in _SUMMARY_CUES)


class _Progress:
    """Counts tool results, restarting from a ``[scripted steps done: N]`` summary."""

    def __init__(self) -> None:
        self.steps_done = 0

    def text(self, text: str) -> None:
        found = _PROGRESS.findall(text)
        if found:
            self.steps_done = int(found[-1])

    def tool_result(self) -> None:
        self.steps_done += 1


class ModelServer:
    """A threaded HTTP server on 127.0.0.1 (free port) that answers from a script.

    Use as a context manager, or call ``start()`` and ``stop()``.
    """

    def __init__(self, script: Script = (), *, model: str = "mock-model") -> None:
        if isinstance(script, Mapping):
            self.scripts: dict[str, list[Step]] = {k: list(v) for k, v in script.items()}
        else:
            self.scripts = {"": list(script)}
        self.model = model
        self.requests: list[ReceivedRequest] = []
        self._lock = threading.Lock()
        self._httpd: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> ModelServer:
        """Bind a free port on 127.0.0.1 and serve from a daemon thread."""
        server = self

        class Handler(_Handler):
            model_server = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": STOP_POLL_S},
            name="model-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port.

        Raises:
            RuntimeError: the server is not started.
        """
        if self._httpd is None:
            raise RuntimeError("model server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: Claude Code takes it bare, Codex with ``/v1`` appended."""
        return f"http://127.0.0.1:{self.port}"

    # -- views for assertions --------------------------------------------------------------------

    def requests_to(self, path: str) -> list[ReceivedRequest]:
        """The received requests whose path, without the query, is ``path``."""
        with self._lock:
            return [r for r in self.requests if r.path.split("?", 1)[0] == path]

    def answered(self, prefix: str) -> list[ReceivedRequest]:
        """The received requests whose answer label starts with ``prefix`` (``"step"``, ...)."""
        with self._lock:
            return [r for r in self.requests if r.answer.startswith(prefix)]

    def _record(self, request: ReceivedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    # -- answering -------------------------------------------------------------------------------

    def _script_key(self, first_user_text: str) -> str:
        best = ""
        for marker in self.scripts:
            if marker and marker in first_user_text and len(marker) > len(best):
                best = marker
        return best

    def answer(
        self, conversation: Conversation, has_tools: bool, body: dict[str, Any]
    ) -> tuple[str, Answer]:
        """The label and the answer for one model request."""
        key = self._script_key(conversation.first_user_text)
        if conversation.wants_summary:
            # The script key goes into the summary too: after compaction the summary may be all
            # that is left of the first user message.
            summary = f"[scripted steps done: {conversation.steps_done}] {key}".rstrip()
            return "summary", Text(f"<analysis>Scripted.</analysis>\n<summary>{summary}</summary>")
        if not has_tools:
            return "side", Text(SIDE_ANSWER)
        script = self.scripts.get(key, [])
        done = conversation.steps_done
        if done >= len(script):
            return f"step {done}", Text(OUT_OF_SCRIPT)
        step = script[done]
        if not isinstance(step, (ToolCall, Text)):
            step = step(body)
        return f"step {done}", step


# -- Anthropic Messages API ----------------------------------------------------------------------


def tool_output_text(content: Any) -> str:
    """The text of a tool's result as a client sent it back (a `tool_result` block's content or
    a `function_call_output`'s output): a string, text parts, or anything else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return json.dumps(content)


def _anthropic_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        str(block.get("text", ""))
        for block in content or []
        if isinstance(block, dict) and block.get("type") == "text"
    )


def _anthropic_conversation(body: dict[str, Any]) -> Conversation:
    conversation = Conversation()
    progress = _Progress()
    for message in body.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        text = _anthropic_text(content)
        progress.text(text)
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    progress.tool_result()
        if not conversation.first_user_text:
            conversation.first_user_text = text
        conversation.last_user_text = text
    conversation.steps_done = progress.steps_done
    return conversation


Event = tuple[str, dict[str, Any]]  # an SSE event: its name and its data


def _anthropic_events(model: str, answer: Answer, input_tokens: int) -> Iterator[Event]:
    yield "message_start", {
        "type": "message_start",
        "message": {
            "id": "msg_" + uuid.uuid4().hex[:24],
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": 1,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        },
    }
    if isinstance(answer, ToolCall):
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": "toolu_" + uuid.uuid4().hex[:24],
            "name": answer.name,
            "input": {},
        }
        delta = {"type": "input_json_delta", "partial_json": json.dumps(answer.input)}
        stop_reason = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": answer.text}
        stop_reason = "end_turn"
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
    yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": _OUTPUT_TOKENS},
    }
    yield "message_stop", {"type": "message_stop"}


def _anthropic_message(model: str, answer: Answer, input_tokens: int) -> dict[str, Any]:
    """The non-streamed form of the same answer."""
    if isinstance(answer, ToolCall):
        content: dict[str, Any] = {
            "type": "tool_use",
            "id": "toolu_" + uuid.uuid4().hex[:24],
            "name": answer.name,
            "input": answer.input,
        }
        stop_reason = "tool_use"
    else:
        content = {"type": "text", "text": answer.text}
        stop_reason = "end_turn"
    return {
        "id": "msg_" + uuid.uuid4().hex[:24],
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [content],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": _OUTPUT_TOKENS},
    }


# -- OpenAI Responses API ------------------------------------------------------------------------

_TOOL_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")
# Codex sends its environment and project instructions as user messages before the prompt.
_CONTEXT_PREFIXES = ("<environment_context", "<user_instructions", "# AGENTS.md")


def _responses_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        str(part.get("text", ""))
        for part in content or []
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text")
    )


def _responses_conversation(body: dict[str, Any]) -> Conversation:
    items = body.get("input") or []
    if isinstance(items, str):
        return Conversation(first_user_text=items, last_user_text=items)
    conversation = Conversation()
    progress = _Progress()
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") in _TOOL_OUTPUT_TYPES:
            progress.tool_result()
        elif item.get("role") == "user":
            text = _responses_text(item.get("content"))
            progress.text(text)
            if text.lstrip().startswith(_CONTEXT_PREFIXES):
                continue
            if not conversation.first_user_text:
                conversation.first_user_text = text
            conversation.last_user_text = text
    conversation.steps_done = progress.steps_done
    return conversation


def _responses_item(answer: Answer) -> dict[str, Any]:
    if isinstance(answer, ToolCall):
        call_id = "call_" + uuid.uuid4().hex[:24]
        if answer.freeform:
            return {
                "type": "custom_tool_call",
                "id": "ctc_" + uuid.uuid4().hex[:24],
                "status": "completed",
                "call_id": call_id,
                "name": answer.name,
                "input": str(answer.input.get("input", "")),
            }
        item = {
            "type": "function_call",
            "id": "fc_" + uuid.uuid4().hex[:24],
            "status": "completed",
            "call_id": call_id,
            "name": answer.name,
            "arguments": json.dumps(answer.input),
        }
        if answer.namespace:
            item["namespace"] = answer.namespace
        return item
    return {
        "type": "message",
        "id": "msg_" + uuid.uuid4().hex[:24],
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": answer.text, "annotations": []}],
    }


def _responses_events(model: str, answer: Answer, input_tokens: int) -> Iterator[Event]:
    base = {
        "id": "resp_" + uuid.uuid4().hex[:24],
        "object": "response",
        "model": model,
        "status": "in_progress",
    }
    yield "response.created", {"type": "response.created", "response": {**base, "output": []}}
    item = _responses_item(answer)
    yield "response.output_item.added", {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": item,
    }
    if item["type"] == "message":
        yield "response.output_text.delta", {
            "type": "response.output_text.delta",
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "delta": item["content"][0]["text"],
        }
    yield "response.output_item.done", {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": item,
    }
    yield "response.completed", {
        "type": "response.completed",
        "response": {
            **base,
            "status": "completed",
            "output": [item],
            "usage": {
                "input_tokens": input_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": _OUTPUT_TOKENS,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": input_tokens + _OUTPUT_TOKENS,
            },
        },
    }


# -- HTTP ----------------------------------------------------------------------------------------

_OUTPUT_TOKENS = 5


def _estimate_tokens(raw: bytes) -> int:
    return max(1, len(raw) // 4)


class _Handler(BaseHTTPRequestHandler):
    model_server: ModelServer
    protocol_version = "HTTP/1.1"
    server_version = "ScriptedModel/1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Keep test output quiet: ``ModelServer.requests`` is the log."""

    # Every method goes through one place, so nothing a client tries can crash it.
    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _read_body(self) -> tuple[bytes, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "deflate":
            raw = zlib.decompress(raw)
        if not raw:
            return raw, None
        try:
            return raw, json.loads(raw)
        except ValueError:  # not JSON (or a compression we cannot read): keep it out of scripts
            return raw, None

    def _dispatch(self) -> None:
        raw, body = self._read_body()
        path = self.path.split("?", 1)[0]
        request = ReceivedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        self.model_server._record(request)
        tokens = _estimate_tokens(raw)
        if self.command == "POST" and path.endswith("/messages/count_tokens"):
            request.answer = "count_tokens"
            self._send_json(200, {"input_tokens": tokens})
        elif self.command == "POST" and path.endswith("/messages") and isinstance(body, dict):
            self._answer(request, body, _anthropic_conversation(body), tokens, anthropic=True)
        elif self.command == "POST" and path.endswith("/responses") and isinstance(body, dict):
            self._answer(request, body, _responses_conversation(body), tokens, anthropic=False)
        elif self.command == "GET" and path.endswith("/models"):
            request.answer = "models"
            # OpenAI's shape ({"data": [...]}) and Codex's catalog shape ({"models": [...]}).
            model = {"id": self.model_server.model, "object": "model", "owned_by": "mock"}
            self._send_json(200, {"object": "list", "data": [model], "models": []})
        else:
            request.answer = "not_found"
            self._send_json(404, {"error": {"type": "not_found", "message": f"no route {path}"}})

    def _answer(
        self,
        request: ReceivedRequest,
        body: dict[str, Any],
        conversation: Conversation,
        tokens: int,
        *,
        anthropic: bool,
    ) -> None:
        server = self.model_server
        request.answer, answer = server.answer(conversation, bool(body.get("tools")), body)
        if answer.input_tokens is not None:
            tokens = answer.input_tokens
        model = str(body.get("model") or server.model)
        if anthropic:
            if body.get("stream"):
                self._send_sse(_anthropic_events(model, answer, tokens))
            else:
                self._send_json(200, _anthropic_message(model, answer, tokens))
        else:
            events = _responses_events(model, answer, tokens)
            if body.get("stream"):
                self._send_sse(events)
            else:
                self._send_json(200, list(events)[-1][1]["response"])

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_sse(self, events: Iterator[Event]) -> None:
        # The stream ends with the connection: no chunked encoding or length to get wrong.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode("utf-8"))
            self.wfile.flush()


# -- script builders -----------------------------------------------------------------------------


def claude_edit_script(
    path: str, old: str, new: str, command: str, final: str = "All done."
) -> list[Step]:
    """Claude Code: Read ``path``, Edit ``old`` into ``new``, run ``command`` with Bash, then text.

    ``path`` must be absolute (Claude Code's file tools want absolute paths); Edit needs the Read
    before it.
    """
    return [
        ToolCall("Read", {"file_path": path}),
        ToolCall("Edit", {"file_path": path, "old_string": old, "new_string": new}),
        ToolCall("Bash", {"command": command, "description": "Run the scripted command"}),
        Text(final),
    ]


def codex_patch(path: str, old: str, new: str) -> str:
    """A Codex ``apply_patch`` body replacing the whole line ``old`` by ``new`` in ``path``."""
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n"


def codex_edit_script(
    path: str, old: str, new: str, command: str, final: str = "All done."
) -> list[Step]:
    """Codex: cat ``path`` (exec_command), apply_patch ``old`` -> ``new``, run ``command``, text.

    ``old`` and ``new`` are whole lines. ``apply_patch`` is sent as a freeform (custom) tool call
    whose input is the raw patch, the form Codex 0.169 offers when the model's metadata says
    ``apply_patch_tool_type: freeform`` (see ``harness.write_codex_config``).
    """
    return [
        ToolCall("exec_command", {"cmd": f"cat {path}"}),
        ToolCall("apply_patch", {"input": codex_patch(path, old, new)}, freeform=True),
        ToolCall("exec_command", {"cmd": command}),
        Text(final),
    ]


def when_prompted(marker: str, answer: Answer, otherwise: Answer) -> Step:
    """A step answering ``answer`` when the conversation's latest user prompt contains ``marker``,
    else ``otherwise``.

    A text answer does not advance the step count, so a session resumed with a new prompt asks
    for the same step that ended its previous turn: this lets that step start the new turn's
    work (a later step then follows the new turn's tool results).
    """

    def step(body: dict[str, Any]) -> Answer:
        conversation = (_anthropic_conversation(body) if "messages" in body
                        else _responses_conversation(body))
        return answer if marker in conversation.last_user_text else otherwise

    return step
