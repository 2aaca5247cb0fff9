"""The build backend of sweepq: setuptools' own, with one addition to editable installs.

pyproject.toml maps the package ``sweepq`` to the repository root (each layer is a folder of
it), so ``pip install -e .`` gets setuptools' *import hook* form of an editable install: Python
finds ``sweepq`` through a finder object, which type checkers never run, so mypy could not see
``sweepq`` at all (not its py.typed, not ``from sweepq import Queue``). This backend adds to
the editable wheel a ``.pth`` line naming a directory in ``build/`` whose one entry, ``sweepq``,
is a link to the repository root: a plain path that Python and mypy both read, so an editable
install is typed as an installed one is (tests/test_queue_readme.py runs mypy on the README's
first program). Everything else is setuptools' build_meta, unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - every other hook is setuptools' own

PTH = "__editable__.sweepq-typed.pth"


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """setuptools' editable wheel, plus the ``.pth`` line of the typed path (see above)."""
    name = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    typed = os.path.join(root, "build", "__editable_typed__")
    os.makedirs(typed, exist_ok=True)
    link = os.path.join(typed, "sweepq")
    if os.path.islink(link) and os.readlink(link) != root:
        os.unlink(link)
    if not os.path.lexists(link):
        os.symlink(root, link, target_is_directory=True)
    _add_to_wheel(os.path.join(wheel_directory, name), PTH, (typed + "\n").encode())
    return name


def _add_to_wheel(wheel: str, arcname: str, data: bytes) -> None:
    """Add a file at the top of ``wheel`` and its line in the wheel's RECORD."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    with zipfile.ZipFile(wheel) as z:
        entries = [(info, z.read(info)) for info in z.infolist()]
    with zipfile.ZipFile(wheel + ".tmp", "w", zipfile.ZIP_DEFLATED) as z:
        for info, content in entries:
            if info.filename.endswith(".dist-info/RECORD"):
                content += f"{arcname},sha256={digest},{len(data)}\n".encode()
            z.writestr(info, content)
        z.writestr(arcname, data)
    os.replace(wheel + ".tmp", wheel)
