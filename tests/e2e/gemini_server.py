"""A scripted Gemini API server that the real Gemini CLI can talk to offline.

It speaks just enough of the Gemini API (``generativelanguage``, ``v1beta``) to drive whole agent
sessions of Gemini CLI 0.61 (``GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT``):

- ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``, an agent step: a request that
  carries ``tools`` is answered with the next step of a script (a text, a ``functionCall``, or
  either after a thought), as Server-Sent Events ``data: <GenerateContentResponse>\\r\\n\\r\\n``
  (no ``[DONE]``): a thought chunk first when the step thinks, then the answer with its
  ``finishReason`` and ``usageMetadata``;
- ``POST /v1beta/models/<model>:generateContent``, the same answer as one JSON response; a request
  without tools is a side request (the session summary, a routing or loop check) and gets a text,
  or a value built from its response schema when it asks for JSON;
- ``POST …:countTokens`` (``totalTokens``) and ``GET /v1beta/models``.

Every request is recorded (``GeminiServer.requests``), so a test can check what the model was
sent: after a resume the earlier turns are in ``contents``.

The server keeps no cursor: the step is read off the conversation the request carries, as the
number of model turns in its ``contents`` (each answered step is one). Retries get the same
answer; a resumed session goes on with the next step, and a rewound one, whose later turns are
gone, is answered from the step it was rewound to. A script may map marker strings to lists of
steps: a conversation follows the list whose marker occurs in its first prompt (Gemini CLI's
injected ``<session_context>`` message is not a prompt; the empty marker is the default), so a
subagent or a second session can run a script of its own.

Standard library only. In a test it runs in a background thread (``with GeminiServer(script) as
server``); as a script it serves until interrupted, e.g. ::

    python -m tests.e2e.gemini_server --script steps.json --log requests.jsonl

where ``steps.json`` is a list of steps (or an object of marker → list): ``{"text": "…"}``,
``{"call": "run_shell_command", "args": {"command": "ls"}}``, either with ``"thought": "…"``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional, Union

from .model_server import (OUT_OF_SCRIPT, SIDE_ANSWER, STOP_POLL_S, Answer, ReceivedRequest, Text,
                           ToolCall)

__all__ = [
    "GeminiConversation",
    "GeminiServer",
    "GeminiStep",
    "GeminiScript",
    "Text",
    "Thinking",
    "ToolCall",
    "conversation_of",
    "contents_text",
    "load_script",
    "main",
    "side_text",
]

DEFAULT_MODEL = "gemini-2.5-pro"
OUTPUT_TOKENS = 5
"""The ``candidatesTokenCount`` of every answer."""

SUMMARY_CUE = "Summarize the user's primary intent"
"""How Gemini CLI 0.61 asks for a session's summary (sessionSummaryService)."""

# Messages Gemini CLI puts in a conversation that nobody typed (sessionUtils.isIgnoredUserContent).
_INJECTED_PREFIXES = ("<session_context>", "<hook_context>")
_ROUTE = re.compile(r"^/v1(?:beta|alpha)?/models/([^/:]+):([A-Za-z]+)$")


@dataclass(frozen=True)
class Thinking:
    """A step that thinks before it answers: a ``thought: true`` part (Gemini CLI reads a
    ``**subject**`` in it as the thought's subject), then ``answer``."""

    thought: str
    answer: Answer
    thought_tokens: int = 3


GeminiAnswer = Union[Text, ToolCall, Thinking]
GeminiStep = Union[Text, ToolCall, Thinking, Callable[[dict[str, Any]], GeminiAnswer]]
"""An answer, or a function of the request body returning one."""
GeminiScript = Union[Sequence[GeminiStep], Mapping[str, Sequence[GeminiStep]]]


@dataclass
class GeminiConversation:
    """What a request's ``contents`` say about the conversation it continues."""

    first_user_text: str = ""
    last_user_text: str = ""
    model_turns: int = 0
    function_responses: list[dict[str, Any]] = field(default_factory=list)


def _part_texts(parts: Any) -> list[str]:
    return [str(part["text"]) for part in parts or []
            if isinstance(part, dict) and isinstance(part.get("text"), str)
            and not part.get("thought")]


def conversation_of(body: Mapping[str, Any]) -> GeminiConversation:
    """The first and last prompt, the model turns and the function responses of a request."""
    conversation = GeminiConversation()
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        parts = content["parts"] if isinstance(content.get("parts"), list) else []
        if content.get("role") == "model":
            conversation.model_turns += 1
            continue
        for part in parts:
            if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                conversation.function_responses.append(part["functionResponse"])
        text = "\n".join(t for t in _part_texts(parts)
                         if not t.lstrip().startswith(_INJECTED_PREFIXES)).strip()
        if not text:
            continue
        if not conversation.first_user_text:
            conversation.first_user_text = text
        conversation.last_user_text = text
    return conversation


def contents_text(body: Mapping[str, Any]) -> str:
    """Every text of a request's ``contents`` (prompts, answers, function responses as JSON), one
    per line: what a test searches for an earlier turn."""
    lines: list[str] = []
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        for part in content.get("parts") or []:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                lines.append(part["text"])
            for key in ("functionCall", "functionResponse"):
                if key in part:
                    lines.append(json.dumps(part[key], sort_keys=True))
    return "\n".join(lines)


def _sample(schema: Any, depth: int = 0) -> Any:
    """A value matching a (simple) JSON schema: what a side request that wants JSON gets."""
    if not isinstance(schema, dict) or depth > 8:
        return SIDE_ANSWER
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = str(schema.get("type", "")).lower()
    if kind == "object" or isinstance(schema.get("properties"), dict):
        properties = schema.get("properties") or {}
        return {key: _sample(value, depth + 1) for key, value in properties.items()}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return schema.get("minimum", 1)  # "a score from 1-100" is checked without a minimum
    if kind == "boolean":
        return False
    return SIDE_ANSWER


class GeminiServer:
    """A threaded HTTP server on 127.0.0.1 (a free port, or ``port``) answering from a script.

    Use as a context manager, or call ``start()`` and ``stop()``.
    """

    def __init__(self, script: GeminiScript = (), *, model: str = DEFAULT_MODEL,
                 port: int = 0) -> None:
        if isinstance(script, Mapping):
            self.scripts: dict[str, list[GeminiStep]] = {k: list(v) for k, v in script.items()}
        else:
            self.scripts = {"": list(script)}
        self.model = model
        self.requests: list[ReceivedRequest] = []
        self._wanted_port = port
        self._lock = threading.Lock()
        self._httpd: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self.on_request: Optional[Callable[[ReceivedRequest], None]] = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> GeminiServer:
        """Bind 127.0.0.1 and serve from a daemon thread."""
        server = self

        class Handler(_Handler):
            gemini_server = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._wanted_port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": STOP_POLL_S},
                                        name="gemini-server", daemon=True)
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

    def __enter__(self) -> GeminiServer:
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
            raise RuntimeError("gemini server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``, what ``GOOGLE_GEMINI_BASE_URL`` takes."""
        return f"http://127.0.0.1:{self.port}"

    # -- views for assertions --------------------------------------------------------------------

    def agent_requests(self) -> list[ReceivedRequest]:
        """The agent steps received (requests that carried tools), in order."""
        with self._lock:
            return [r for r in self.requests if r.answer.startswith("step")]

    def side_requests(self) -> list[ReceivedRequest]:
        """The requests without tools (session summaries, checks), in order."""
        with self._lock:
            return [r for r in self.requests if r.answer.startswith("side")]

    def _record(self, request: ReceivedRequest) -> None:
        with self._lock:
            self.requests.append(request)
        if self.on_request is not None:
            self.on_request(request)

    # -- answering -------------------------------------------------------------------------------

    def _script_key(self, first_user_text: str) -> str:
        best = ""
        for marker in self.scripts:
            if marker and marker in first_user_text and len(marker) > len(best):
                best = marker
        return best

    def answer(self, body: dict[str, Any]) -> tuple[str, GeminiAnswer]:
        """The label (``step N`` or ``side``) and the answer for one model request."""
        if not body.get("tools"):
            return "side", Text(SIDE_ANSWER)
        conversation = conversation_of(body)
        script = self.scripts.get(self._script_key(conversation.first_user_text), [])
        done = conversation.model_turns
        if done >= len(script):
            return f"step {done}", Text(OUT_OF_SCRIPT)
        step = script[done]
        if not isinstance(step, (Text, ToolCall, Thinking)):
            step = step(body)
        return f"step {done}", step


# -- the GenerateContentResponse -----------------------------------------------------------------


def _answer_part(answer: Answer) -> dict[str, Any]:
    if isinstance(answer, ToolCall):
        return {"functionCall": {"name": answer.name, "args": answer.input}}
    return {"text": answer.text}


def _usage(prompt_tokens: int, thought_tokens: int) -> dict[str, Any]:
    usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": OUTPUT_TOKENS,
             "totalTokenCount": prompt_tokens + OUTPUT_TOKENS + thought_tokens,
             "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt_tokens}]}
    if thought_tokens:
        usage["thoughtsTokenCount"] = thought_tokens
    return usage


def _chunks(model: str, answer: GeminiAnswer, prompt_tokens: int) -> Iterator[dict[str, Any]]:
    """The streamed chunks of one answer (the last holds the finish reason and the usage)."""
    response_id = uuid.uuid4().hex[:22]
    thought_tokens = 0
    if isinstance(answer, Thinking):
        thought_tokens = answer.thought_tokens
        yield {"candidates": [{"content": {"role": "model", "parts": [
                   {"text": answer.thought, "thought": True}]}, "index": 0}],
               "usageMetadata": {"promptTokenCount": prompt_tokens,
                                 "totalTokenCount": prompt_tokens + thought_tokens,
                                 "thoughtsTokenCount": thought_tokens},
               "modelVersion": model, "responseId": response_id}
        answer = answer.answer
    tokens = answer.input_tokens if answer.input_tokens is not None else prompt_tokens
    yield {"candidates": [{"content": {"role": "model", "parts": [_answer_part(answer)]},
                           "finishReason": "STOP", "index": 0}],
           "usageMetadata": _usage(tokens, thought_tokens),
           "modelVersion": model, "responseId": response_id}


def _whole(model: str, answer: GeminiAnswer, prompt_tokens: int) -> dict[str, Any]:
    """The non-streamed form of the same answer: every part in one candidate."""
    chunks = list(_chunks(model, answer, prompt_tokens))
    whole = dict(chunks[-1])
    parts = [part for chunk in chunks for part in chunk["candidates"][0]["content"]["parts"]]
    whole["candidates"] = [{**chunks[-1]["candidates"][0],
                            "content": {"role": "model", "parts": parts}}]
    return whole


def side_text(body: Mapping[str, Any]) -> str:
    """The answer to a side request: a value of its response schema when it wants JSON (the
    model router's complexity score, ...); for Gemini CLI's session summary (the title of a
    previous session), ``Scripted: `` and the session's first prompt; else SIDE_ANSWER."""
    config = body.get("generationConfig")
    config = config if isinstance(config, dict) else {}
    if config.get("responseMimeType") == "application/json":
        return json.dumps(_sample(config.get("responseJsonSchema") or config.get("responseSchema")))
    text = contents_text(body)
    if SUMMARY_CUE in text:
        first = re.search(r"^User: (?!<)(.+)$", text, re.M)
        if first:
            return f"Scripted: {first.group(1).strip()[:60]}"
    return SIDE_ANSWER


def _side_answer(model: str, body: dict[str, Any], prompt_tokens: int) -> dict[str, Any]:
    return _whole(model, Text(side_text(body)), prompt_tokens)


# -- HTTP ----------------------------------------------------------------------------------------


def _estimate_tokens(body: dict[str, Any]) -> int:
    """A prompt's tokens: a quarter of its ``contents`` as JSON (the system prompt, which holds
    dates and paths, is left out so the figure is the same on every run of a script)."""
    return max(1, len(json.dumps(body.get("contents") or [], sort_keys=True)) // 4)


class _Handler(BaseHTTPRequestHandler):
    gemini_server: GeminiServer
    protocol_version = "HTTP/1.1"
    server_version = "ScriptedGemini/1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Keep test output quiet: ``GeminiServer.requests`` is the log."""

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def _dispatch(self) -> None:
        body = self._read_body()
        request = ReceivedRequest(method=self.command, path=self.path,
                                  headers={k.lower(): v for k, v in self.headers.items()},
                                  body=body)
        try:
            request.answer, reply = self._reply(body, self.path.split("?", 1)[0])
        finally:
            # Recorded before the reply is sent: a test that got its answer sees its request.
            self.gemini_server._record(request)
        reply()

    def _reply(self, body: Any, path: str) -> tuple[str, Callable[[], None]]:
        """The label of a request and the function that sends its answer."""
        server = self.gemini_server
        route = _ROUTE.match(path)
        if self.command == "POST" and route and isinstance(body, dict):
            model, method = route.group(1), route.group(2)
            tokens = _estimate_tokens(body)
            if method == "countTokens":
                return "count_tokens", lambda: self._send_json(200, {"totalTokens": tokens})
            if method in ("generateContent", "streamGenerateContent"):
                label, answer = server.answer(body)
                if label == "side":
                    whole = _side_answer(model, body, tokens)
                    chunks = [whole]
                else:
                    chunks = list(_chunks(model, answer, tokens))
                    whole = _whole(model, answer, tokens)
                if method == "streamGenerateContent":
                    return label, lambda: self._send_sse(chunks)
                return label, lambda: self._send_json(200, whole)
            return "not_found", lambda: self._send_json(404, _error(404, f"no method {method}"))
        if self.command == "GET" and path.rstrip("/").endswith("/models"):
            models = {"models": [{"name": f"models/{server.model}",
                                  "supportedGenerationMethods": ["generateContent",
                                                                 "countTokens"]}]}
            return "models", lambda: self._send_json(200, models)
        return "not_found", lambda: self._send_json(404, _error(404, f"no route {path}"))

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_sse(self, chunks: Sequence[dict[str, Any]]) -> None:
        # The stream ends with the connection: no chunked encoding or length to get wrong.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode("utf-8"))
            self.wfile.flush()


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": "NOT_FOUND"}}


# -- as a script ---------------------------------------------------------------------------------


def _step_of(data: Any) -> GeminiAnswer:
    """A step of a JSON script.

    Raises:
        ValueError: the step is neither a text nor a call.
    """
    if not isinstance(data, dict):
        raise ValueError(f"a step must be an object, not {data!r}")
    answer: Answer
    if isinstance(data.get("text"), str):
        answer = Text(data["text"])
    elif isinstance(data.get("call"), str):
        args = data.get("args", {})
        if not isinstance(args, dict):
            raise ValueError(f"the args of {data['call']} must be an object")
        answer = ToolCall(data["call"], args)
    else:
        raise ValueError(f"a step needs a text or a call: {data!r}")
    if isinstance(data.get("thought"), str):
        return Thinking(data["thought"], answer)
    return answer


def load_script(data: Any) -> GeminiScript:
    """A script from its JSON form: a list of steps, or an object of marker → list of steps.

    Raises:
        ValueError: a step is neither a text nor a call.
    """
    if isinstance(data, dict):
        return {str(marker): [_step_of(step) for step in steps] for marker, steps in data.items()}
    if isinstance(data, list):
        return [_step_of(step) for step in data]
    raise ValueError("a script is a list of steps or an object of marker -> list of steps")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Serve a JSON script until interrupted; print the base URL first."""
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.gemini_server",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--script", help="a JSON file: a list of steps, or marker -> steps")
    parser.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--log", help="append every request received to this JSONL file")
    args = parser.parse_args(argv)
    script: GeminiScript = ()
    if args.script:
        with open(args.script, encoding="utf-8") as handle:
            script = load_script(json.load(handle))
    server = GeminiServer(script, model=args.model, port=args.port)
    if args.log:
        log_path = args.log

        def log(request: ReceivedRequest) -> None:
            with open(log_path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"method": request.method, "path": request.path,
                                         "answer": request.answer, "body": request.body}) + "\n")

        server.on_request = log
    server.start()
    print(server.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
