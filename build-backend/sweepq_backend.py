"""The build backend of sweepq: setuptools' own, with one addition to editable installs.

pyproject.toml maps the package ``sweepq`` to the repository root (each layer is a folder of
it), so ``pip install -e .`` gets setuptools' *import hook* form of an editable install: Python
finds ``sweepq`` through a finder object, which type checkers never run, so mypy could not see
``sweepq`` at all (not its py.typed, not ``from sweepq import Queue``). This backend adds to
the editable wheel a ``.pth`` line naming a directory in ``build/`` whose one entry, ``sweepq``,
is a plain path that Python and mypy both read, so an editable install is typed as an
installed one is (tests/test_queue_readme.py runs mypy on the README's first program).
Both wheels, the editable and the normal one, also get ``sweepq-kombu.pth``: a line that
registers the ``sweepq`` alias of the Kombu transport at start-up (broker/alias.py), so that
Celery's ``broker_url="sweepq+unix://..."`` works with no import of the user's own. Everything
else is setuptools' build_meta, unchanged.

That ``sweepq`` is a directory of links, one to each module and package folder of the root
(what the wheel holds), not one link to the root: the root holds ``build/`` and ``.venv/``,
and a link back to it is a cycle that a tool walking the package with links followed (griffe,
for the API reference: ``mkdocs build``) goes round until memory runs out. A package folder
added later appears after the next ``pip install -e .``, as a new compiled module does.
"""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - every other hook is setuptools' own

PTH = "__editable__.sweepq-typed.pth"
KOMBU_PTH = "sweepq-kombu.pth"
# One line, run by site.py at start-up: cheap (no Kombu is imported), and silent if sweepq
# cannot be imported (a broken install must not print at every start of Python).
KOMBU_LINE = (
    'import sys; exec("try:\\n from sweepq.broker.alias import install_hook\\n install_hook()\\n'
    'except Exception:\\n pass")\n'
)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """setuptools' wheel, plus the Kombu alias's ``.pth`` line (see above)."""
    name = _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
    _add_to_wheel(os.path.join(wheel_directory, name), KOMBU_PTH, KOMBU_LINE.encode())
    return name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """setuptools' editable wheel, plus the ``.pth`` line of the typed path (see above)."""
    name = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    typed = os.path.join(root, "build", "__editable_typed__")
    _link_farm(root, os.path.join(typed, "sweepq"))
    _add_to_wheel(os.path.join(wheel_directory, name), PTH, (typed + "\n").encode())
    _add_to_wheel(os.path.join(wheel_directory, name), KOMBU_PTH, KOMBU_LINE.encode())
    return name


def _package_entries(root: str) -> list[str]:
    """The root's entries the package is made of: its modules, py.typed and package folders."""
    out = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if name == "setup.py" or name.startswith("."):
            continue
        package = os.path.isdir(path) and os.path.exists(os.path.join(path, "__init__.py"))
        module = os.path.isfile(path) and (name.endswith((".py", ".pyi", ".pxd")) or name == "py.typed")
        if package or module:
            out.append(name)
    return out


def _link_farm(root: str, farm: str) -> None:
    """Make ``farm`` a directory holding a link to each of the package's entries in ``root``
    (and nothing else: an older form's single link to the root is replaced)."""
    if os.path.islink(farm):
        os.unlink(farm)
    os.makedirs(farm, exist_ok=True)
    wanted = set(_package_entries(root))
    for name in os.listdir(farm):
        link = os.path.join(farm, name)
        if name not in wanted or not os.path.islink(link) or os.readlink(link) != os.path.join(root, name):
            os.unlink(link)
    for name in wanted:
        link = os.path.join(farm, name)
        if not os.path.lexists(link):
            os.symlink(os.path.join(root, name), link)


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
