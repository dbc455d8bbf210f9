"""Golden files for the CLI's --help texts and the job object's shape, so the contract cannot
drift unnoticed. Regenerate deliberately with AFT_UPDATE_GOLDEN=1 after a reviewed change."""
import json
import os
import subprocess
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("AFT_UPDATE_GOLDEN") == "1"

COMMANDS = [
    [], ["download"], ["upload"], ["list"], ["status"], ["watch"], ["wait"], ["pause"], ["resume"],
    ["cancel"], ["retry"], ["remove"], ["curl"], ["daemon"], ["daemon", "start"], ["daemon", "stop"],
    ["daemon", "status"], ["set-url"], ["limit"],
]


def check(name, text):
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with AFT_UPDATE_GOLDEN=1 once"
    assert text == path.read_text(), f"{name} differs from its golden file"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c) or "root")
def test_the_help_of_each_command_matches_its_golden_file(bin_dir, command):
    out = subprocess.run([str(Path(bin_dir) / "aftransfer"), *command, "--help"], capture_output=True,
                         text=True, timeout=30, env={**os.environ, "COLUMNS": "100"})
    assert out.returncode == 0, out.stderr
    check("help-" + ("-".join(command) or "root") + ".txt", out.stdout)


def shape(value):
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"  # JSON has one number type (1.0 prints as 1)
    if value is None:
        return "null"
    return "string"


def test_the_shape_of_a_completed_download_job_matches_its_golden_file(daemon, faultserver, key):
    dest = daemon.work / "golden.bin"
    rc, out, err = daemon.cli("download", faultserver.url(size=1000, key=key), "-o", dest, "--wait", "--json",
                              timeout=60)
    assert rc == 0, err
    job = json.loads(out)
    check("job-download-completed.json", json.dumps(shape(job), indent=2, sort_keys=True) + "\n")
