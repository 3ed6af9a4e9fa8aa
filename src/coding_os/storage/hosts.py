"""Which host owns what (DESIGN.md §8): a session handed from one host to another, and where
each host has a project checked out.

Conformance: tests/storage/test_hosts.py.
"""

from __future__ import annotations

import abc

__all__ = ["HostStore"]


class HostStore(abc.ABC):
    """The hosts of a shared database: sessions moved between them, and project roots."""

    @abc.abstractmethod
    def move_session(self, session: str, from_host: str, to_host: str) -> bool:
        """Give `to_host` the session `session` (an index id) while `from_host` owns it, in one
        transaction: its index row's host and the host of its replicated files (those filed
        under its id or its native id) become `to_host`, so that host's replication goes on
        from the lines stored. A compare-and-set on the owner: False, nothing changed, when the
        row is not `from_host`'s (gone, or another host took it first).

        Raises:
            StorageError: the database cannot be written.
        """

    @abc.abstractmethod
    def set_project_host(self, project_key: str, host: str, root: str) -> None:
        """Record where the project `project_key` is checked out on `host`.

        Raises:
            StorageError: the database cannot be written.
        """

    @abc.abstractmethod
    def project_hosts(self, project_key: str) -> dict[str, str]:
        """The hosts the project is known on, each with its root there.

        Raises:
            StorageError: the database cannot be read.
        """
