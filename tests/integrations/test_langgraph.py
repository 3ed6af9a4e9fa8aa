"""coding_os.integrations.langgraph: LangGraph's own conformance suite against
`CosCheckpointSaver`, and the threads it stores as cos sessions a user sees."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate

from coding_os.errors import InvalidInput
from coding_os.integrations.langgraph import CosCheckpointSaver
from coding_os.sessions import transcript
from tests.helpers import cos, cos_json, git


def _fresh_project(root: Path, name: str) -> Path:
    path = root / name
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    with open(path / ".git" / "info" / "exclude", "a", encoding="utf-8") as f:
        f.write("/.coding-os/\n")
    return path


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The project's database: the default SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "postgres":
        monkeypatch.setenv("COS_DATABASE_URL", request.getfixturevalue("pg_url"))
    return str(request.param)


@pytest.mark.slow
def test_cos_checkpoint_saver_passes_the_langgraph_checkpoint_conformance_suite(
        tmp_path: Path, backend: str) -> None:
    made = []

    @checkpointer_test(name="CosCheckpointSaver")
    async def saver() -> AsyncIterator[CosCheckpointSaver]:
        made.append(_fresh_project(tmp_path, f"p{len(made)}"))
        yield CosCheckpointSaver(project=made[-1])

    report = asyncio.run(validate(saver))
    failures = {name: result.failures for name, result in report.results.items()
                if result.passed is False}
    assert failures == {}
    assert report.passed_all_base(), report.to_dict()
    passed = {name for name, result in report.results.items() if result.passed}
    assert {"copy_thread", "delete_for_runs"} <= passed  # prune is not implemented


def _config(thread: str, checkpoint_id: str | None = None) -> dict[str, object]:
    configurable: dict[str, object] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def test_a_thread_is_a_langgraph_session_listed_by_cos_sessions(project: Path,
                                                                backend: str) -> None:
    saver = CosCheckpointSaver(project=project)
    checkpoint = empty_checkpoint()
    saver.put(_config("thread-1"), checkpoint, {"source": "input", "step": -1}, {})

    session = saver.session_of("thread-1")
    assert session is not None and session.startswith("ses-langgraph-")
    listed = cos_json("sessions", cwd=project)
    rows = listed["sessions"] if isinstance(listed, dict) else listed
    assert isinstance(rows, list)
    row = next(r for r in rows if r["id"] == session)
    assert row["agent"] == "langgraph"
    assert row["native_id"] == "thread-1"


def test_another_saver_of_the_project_reads_the_thread_a_first_one_wrote(project: Path) -> None:
    first = CosCheckpointSaver(project=project)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"count": 3}
    checkpoint["channel_versions"] = {"count": first.get_next_version(None, None)}
    written = first.put(_config("t"), checkpoint, {"step": 0},
                        dict(checkpoint["channel_versions"]))
    first.put_writes(written, [("count", 4)], task_id="task-1")

    second = CosCheckpointSaver(project=str(project))
    found = second.get_tuple(_config("t"))
    assert found is not None
    assert found.checkpoint["id"] == checkpoint["id"]
    assert found.checkpoint["channel_values"] == {"count": 3}
    assert found.pending_writes == [("task-1", "count", 4)]
    assert found.metadata["step"] == 0


def test_deleting_a_thread_hides_its_checkpoints_and_keeps_its_transcript(project: Path) -> None:
    saver = CosCheckpointSaver(project=project)
    saver.put(_config("t"), empty_checkpoint(), {"step": 0}, {})
    session = saver.session_of("t")
    assert session is not None

    saver.delete_thread("t")

    assert saver.get_tuple(_config("t")) is None
    assert list(saver.list(_config("t"))) == []
    entries = transcript.read(transcript.transcript_path(saver.tiers, session)).entries
    assert [e.get("name") for e in entries if e["type"] == "event"] == [
        "langgraph.checkpoint", "langgraph.delete"]
    saver.put(_config("t"), empty_checkpoint(), {"step": 1}, {})
    assert saver.session_of("t") == session  # the thread goes on in the same session


def test_a_config_without_a_thread_id_is_refused_with_a_clear_error(project: Path) -> None:
    saver = CosCheckpointSaver(project=project)
    with pytest.raises(InvalidInput, match="thread_id"):
        saver.put({"configurable": {}}, empty_checkpoint(), {}, {})


def test_a_project_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="not a directory"):
        CosCheckpointSaver(project=tmp_path / "missing")
    assert not (tmp_path / "missing").exists()


def test_processes_writing_one_thread_at_once_share_one_session(project: Path) -> None:
    script = textwrap.dedent("""
        import sys
        from langgraph.checkpoint.base import empty_checkpoint
        from coding_os.integrations.langgraph import CosCheckpointSaver
        saver = CosCheckpointSaver(project=sys.argv[1])
        for step in range(10):
            saver.put({"configurable": {"thread_id": "shared", "checkpoint_ns": ""}},
                      empty_checkpoint(), {"step": step, "writer": sys.argv[2]}, {})
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(project), str(n)])
             for n in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]

    saver = CosCheckpointSaver(project=project)
    assert len(list(saver.list(_config("shared")))) == 30
    folder = Path(saver.tiers.agent_dir("langgraph")) / "transcripts"
    assert len(list(folder.glob("*.jsonl"))) == 1


def test_messages_of_a_graph_are_written_as_user_and_assistant_entries(project: Path) -> None:
    pytest.importorskip("langgraph.graph")
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    def reply(state: MessagesState) -> dict[str, object]:
        return {"messages": [AIMessage(content=f"echo: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    saver = CosCheckpointSaver(project=project)
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "chat"}}
    graph.invoke({"messages": [("user", "hello")]}, config)
    graph.invoke({"messages": [("user", "again")]}, config)

    assert [m.content for m in graph.get_state(config).values["messages"]] == [
        "hello", "echo: hello", "again", "echo: again"]
    session = saver.session_of("chat")
    assert session is not None
    entries = transcript.read(transcript.transcript_path(saver.tiers, session)).entries
    assert [(e["type"], e["text"]) for e in entries if e["type"] in ("user", "assistant")] == [
        ("user", "hello"), ("assistant", "echo: hello"),
        ("user", "again"), ("assistant", "echo: again")]
    exported = cos("export", session, "--format", "md", cwd=project)
    assert exported.returncode == 0, exported.stderr
    assert "hello" in exported.stdout and "echo: again" in exported.stdout


def test_a_saver_that_read_a_thread_sees_what_another_saver_appended_since(
        project: Path) -> None:
    reader = CosCheckpointSaver(project=project)
    first = empty_checkpoint()
    reader.put(_config("t"), first, {"step": 0}, {})
    assert reader.get_tuple(_config("t")).checkpoint["id"] == first["id"]  # type: ignore[union-attr]

    writer = CosCheckpointSaver(project=project)
    second = empty_checkpoint()
    writer.put(_config("t", first["id"]), second, {"step": 1}, {})

    latest = reader.get_tuple(_config("t"))
    assert latest is not None and latest.checkpoint["id"] == second["id"]
    assert latest.parent_config == {"configurable": {
        "thread_id": "t", "checkpoint_ns": "", "checkpoint_id": first["id"]}}
    assert [t.metadata["step"] for t in reader.list(_config("t"))] == [1, 0]


def test_a_rewind_of_the_session_rewinds_the_thread(project: Path) -> None:
    saver = CosCheckpointSaver(project=project)
    first = empty_checkpoint()
    saver.put(_config("t"), first, {"step": 0}, {})
    saver.get_tuple(_config("t"))
    session = saver.session_of("t")
    assert session is not None
    kept = transcript.last_seq(transcript.transcript_path(saver.tiers, session))
    saver.put(_config("t", first["id"]), empty_checkpoint(), {"step": 1}, {})

    transcript.append(saver.tiers, session, "rewind", {"to_seq": kept})

    latest = saver.get_tuple(_config("t"))
    assert latest is not None and latest.checkpoint["id"] == first["id"]
    assert len(list(saver.list(_config("t")))) == 1
