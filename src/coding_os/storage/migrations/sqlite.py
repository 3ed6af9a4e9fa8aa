"""SQLite migrations (append-only; the index + 1 is the version)."""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_sessions_observations_summaries",
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            panel TEXT NOT NULL,
            native_id TEXT,
            project TEXT,
            cwd TEXT,
            source TEXT,
            forked_from TEXT,
            cleared_from TEXT,
            started TEXT NOT NULL,
            last_active TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'active'
        );
        CREATE INDEX sessions_native ON sessions (agent, native_id);
        CREATE INDEX sessions_last_active ON sessions (last_active);

        CREATE TABLE observations (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            oid TEXT NOT NULL UNIQUE,
            session TEXT NOT NULL,
            agent TEXT NOT NULL,
            panel TEXT NOT NULL,
            ts TEXT NOT NULL,
            event TEXT NOT NULL,
            tool TEXT,
            text TEXT,
            data TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX observations_session ON observations (session, seq);

        CREATE TABLE session_summaries (
            session TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            panel TEXT NOT NULL,
            native_id TEXT,
            reason TEXT NOT NULL,
            started TEXT,
            ended TEXT,
            prompts INTEGER NOT NULL DEFAULT 0,
            tool_calls INTEGER NOT NULL DEFAULT 0,
            errors INTEGER NOT NULL DEFAULT 0,
            files TEXT NOT NULL DEFAULT '[]',
            last_prompt TEXT,
            created TEXT NOT NULL
        );

        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        """,
    ),
    (
        "0002_session_index",
        """
        CREATE TABLE session_index (
            id TEXT PRIMARY KEY,
            native_id TEXT,
            agent TEXT NOT NULL,
            kind TEXT NOT NULL,
            title TEXT,
            name TEXT,
            project TEXT,
            worktree TEXT,
            cwd TEXT,
            branch TEXT,
            created TEXT,
            last_active TEXT NOT NULL,
            messages INTEGER NOT NULL DEFAULT 0,
            tokens INTEGER NOT NULL DEFAULT 0,
            forked_from TEXT,
            parent TEXT,
            status TEXT,
            source_path TEXT
        );
        CREATE INDEX session_index_last_active ON session_index (last_active, id);
        CREATE INDEX session_index_native ON session_index (native_id);
        CREATE INDEX session_index_name ON session_index (name);

        CREATE TABLE session_names (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL
        );
        """,
    ),
    (
        "0003_session_index_prompts",
        """
        ALTER TABLE session_index ADD COLUMN first_prompt TEXT;
        ALTER TABLE session_index ADD COLUMN last_prompt TEXT;
        """,
    ),
    (
        "0004_brain",
        """
        CREATE TABLE tasks (
            n INTEGER PRIMARY KEY AUTOINCREMENT,
            title TEXT NOT NULL,
            body TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL,
            owner TEXT,
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            created_by TEXT,
            attributed_by TEXT
        );
        CREATE INDEX tasks_status ON tasks (status, n);

        CREATE TABLE task_moves (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            task INTEGER NOT NULL REFERENCES tasks (n),
            from_status TEXT,
            to_status TEXT NOT NULL,
            owner TEXT,
            session TEXT,
            attributed_by TEXT,
            ts TEXT NOT NULL,
            note TEXT
        );
        CREATE INDEX task_moves_task ON task_moves (task, seq);

        CREATE TABLE work_log (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            session TEXT,
            attributed_by TEXT,
            task INTEGER,
            text TEXT NOT NULL,
            ts TEXT NOT NULL
        );
        CREATE INDEX work_log_session ON work_log (session, seq);
        CREATE INDEX work_log_task ON work_log (task, seq);

        CREATE TABLE search_docs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            ref TEXT NOT NULL,
            session TEXT,
            ts TEXT NOT NULL,
            text TEXT NOT NULL,
            source TEXT,
            UNIQUE (kind, ref)
        );
        CREATE INDEX search_docs_source ON search_docs (source);
        CREATE VIRTUAL TABLE search_fts USING fts5 (
            text, content = 'search_docs', content_rowid = 'id',
            tokenize = 'unicode61 remove_diacritics 0'
        );

        CREATE TABLE search_sources (
            source TEXT PRIMARY KEY,
            inode INTEGER NOT NULL,
            read_to INTEGER NOT NULL,
            tail TEXT NOT NULL
        );

        INSERT INTO search_docs (kind, ref, session, ts, text)
            SELECT 'observation', oid, session, ts, text FROM observations
            WHERE text IS NOT NULL AND text <> '' ORDER BY seq;
        INSERT INTO search_fts (rowid, text) SELECT id, text FROM search_docs
        """,
    ),
    (
        "0005_sessions_fork_point",
        """
        ALTER TABLE sessions ADD COLUMN fork_point TEXT
        """,
    ),
    (
        "0006_hosts",
        """
        ALTER TABLE sessions ADD COLUMN host TEXT;
        ALTER TABLE session_index ADD COLUMN host TEXT;
        CREATE INDEX session_index_host ON session_index (host);

        CREATE TABLE replica_sources (
            session TEXT NOT NULL,
            stream TEXT NOT NULL,
            host TEXT NOT NULL,
            agent TEXT NOT NULL,
            path TEXT NOT NULL,
            project_key TEXT,
            root TEXT,
            lines INTEGER NOT NULL DEFAULT 0,
            updated TEXT NOT NULL,
            PRIMARY KEY (session, stream)
        );
        CREATE INDEX replica_sources_project ON replica_sources (project_key);

        CREATE TABLE replica_lines (
            session TEXT NOT NULL,
            stream TEXT NOT NULL,
            seq INTEGER NOT NULL,
            line BLOB NOT NULL,
            PRIMARY KEY (session, stream, seq)
        ) WITHOUT ROWID;

        CREATE TABLE project_hosts (
            project_key TEXT NOT NULL,
            host TEXT NOT NULL,
            root TEXT NOT NULL,
            updated TEXT NOT NULL,
            PRIMARY KEY (project_key, host)
        );

        CREATE TABLE host_jobs (
            host TEXT NOT NULL,
            id TEXT NOT NULL,
            job TEXT NOT NULL,
            PRIMARY KEY (host, id)
        )
        """,
    ),
]
