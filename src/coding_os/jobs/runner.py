"""A job's runner (DESIGN.md §6): `python -m coding_os.jobs.runner JOB_ID`, one process per
job, detached from whoever started it (control.spawn), so that neither the command that made the job
nor the supervisor has to live for the job to go on.

The runner takes the job's lock (a second runner of the same job finds it held and exits 3),
runs the job's session on the engine (runtime/core.py) — a new session given the job's first
prompt, or, respawned, the job's session reopened so the next input resumes the native one —
serves the protocol of §7 on the job's socket to any number of clients at once, and writes the
job's state on every event that changes it: STATE_SETTLE_S after the event, with the changes of
the events that came meanwhile, in a thread — so the write (an fsync) and its thread are on no
event's way to the clients, and a task that starts and ends within that time is one write.
It ends:

- on a client's `shutdown` op or SIGTERM (`cos stop`): the running task is aborted, the job is
  `stopped`;
- when a command's job (`exec`) has run its command: `done` with its exit code 0, `failed` with
  another;
- when the agent dies (a fatal `error`): `failed`; `cos respawn` resumes it.

Every process its backends start dies with it (runtime/children.py): each in a session of its own
listed in the job's `sessions`, all of them ended when the runner ends, and killed by the kernel
(the parent-death signal) or by whoever finds the runner dead (supervisor.mark_failed) when it is
killed. A client that stops reading is dropped once CLIENT_BUFFER_MAX bytes wait for it (it
resumes from the last seq it has, as any client may).

Its last write is `pid: null`, before it lets go of its lock. A runner that is killed cannot write
it: a pid left in the state of a job whose lock nobody holds is how the supervisor tells that its
runner died (jobs.runner_died).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from coding_os.jobs import jobs
from coding_os.daemon import sockets
from coding_os.jobs.jobs import Job
from coding_os.runtime import wire
from coding_os.errors import CosError

__all__ = ["main", "take_lock", "run_locked", "Runner", "LOCK_WAIT_S", "EXIT_RUNNING",
           "CLIENT_BUFFER_MAX", "STATE_SETTLE_S"]

LOCK_WAIT_S = 5.0  # for a reader's momentary lock (jobs.runner_alive, unless_running) to go
EXIT_RUNNING = 3  # another runner of the job holds its lock
CLIENT_BUFFER_MAX = 8 << 20  # bytes waiting for a client; beyond, the client is dropped
# How long after an event the job's state is written (with what the events after it changed):
# the event reaches the clients (`cos acp`, then the editor) before the write and its thread take
# the machine's time (acp_latency.py).
STATE_SETTLE_S = 0.02


def take_lock(job: Job) -> int | None:
    """The job's lock, held, with this process named in it as the taker of the job's start
    (jobs.note_taker); None when another runner holds it."""
    fd = os.open(job.path(jobs.LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            jobs.note_taker(fd, jobs.reload(job))
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.02)


class Runner:
    """One job's session on the engine, its socket, and its state."""

    def __init__(self, job: Job, env: Mapping[str, str]) -> None:
        self.job = job
        self.env = env
        self.core: Any = None
        self.stopping = asyncio.Event()
        self.stop_reason = "stopped"
        self.exit_code: int | None = None
        # The approval requests not answered yet, oldest first: what each asks (approvals.py).
        self.pending: dict[object, dict[str, Any]] = {}
        self.clients: set[asyncio.Task[None]] = set()
        self.writing = threading.Lock()
        # What the events so far changed in the job's state and the tracker has yet to write.
        self.unwritten: dict[str, Any] = {}

    def write(self, **changes: Any) -> None:
        """Write `changes` into the job's state (in the loop, or in a thread for the
        tracker: one write at a time, each over the one before)."""
        with self.writing:
            self._write(changes)

    def _write(self, changes: Mapping[str, Any]) -> None:
        try:
            self.job = jobs.update(self.job, **changes)
        except CosError as exc:  # a full disk: the events log keeps what happened
            sys.stderr.write(f"cos runner {self.job.id}: state not written: {exc}\n")

    # -- the session ---------------------------------------------------------------------

    def open_core(self) -> bool:
        """Make or reopen the job's session; whether it is new (its first prompt is due)."""
        from coding_os.runtime.core import SessionSettings, create_session, open_session

        state = self.job.state
        if state.get("cos_session"):
            self.core = open_session(state["cos_session"], state["cwd"], env=self.env)
            return False
        options = state.get("options")
        settings = SessionSettings(
            agent=state["agent"], cwd=state["cwd"], model=state.get("model"),
            permission_mode=state.get("permission_mode"),
            options=options if isinstance(options, dict) else {})
        resume = state.get("resume_native")  # a session of the agent's own it goes on in
        self.core = create_session(settings, env=self.env,
                                   native_id=resume if isinstance(resume, str) else None)
        self.write(cos_session=self.core.session, events=self.core.events_path)
        return True

    async def track(self) -> None:
        """Follow the session's events into the job's state: what an event changes is written
        STATE_SETTLE_S after it, together with what the events of that time changed, in a
        thread; what is left is written when the session's events end."""
        subscription = self.core.subscribe(self.core.last_seq)
        ended = False
        while not ended:
            event = await subscription.get()
            if event is None:
                break
            self.note(event)
            if not self.unwritten:
                continue
            await asyncio.sleep(STATE_SETTLE_S)
            while subscription.waiting():
                event = await subscription.get()
                if event is None:
                    ended = True
                    break
                self.note(event)
            changes, self.unwritten = self.unwritten, {}
            await asyncio.to_thread(self.write, **changes)
        if self.unwritten:
            changes, self.unwritten = self.unwritten, {}
            await asyncio.to_thread(self.write, **changes)

    def note(self, event: Mapping[str, Any]) -> None:
        """Add what `event` changes in the job's state to what is to be written."""
        changes = self.on_event(event)
        if changes is not None:
            self.unwritten.update(changes)

    def on_event(self, event: Mapping[str, Any]) -> dict[str, Any] | None:
        """What `event` changes in the job's state as written and still to be written (None:
        nothing worth a write); a job that ends with it is stopped."""
        msg = event["msg"]
        kind = msg["type"]
        if event.get("seq") is None:  # not stored: the session halted (a full disk)
            if kind == wire.ERROR and msg.get("fatal"):
                self.stop("failed")
                return {"state": "failed", "status": None, "waitingFor": None,
                        "error": msg.get("message"), "last_seq": self.core.last_seq}
            return None
        changes: dict[str, Any] = {"last_seq": event["seq"]}
        if kind == wire.SESSION_CONFIGURED:
            changes["sessionId"] = msg.get("native_id")
        elif kind == wire.TASK_STARTED:
            self.pending.clear()
            changes.update(state="working", status="busy", waitingFor=None)
        elif kind == wire.APPROVAL_REQUEST:
            from coding_os.jobs.approvals import pending

            self.pending.setdefault(msg.get("request"), pending(dict(msg)))
            changes.update(state="blocked", status="waiting", waitingFor="permission prompt",
                           approval=next(iter(self.pending.values())))
        elif kind in (wire.TOOL_CALL, wire.TOOL_RESULT, wire.AGENT_MESSAGE) and self.pending:
            # The agent goes on: the request it waited for was answered.
            self.pending.clear()
            changes.update(state="working", status="busy", waitingFor=None, approval=None)
        elif kind in wire.TASK_ENDS:
            self.pending.clear()
            changes.update(state="done", status="idle", waitingFor=None, approval=None)
            if kind == wire.TASK_COMPLETE and self.job.state.get("agent") == "exec":
                usage = msg.get("usage")
                code = usage.get("exit_code") if isinstance(usage, dict) else None
                self.exit_code = code if isinstance(code, int) else None
                changes["exit_code"] = self.exit_code
                if self.exit_code not in (None, 0):  # the command failed: so is its job
                    changes["state"] = "failed"
                    self.stop("failed")
                else:
                    self.stop("done")
            elif kind == wire.TURN_ABORTED and msg.get("reason") == wire.ABORT_BACKEND_EXIT:
                changes["state"] = "failed"
                self.stop("failed")
        elif kind == wire.ERROR and msg.get("fatal"):
            changes["error"] = msg.get("message")
            if self.core is not None and self.core.task is None:
                changes["state"] = "failed"
                self.stop("failed")
        known = {**self.job.state, **self.unwritten}
        if any(known.get(name) != value for name, value in changes.items()
               if name != "last_seq"):
            return changes
        return None  # a bare new seq is not worth a write

    def stop(self, reason: str) -> None:
        if not self.stopping.is_set():
            self.stop_reason = reason
            self.stopping.set()

    async def on_shutdown(self, reply_to: str | None) -> None:
        self.stop("stopped")

    # -- the socket ----------------------------------------------------------------------

    async def serve_client(self, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
        from coding_os.daemon.sockets import peer_uid
        from coding_os.runtime.protocol import Server, serve

        sock = writer.get_extra_info("socket")
        if sock is not None and peer_uid(sock) not in (None, os.geteuid()):
            writer.close()
            return
        transport = writer.transport

        def send(data: bytes) -> None:
            if transport.is_closing():
                return
            if transport.get_write_buffer_size() + len(data) > CLIENT_BUFFER_MAX:
                transport.abort()  # it stopped reading: dropped, never buffered without bound
                return
            writer.write(data)

        server = Server(send, cwd=self.job.state["cwd"], env=self.env,
                        shared=self.core, on_shutdown=self.on_shutdown)
        try:
            await serve(reader, server)
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self.serve_client(reader, writer))
        self.clients.add(task)
        task.add_done_callback(self.clients.discard)

    async def run(self) -> int:
        from coding_os.runtime.protocol import LINE_MAX

        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.stop, "stopped")
        loop.add_signal_handler(signal.SIGINT, self.stop, "stopped")
        try:
            if self.job.state.get("checked_out") is False:  # its worktree's files, first
                from coding_os.jobs.worktrees import check_out

                await asyncio.to_thread(check_out, str(self.job.state["worktree"]))
                self.write(checked_out=True)
            carry = self.job.state.get("carry")
            if isinstance(carry, str) and not self.job.state.get("carried"):
                from coding_os.jobs.carry import carry_into  # the changes it starts with

                await asyncio.to_thread(carry_into, str(self.job.state["worktree"]), carry)
                self.write(carried=True)
            first = self.open_core()
        except CosError as exc:
            self.write(state="failed", pid=None, error=str(exc))
            sys.stderr.write(f"cos runner {self.job.id}: {exc}\n")
            return 1
        self.write(pid=os.getpid(), state="done" if not first else "working",
                   status="idle" if not first else "busy", waitingFor=None, approval=None,
                   last_seq=self.core.last_seq)
        tracker = loop.create_task(self.track())
        path = jobs.socket_path(self.job)
        listener, inode = sockets.bind(path)
        server = await asyncio.start_unix_server(self.accept, sock=listener, limit=LINE_MAX)
        try:
            if first:
                try:
                    await self.core.configure()
                    prompt = self.job.prompt
                    if prompt is not None and not self.stopping.is_set():
                        await self.core.user_input(prompt)
                except CosError as exc:
                    self.write(state="failed", error=str(exc))
                    self.stop("failed")
            await self.stopping.wait()
        finally:
            server.close()
            sockets.unlink(path, inode)
            await self.core.shutdown()
            from coding_os.runtime.children import end

            end(self.job.path(jobs.SESSIONS))  # what its agent or command left running
            await asyncio.wait_for(tracker, 10)
            for task in list(self.clients):
                task.cancel()
            final: dict[str, Any] = {"pid": None, "status": None, "waitingFor": None,
                                     "approval": None}
            if self.stop_reason in ("stopped", "failed"):
                final["state"] = self.stop_reason
            elif self.job.state.get("state") not in ("done", "failed"):
                final["state"] = "done"
            self.write(**final)
        return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m coding_os.jobs.runner JOB_ID\n")
        return 2
    try:
        os.setsid()  # a session and process group of its own, led by the runner
    except OSError:
        pass  # leads one already
    try:
        job = jobs.load(args[0])
    except CosError as exc:
        sys.stderr.write(f"cos runner: {exc}\n")
        return 1
    lock = take_lock(job)
    if lock is None:
        sys.stderr.write(f"cos runner: job {job.id} has a runner already\n")
        return EXIT_RUNNING
    return run_locked(job, lock)


def run_locked(job: Job, lock: int) -> int:
    """Run the job whose lock `lock` this process holds (take_lock), in this process's
    environment, until it ends; the lock is let go at the end, after the job's last state."""
    from coding_os.runtime.children import end, record_sessions

    try:
        job = jobs.reload(job)
        if job.state.get("state") == "stopped":
            return 0  # stopped before it started: a stopped job never runs again by itself
        try:
            end(job.path(jobs.SESSIONS))  # what a runner of it before, killed, left
            record_sessions(job.path(jobs.SESSIONS))
        except OSError as exc:
            sys.stderr.write(f"cos runner {job.id}: {jobs.SESSIONS} not opened: {exc}\n")
        return asyncio.run(Runner(job, os.environ).run())
    finally:
        os.close(lock)


if __name__ == "__main__":
    sys.exit(main())
