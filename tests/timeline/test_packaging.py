"""A wheel install (not an editable checkout) carries the migrations and can make a schema."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.slow
def test_a_wheel_install_upgrades_a_database_from_its_packaged_migrations(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True,
        capture_output=True,
    )
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=False)
    # The new environment sees this one's dependencies (a plain path line: the editable
    # finder of the checkout is a .pth in there and is not processed), not the source tree.
    py = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(wheels.glob("fleetmedic-*.whl"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--prefix",
            str(env_dir),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    db_url = f"sqlite:///{tmp_path / 'fresh.db'}"
    code = (
        "import timeline.db as d, sys; print(d.ALEMBIC_DIR); d.upgrade(sys.argv[1]); "
        "import sqlalchemy as sa; e = sa.create_engine(sys.argv[1]); "
        "print(sorted(sa.inspect(e).get_table_names()))"
    )
    out = subprocess.run(
        [str(py), "-c", code, db_url], cwd=tmp_path, check=True, capture_output=True, text=True
    ).stdout
    alembic_dir, tables = out.splitlines()[:2]
    assert alembic_dir.startswith(str(env_dir)) and "share/fleetmedic/alembic" in alembic_dir
    assert "samples" in tables and "incidents" in tables and "alembic_version" in tables
