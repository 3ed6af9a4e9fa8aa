"""Background jobs published by each host to a shared database (DESIGN.md §8), so
`cos agents --all-hosts` lists those of every host.

Conformance: tests/storage/test_jobs.py.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

from coding_os.storage.lifecycle import StorageError

__all__ = ["JobStore", "published_jobs"]


def published_jobs(rows: Sequence[Mapping[str, object]]) -> list[tuple[str, str]]:
    """`(id, JSON text)` of each job row given to `JobStore.publish_jobs`, in order.

    Raises:
        StorageError: a row without a string "id", or one that is not JSON.
    """
    import json

    out: list[tuple[str, str]] = []
    for row in rows:
        job_id = row.get("id")
        if not isinstance(job_id, str) or not job_id:
            raise StorageError("a published job row needs a string \"id\"")
        try:
            out.append((job_id, json.dumps(dict(row), ensure_ascii=False, sort_keys=True)))
        except (TypeError, ValueError) as exc:
            raise StorageError(f"job {job_id}: cannot be stored as JSON ({exc})") from None
    return out


class JobStore(abc.ABC):
    """The job rows each host publishes, replaced whole at each publication."""

    @abc.abstractmethod
    def publish_jobs(self, host: str, rows: Sequence[Mapping[str, object]]) -> None:
        """Replace `host`'s published job rows (each keyed by its "id"), in one transaction.

        Raises:
            StorageError: a row without a string "id", or one that is not JSON (nothing is
                replaced), or the database cannot be written.
        """

    @abc.abstractmethod
    def host_jobs(self, host: str | None = None) -> list[tuple[str, dict[str, object]]]:
        """Published job rows `(host, row)`, of one host or of every host, by host then id.

        Raises:
            StorageError: the database cannot be read.
        """
