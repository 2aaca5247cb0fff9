"""The README is a page a newcomer reads in five minutes and that stands alone in a clone:
short, no link leaving the repository, every seed it cites explained, the demo's picture
present. (Its Python blocks run with every other page's: tests/test_docs.py.)"""

from __future__ import annotations

import re
from pathlib import Path

from helpers import reaped

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
MAX_LINES = 250


def test_the_readme_is_short():
    lines = README.count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; keep it under {MAX_LINES} and move the rest to docs/"


def test_the_readme_has_a_first_program():
    assert "```python\n" in README


def test_no_link_leaves_the_repository():
    for target in re.findall(r"\]\(([^)]+)\)", README):
        if target.startswith(("http://", "https://", "#")):
            continue
        assert not target.startswith(("..", "/")), f"README links outside the repository: {target}"
        path = target.split("#", 1)[0]
        assert (ROOT / path).exists(), f"README links to a missing file: {target}"
    assert "../shared" not in README


def test_every_seed_it_cites_is_explained():
    for seed in sorted(set(re.findall(r"seeds? (\d{3})(?!\d)", README))):
        assert re.search(rf"\*\*{seed}\*\* \w", README), f"seed {seed} is cited but never said what it is"


def test_the_demo_picture_is_in_the_repository():
    pictures = re.findall(r"!\[[^]]*\]\(([^)]+)\)", README)
    assert pictures, "the README lost the demo's picture"
    for target in pictures:
        assert (ROOT / target).stat().st_size > 10_000


def _bash_blocks(section: str) -> list[str]:
    """The ```bash blocks of one section of the README (from its heading to the next)."""
    start = README.index(f"## {section}")
    end = README.find("\n## ", start + 1)
    return re.findall(r"```bash\n(.*?)```", README[start : end if end > 0 else None], re.S)


def test_the_serve_session_runs_as_written(tmp_path):
    """'Other processes': the first block in one terminal, the second in another once the first
    says it listens, then Ctrl-C in the first; run exactly as the README writes them, in a
    directory whose .venv is this interpreter's (as after the first set-up command)."""
    import signal
    import subprocess
    import sys
    import time

    serve, session = _bash_blocks("Other processes")
    (tmp_path / ".venv").symlink_to(sys.prefix)
    server = subprocess.Popen(
        ["bash", "-c", serve], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 60
        seen = []
        while not any("listening" in line for line in seen):
            assert time.monotonic() < deadline and server.poll() is None, seen
            seen.append(server.stdout.readline())
        done = subprocess.run(["bash", "-c", session], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.rstrip().endswith("b'order 1'"), done.stdout
        assert "put 2 messages on ORDERS" in done.stdout
    finally:
        with reaped(server):  # killed, with what it started, if the Ctrl-C did not end it
            server.send_signal(signal.SIGINT)  # Ctrl-C reaches bash's foreground job: the server
            out, _ = server.communicate(timeout=60)
    assert server.returncode == 0 and "the store is closed" in out, out


def test_the_console_section_runs_as_written(tmp_path):
    """The console section's server starts with its page, the page answers with the token it
    prints, and the shell's `status --watch --count 3` shows the queue manager; run as the
    README writes them but for the port (127.0.0.1:8080 may be taken here)."""
    import re
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    serve, watch = _bash_blocks("Watching it")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert "127.0.0.1:8080" in serve
    serve = serve.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
    (tmp_path / ".venv").symlink_to(sys.prefix)
    server = subprocess.Popen(
        ["bash", "-c", serve], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 60
        seen: list[str] = []
        while not any("console on" in line for line in seen):
            assert time.monotonic() < deadline and server.poll() is None, seen
            seen.append(server.stdout.readline())
        url = re.search(r"console on (http://\S+)", "".join(seen))
        assert url, seen
        token = (tmp_path / "q" / "sweepq.token").read_text().strip()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())  # keeps the session cookie
        with browser.open(f"{url.group(1)}?token={token}", timeout=30) as page:
            assert page.status == 200 and b"sweepq" in page.read()
        done = subprocess.run(["bash", "-c", watch], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.count("queue manager QM1:") == 3, done.stdout  # redrawn three times
    finally:
        with reaped(server):
            server.send_signal(signal.SIGINT)
            out, _ = server.communicate(timeout=60)
    assert server.returncode == 0, out
