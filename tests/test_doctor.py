"""`cos doctor`'s checks (doctor.py), in process: what a manifest or a repository names is read
with bounds (DESIGN.md §11), and a file that cannot be read is the check's finding, never a
crash. The whole command, run as a user runs it, is tested in tests/test_doctor_cli.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from coding_os.doctor import run_checks
from tests.helpers import cos


def checks_in(project: Path) -> dict[str, dict[str, object]]:
    report = run_checks(dict(os.environ), str(project), mcp_timeout_s=30).as_dict()
    return {check["name"]: check for check in report["checks"]}  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_manifest_naming_a_device_fails_the_hooks_check_without_reading_it(
        project: Path) -> None:
    assert cos("init", "--agent", "claude", cwd=project).returncode == 0
    manifest_path = project / ".coding-os" / "installed-manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["installations"][0]["file"] = "/dev/zero"  # read, it never ends
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    hooks = checks_in(project)["hooks"]
    assert hooks["status"] == "fail"
    assert "/dev/zero is not a regular file" in str(hooks["detail"])


def test_settings_or_mcp_json_nested_too_deeply_fail_their_checks_in_one_line(
        project: Path) -> None:
    assert cos("init", "--agent", "claude", cwd=project).returncode == 0
    deep = "[" * 100_000 + "]" * 100_000
    (project / ".claude" / "settings.json").write_text('{"hooks":' + deep + "}",
                                                       encoding="utf-8")
    (project / ".mcp.json").write_text('{"mcpServers":' + deep + "}", encoding="utf-8")
    checks = checks_in(project)
    assert checks["hooks"]["status"] == "fail"
    assert "settings.json is not valid JSON (JSON nested too deeply" in str(
        checks["hooks"]["detail"])
    assert checks["mcp"]["status"] == "fail"
    assert ".mcp.json" in str(checks["mcp"]["detail"])
    assert "nested too deeply" in str(checks["mcp"]["detail"])
