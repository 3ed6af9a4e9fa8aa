"""PostgreSQL migrations (append-only; the index + 1 is the version).

Position N here is the same logical schema as position N in migrations/sqlite.py: never reorder,
and when one dialect needs no change at a version, keep a placeholder so the numbers stay aligned.
Text columns that are ordered or compared with max()/greatest() use COLLATE "C", the byte order
SQLite uses, so both backends sort ISO timestamps and ids the same way whatever the database's
locale.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_sessions_observations_summaries",
        """
        CREATE TABLE sessions (
            id TEXT COLLATE "C" PRIMARY KEY,
            agent TEXT NOT NULL,
            panel TEXT NOT NULL,
            native_id TEXT,
            project TEXT,
            cwd TEXT,
            source TEXT,
            forked_from TEXT,
            cleared_from TEXT,
            started TEXT COLLATE "C" NOT NULL,
            last_active TEXT COLLATE "C" NOT NULL,
            status TEXT NOT NULL DEFAULT 'active'
        );
        CREATE INDEX sessions_native ON sessions (agent, native_id);
        CREATE INDEX sessions_last_active ON sessions (last_active);

        CREATE TABLE observations (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
            prompts BIGINT NOT NULL DEFAULT 0,
            tool_calls BIGINT NOT NULL DEFAULT 0,
            errors BIGINT NOT NULL DEFAULT 0,
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
            id TEXT COLLATE "C" PRIMARY KEY,
            native_id TEXT,
            agent TEXT NOT NULL,
            kind TEXT NOT NULL,
            title TEXT,
            name TEXT,
            project TEXT COLLATE "C",
            worktree TEXT COLLATE "C",
            cwd TEXT COLLATE "C",
            branch TEXT,
            created TEXT COLLATE "C",
            last_active TEXT COLLATE "C" NOT NULL,
            messages BIGINT NOT NULL DEFAULT 0,
            tokens BIGINT NOT NULL DEFAULT 0,
            forked_from TEXT,
            parent TEXT,
            status TEXT,
            source_path TEXT
        );
        CREATE INDEX session_index_last_active ON session_index (last_active, id);
        CREATE INDEX session_index_native ON session_index (native_id);
        CREATE INDEX session_index_name ON session_index (name);

        CREATE TABLE session_names (
            id TEXT COLLATE "C" PRIMARY KEY,
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
            n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            title TEXT NOT NULL,
            body TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL,
            owner TEXT,
            created TEXT COLLATE "C" NOT NULL,
            updated TEXT COLLATE "C" NOT NULL,
            created_by TEXT,
            attributed_by TEXT
        );
        CREATE INDEX tasks_status ON tasks (status, n);

        CREATE TABLE task_moves (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            task BIGINT NOT NULL REFERENCES tasks (n),
            from_status TEXT,
            to_status TEXT NOT NULL,
            owner TEXT,
            session TEXT,
            attributed_by TEXT,
            ts TEXT COLLATE "C" NOT NULL,
            note TEXT
        );
        CREATE INDEX task_moves_task ON task_moves (task, seq);

        CREATE TABLE work_log (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session TEXT,
            attributed_by TEXT,
            task BIGINT,
            text TEXT NOT NULL,
            ts TEXT COLLATE "C" NOT NULL
        );
        CREATE INDEX work_log_session ON work_log (session, seq);
        CREATE INDEX work_log_task ON work_log (task, seq);

        CREATE TABLE search_docs (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            kind TEXT NOT NULL,
            ref TEXT NOT NULL,
            session TEXT,
            ts TEXT COLLATE "C" NOT NULL,
            text TEXT NOT NULL,
            source TEXT,
            -- Words as SQLite's unicode61 sees them: every run of letters and digits, so
            -- "search.py", paths and "3.14" are words split at their punctuation on both.
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple',
                regexp_replace(text, '[^[:alnum:]]+', ' ', 'g'))) STORED,
            UNIQUE (kind, ref)
        );
        CREATE INDEX search_docs_source ON search_docs (source);
        CREATE INDEX search_docs_tsv ON search_docs USING GIN (tsv);

        CREATE TABLE search_sources (
            source TEXT PRIMARY KEY,
            inode BIGINT NOT NULL,
            read_to BIGINT NOT NULL,
            tail TEXT NOT NULL
        );

        INSERT INTO search_docs (kind, ref, session, ts, text)
            SELECT 'observation', oid, session, ts, text FROM observations
            WHERE text IS NOT NULL AND text <> '' ORDER BY seq;
        -- Statistics on the words from the start: without them the planner guesses every
        -- word's frequency and walks all ids newest first instead of using the GIN index.
        ANALYZE search_docs
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
            session TEXT COLLATE "C" NOT NULL,
            stream TEXT COLLATE "C" NOT NULL,
            host TEXT NOT NULL,
            agent TEXT NOT NULL,
            path TEXT NOT NULL,
            project_key TEXT,
            root TEXT,
            lines BIGINT NOT NULL DEFAULT 0,
            updated TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (session, stream)
        );
        CREATE INDEX replica_sources_project ON replica_sources (project_key);

        CREATE TABLE replica_lines (
            session TEXT COLLATE "C" NOT NULL,
            stream TEXT COLLATE "C" NOT NULL,
            seq BIGINT NOT NULL,
            line BYTEA NOT NULL,
            PRIMARY KEY (session, stream, seq)
        );

        CREATE TABLE project_hosts (
            project_key TEXT COLLATE "C" NOT NULL,
            host TEXT COLLATE "C" NOT NULL,
            root TEXT NOT NULL,
            updated TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (project_key, host)
        );

        CREATE TABLE host_jobs (
            host TEXT COLLATE "C" NOT NULL,
            id TEXT COLLATE "C" NOT NULL,
            job TEXT NOT NULL,
            PRIMARY KEY (host, id)
        )
        """,
    ),
]
