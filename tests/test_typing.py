"""sweepq as an installed, typed library: the package tree a wheel holds has every module of
every layer (pyproject.toml maps each folder to a `sweepq.*` package by hand, so a subpackage
left out of the list would be missing only after a real install) and each layer's py.typed."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree a wheel holds (setuptools' build_py from pyproject.toml), outside the checkout."""
    out = tmp_path_factory.mktemp("built")
    cmd = ["-q", "egg_info", "--egg-base", str(out), "build_py", "--build-lib", str(out / "lib")]
    done = subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", *cmd],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return out / "lib"


def _shipped_sources() -> dict[Path, Path]:
    """Every module the package ships: its path in the built tree -> its path in the checkout."""
    shipped = {}
    for package, folder in PACKAGE_DIRS.items():
        src = ROOT / folder
        # The root maps to `sweepq` itself and holds only modules; the layers are whole trees.
        files = src.glob("*.py") if folder == "." else src.rglob("*.py")
        for f in files:
            shipped[Path(*package.split("."), f.relative_to(src))] = f
    return shipped


def test_the_built_package_holds_every_module(built: Path) -> None:
    missing = sorted(
        str(src.relative_to(ROOT)) for dest, src in _shipped_sources().items() if not (built / dest).exists()
    )
    assert not missing, f"a wheel would lack these (add their package to pyproject.toml): {missing}"


def test_each_layer_ships_its_py_typed_marker(built: Path) -> None:
    # PEP 561: in a namespace package (`sweepq` has no __init__.py) the marker goes in each
    # subpackage; without it mypy treats every import of sweepq.engine as untyped (Any).
    layers = [package for package, folder in PACKAGE_DIRS.items() if folder != "."]
    unmarked = [p for p in layers if not (built / Path(*p.split(".")) / "py.typed").is_file()]
    assert not unmarked, f"add an empty py.typed to their folders: {unmarked}"
