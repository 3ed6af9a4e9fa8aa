"""The protocol of DESIGN.md §7 on a stream: newline-delimited JSON, one object per line.

UI → core: `{"id": "<client id>", "op": {"type": …}}` with the ops `configure`, `user_input`,
`interrupt`, `approval`, `resume`, `fork` and `shutdown`. Core → UI: the events of the session as
its events log stores them (`{"v":1,"seq":N,"ts":…,"session":…,"id":…,"msg":{"type":…}}`). Both
are runtime/wire.py's: an op is checked there (`wire.op_problem`) before it is carried out.

A bad op (not JSON, too long, unknown, missing a field, naming an unknown session) is answered by
an `error` event sent to this client only: it is not part of the session, so it is not stored
and its `seq` is null. The server keeps serving. `serve_stdio` is `cos protocol`: stdout carries
the wire only (whatever else writes to file descriptor 1, an agent's `print` included, goes to
stderr).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from coding_os import jsonwire
from coding_os.errors import CosError, InvalidInput
from coding_os.runtime import core, wire
from coding_os.runtime.core import SessionCore, SessionSettings, Subscription, Timeouts
from coding_os.runtime.lines import lone_surrogate, read_line

__all__ = ["LINE_MAX", "Server", "serve_stdio"]

LINE_MAX = 1 << 20  # a longer input line is refused (and skipped up to its newline)
# The ops that start a session of their own: refused on a connection that serves one (a job's).
_OWN_SESSION_OPS = (wire.CONFIGURE, wire.FORK)


class _Refused(Exception):
    """An op that gets an error event and nothing else."""


class Server:
    """Serves one client (a reader of lines and a writer of lines) over one session at a time."""

    def __init__(self, write: Callable[[bytes], None], *, agent: str | None = None,
                 cwd: str | None = None, env: Mapping[str, str] | None = None,
                 timeouts: Timeouts = Timeouts(), shared: SessionCore | None = None,
                 on_shutdown: Callable[[str | None], Awaitable[None]] | None = None) -> None:
        """`shared`: serve that session only, one of several clients of it (a job's runner);
        then `shutdown` calls `on_shutdown` and the end of this client's input only detaches
        it."""
        self._write = write
        self.agent = agent
        self.cwd = cwd or os.getcwd()
        self._env = env
        self._timeouts = timeouts
        self.core: SessionCore | None = shared
        self.shared = shared is not None
        self._on_shutdown = on_shutdown
        self._subscription: Subscription | None = None
        self._forwarder: asyncio.Task[None] | None = None
        self.done = False
        self.stopped = asyncio.Event()  # set by stop(): shut down now

    def stop(self) -> None:
        """Shut down as soon as the op being carried out is done (SIGTERM)."""
        self.done = True
        self.stopped.set()

    # -- output ----------------------------------------------------------------------------

    def _send(self, event: Mapping[str, Any]) -> None:
        self._write(jsonwire.dumps(event).encode("ascii") + b"\n")

    def send_error(self, message: str, reply_to: object = None) -> None:
        """An error for this client only: not stored, `seq` null."""
        self._send({"id": reply_to if isinstance(reply_to, (str, int)) else None, "seq": None,
                    "session": self.core.session if self.core else None,
                    "msg": {"type": wire.ERROR, "message": message, "fatal": False}})

    async def _forward(self, subscription: Subscription) -> None:
        while True:
            event = await subscription.get()
            if event is None:
                return
            self._send(event)

    async def _attach(self, session: SessionCore, after_seq: int) -> None:
        """Send this client the events of `session` after `after_seq`, then the live ones."""
        subscription = session.subscribe(after_seq)  # a bad seq leaves the old one in place
        await self._detach()
        self._subscription = subscription
        self._forwarder = asyncio.create_task(self._forward(self._subscription))

    async def _detach(self) -> None:
        subscription, forwarder = self._subscription, self._forwarder
        self._subscription = self._forwarder = None
        if subscription is not None:
            if self.core is not None:
                self.core.unsubscribe(subscription)
            subscription.close()
        if forwarder is not None:
            await forwarder  # what was handed to it is written before anything else

    def _not_shared(self, op: str) -> None:
        if self.shared:
            assert self.core is not None
            raise _Refused(f"{op}: this connection serves {self.core.session} only (a job's "
                           f"session); resume it, or start another session elsewhere")

    async def _switch(self, session: SessionCore, after_seq: int) -> None:
        """Serve `session` from now on (the previous one is shut down)."""
        await self._detach()
        if self.core is not None and self.core is not session:
            await self.core.shutdown()
        self.core = session
        await self._attach(session, after_seq)

    # -- input -----------------------------------------------------------------------------

    async def handle_line(self, line: bytes) -> None:
        """Carry out one line of input; a bad one gets an error event."""
        reply_to: object = None
        try:
            try:
                message = jsonwire.loads(line)
            except ValueError:
                raise _Refused("not JSON: each line must be one JSON object") from None
            if not isinstance(message, dict):
                raise _Refused("each line must be a JSON object with an op")
            reply_to = message.get("id")
            if reply_to is not None and not isinstance(reply_to, (str, int)):
                raise _Refused("the id must be a string or an integer")
            # Only a \u escape decodes to a lone surrogate (raw bytes must be UTF-8).
            surrogate = lone_surrogate(message) if b"\\u" in line else None
            if surrogate is not None:
                raise _Refused(f"the line holds a lone surrogate ({surrogate}), which is no "
                               "text: each string must be UTF-8 text (a surrogate pair is)")
            op = message.get("op")
            kind = op.get("type") if isinstance(op, dict) else None
            if kind in _OWN_SESSION_OPS:
                self._not_shared(kind)
            problem = wire.op_problem(op)
            if problem is not None:
                raise _Refused(problem)
            submission = str(reply_to) if reply_to is not None else None
            await getattr(self, f"_op_{kind}")(op, submission)
        except _Refused as exc:
            self.send_error(str(exc), reply_to)
        except CosError as exc:
            self.send_error(str(exc), reply_to)

    def _session(self) -> SessionCore:
        if self.core is None or self.core.closed:
            raise _Refused("no session: send configure (a new one) or resume (an old one) "
                           "first")
        return self.core

    # Each `_op_<type>` is given an op `wire.op_problem` found nothing wrong with.

    async def _op_configure(self, op: wire.Configure, reply_to: str | None) -> None:
        agent = op.get("agent") or (self.core.agent if self.core else self.agent)
        if agent is None:
            raise _Refused(f"{wire.CONFIGURE}: the field 'agent' is missing")
        cwd = op.get("cwd") or (
            self.core.settings.cwd if self.core and self.core.settings else self.cwd)
        options = dict(op.get("options") or {})
        for name in ("command", "target"):
            if op.get(name) is not None:
                options[name] = op.get(name)
        prefix, colon, command = agent.partition(":")
        if colon and prefix == "acp":  # acp:<command line> names the agent and its command
            agent = prefix
            options.setdefault("command", command)
        settings = SessionSettings(
            agent=agent, cwd=os.path.abspath(cwd), model=op.get("model"),
            permission_mode=op.get("permission_mode"), options=options)
        if self.core is not None and not self.core.closed:
            await self.core.configure(settings, reply_to)
            return
        session = core.create_session(settings, env=self._env, timeouts=self._timeouts)
        await self._switch(session, 0)
        await session.configure(None, reply_to)

    async def _op_user_input(self, op: wire.UserInput, reply_to: str | None) -> None:
        await self._session().user_input(op["text"], reply_to)

    async def _op_interrupt(self, op: wire.Interrupt, reply_to: str | None) -> None:
        await self._session().interrupt(reply_to)

    async def _op_approval(self, op: wire.Approval, reply_to: str | None) -> None:
        await self._session().approval(op["request"], op["decision"] == wire.ALLOW, reply_to)

    async def _op_resume(self, op: wire.Resume, reply_to: str | None) -> None:
        session, last_seq = op["session"], op["last_seq"]
        if self.core is not None and not self.core.closed and self.core.session == session:
            if last_seq > self.core.last_seq:
                raise _Refused(f"last_seq {last_seq} is beyond the end of {session} "
                               f"(its last seq is {self.core.last_seq})")
            await self._attach(self.core, last_seq)
            return
        self._not_shared(wire.RESUME)
        probe = core.open_session(session, self.cwd, env=self._env, timeouts=self._timeouts,
                                  repair=False)  # nothing written before last_seq is checked
        await probe.shutdown()
        if last_seq > probe.last_seq:
            raise _Refused(f"last_seq {last_seq} is beyond the end of {session} "
                           f"(its last seq is {probe.last_seq})")
        opened = core.open_session(session, self.cwd, env=self._env, timeouts=self._timeouts)
        await self._switch(opened, last_seq)

    async def _op_fork(self, op: wire.Fork, reply_to: str | None) -> None:
        forked = core.fork_session(op["session"], self.cwd, op.get("at"), env=self._env,
                                   timeouts=self._timeouts)
        await self._switch(forked, 0)
        await forked.configure(None, reply_to)

    async def _op_shutdown(self, op: wire.Shutdown, reply_to: str | None) -> None:
        if self.shared:
            if self._on_shutdown is not None:
                await self._on_shutdown(reply_to)
            self.done = True
            await self._detach()
            return
        await self.close(reply_to)

    async def close(self, reply_to: str | None = None) -> None:
        """Shut the session down (a shared one is left running) and write what is left to
        send; the server is done."""
        self.done = True
        if self.core is not None and not self.shared:
            await self.core.shutdown(reply_to)
        await self._detach()

    async def open(self, session: str) -> None:
        """Serve `session` (`--session`): its events from now on; `resume` replays older ones.

        Raises:
            InvalidId, NotFound, CrossProject: as `core.open_session`.
        """
        opened = core.open_session(session, self.cwd, env=self._env, timeouts=self._timeouts)
        await self._switch(opened, opened.last_seq)


async def serve(reader: asyncio.StreamReader, server: Server, session: str | None = None) -> int:
    """Serve ops from `reader` until `shutdown` or the end of input (after which the running
    task is let finish); the exit status."""
    if session is not None:
        try:
            await server.open(session)
        except CosError as exc:
            server.send_error(str(exc))
    while not server.done:
        line, too_long = await read_line(reader)
        if too_long:
            server.send_error(f"the line is longer than {LINE_MAX} bytes; it was skipped")
            continue
        if line is None:
            break
        if line.strip():
            await server.handle_line(line)
    if not server.done and server.core is not None and not server.core.closed and (
            not server.shared):
        # The end of input lets the running task finish, unless a stop comes first; nobody is
        # left to answer its approval requests, so they are denied.
        await server.core.unattended()
        idle = asyncio.create_task(server.core.wait_idle())
        stopped = asyncio.create_task(server.stopped.wait())
        await asyncio.wait({idle, stopped}, return_when=asyncio.FIRST_COMPLETED)
        idle.cancel()
        stopped.cancel()
    await server.close()
    return 0


def serve_stdio(*, session: str | None = None, agent: str | None = None,
                cwd: str | None = None, env: Mapping[str, str] | None = None) -> int:
    """`cos protocol`: serve stdin and stdout until shutdown, the end of stdin or SIGTERM."""
    wire = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # nothing but the wire reaches the client's stdout
    sys.stdout = sys.stderr

    def write(data: bytes) -> None:
        wire.write(data)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=LINE_MAX)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        server = Server(write, agent=agent, cwd=cwd, env=env)
        serving = asyncio.create_task(serve(reader, server, session))

        def stop() -> None:  # SIGTERM: shut down now, the running task aborted (shutdown)
            server.stop()
            reader.feed_eof()

        loop.add_signal_handler(signal.SIGTERM, stop)
        return await serving

    try:
        return asyncio.run(main())
    finally:
        wire.close()
