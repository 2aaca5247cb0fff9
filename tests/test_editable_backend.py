"""The build backend's typed path for editable installs (build-backend/sweepq_backend.py): a
directory of links to the package's entries, which a walk following links can finish (one link
to the root was a cycle through build/, and griffe walked it until memory ran out)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def backend():
    spec = importlib.util.spec_from_file_location("sweepq_backend", ROOT / "build-backend" / "sweepq_backend.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_typed_path_holds_the_package_and_no_cycle(tmp_path):
    farm = tmp_path / "sweepq"
    farm.symlink_to(ROOT, target_is_directory=True)  # the older form, replaced
    backend()._link_farm(str(ROOT), str(farm))
    assert not farm.is_symlink()
    names = set(os.listdir(farm))
    assert {"__init__.py", "py.typed", "engine", "queues", "cli"} <= names
    assert not names & {"build", "tests", "docs", "setup.py", ".venv", ".git"}
    walked = [d for d, _, _ in os.walk(farm, followlinks=True)]
    assert not any("build" in Path(d).relative_to(farm).parts for d in walked)
    assert len(walked) < 200, "a walk following links went round a cycle"


def test_a_stale_link_is_replaced(tmp_path):
    farm = tmp_path / "sweepq"
    farm.mkdir()
    (farm / "gone.py").symlink_to(tmp_path / "nowhere.py")
    (farm / "engine").symlink_to(tmp_path)
    backend()._link_farm(str(ROOT), str(farm))
    assert not (farm / "gone.py").is_symlink()
    assert os.readlink(farm / "engine") == str(ROOT / "engine")
