"""storage/jobs.py (JobStore) on every backend: the jobs each host publishes (DESIGN.md §8).
One spec per operation, each run against SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from coding_os.storage.base import Storage, StorageError
from tests.helpers import each_backend

pytestmark = each_backend


def test_published_jobs_replace_only_their_hosts_rows(storage: Storage) -> None:
    storage.publish_jobs("alpha", [{"id": "job-1", "status": "running", "n": 1},
                                   {"id": "job-2", "status": "done"}])
    storage.publish_jobs("beta", [{"id": "job-1", "status": "running", "note": "é"}])
    storage.publish_jobs("alpha", [{"id": "job-2", "status": "failed"}])
    assert storage.host_jobs() == [("alpha", {"id": "job-2", "status": "failed"}),
                                   ("beta", {"id": "job-1", "status": "running", "note": "é"})]
    assert storage.host_jobs("beta") == [("beta", {"id": "job-1", "status": "running",
                                                    "note": "é"})]
    with pytest.raises(StorageError):
        storage.publish_jobs("alpha", [{"status": "no id"}])
    assert storage.host_jobs("alpha") == [("alpha", {"id": "job-2", "status": "failed"})]
    storage.publish_jobs("alpha", [])
    assert storage.host_jobs("alpha") == []

