"""``source scripts/_env.sh`` sets the project's environment up and leaves the shell where it was."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_sourcing_the_env_script_keeps_the_folder_and_sets_the_variables(tmp_path: Path) -> None:
    script = f'source "{REPO / "scripts" / "_env.sh"}" && pwd && echo "$DAGSTER_HOME" && command -v nl2sql-assets'
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    folder, home, command = done.stdout.split()
    assert Path(folder) == tmp_path  # not moved to the checkout
    assert Path(home) == REPO / ".dagster_home" and (Path(home) / "dagster.yaml").is_file()
    assert Path(command) == REPO / ".venv" / "bin" / "nl2sql-assets"
