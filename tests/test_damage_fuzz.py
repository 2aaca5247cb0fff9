"""The damage fuzz (bench/damage.py, ``sweepq damagetest``): its quick form runs here.

Every kind of file of a data directory (the manifest, CURRENT, OPTIONS, the write-ahead
logs, the table files, sweepq's own files, RocksDB's others) cut short, a page zeroed, bits
flipped and deleted, on a directory closed cleanly, killed with SIGKILL mid-work, and open;
and a plain kill: no wrong data, no consumed message back, none twice, no loss without a
report, none named lost that was not, no queue manager left unusable after
``repair=True``. The long form is run by hand and its figures are in docs/damage.md.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from sweepq.bench import damage
from sweepq.cli import main


@pytest.mark.long
@pytest.mark.timeout(1200)  # its run is bounded at 900 s itself
def test_quick_form():
    """One round of every (state, file kind, damage) and a plain kill, in a process of its
    own: a trial stuck inside RocksDB fails the test by its timeout (and the command's own
    watchdog), instead of hanging the suite."""
    seed = 20261124
    out = subprocess.run(
        [sys.executable, "-m", "sweepq", "damagetest", "--quick", "--seed", str(seed), "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode in (0, 1), out.stderr[-3000:]
    v = json.loads(out.stdout)
    bad = [(t["number"], t["what"], t["violations"]) for t in v["trials"] if t["violations"]]
    assert v["ok"] and not bad, (bad, v["replay"])
    trials = v["trials"]
    assert len(trials) == damage.QUICK_TRIALS == len(damage.COMBOS)
    assert {(t["state"], t["kind"], t["damage"]) for t in trials} == set(damage.COMBOS)
    targets = {damage.file_kind(t["target"]) for t in trials if t["target"]}
    assert set(damage.FILE_KINDS) <= targets  # every kind of file there was to damage, damaged
    assert any(t["opened"] == "with repair" for t in trials)  # some damage needed repair=True
    assert sum(t["consumed"] for t in trials) > 1000 and sum(t["delivered"] for t in trials) > 1000


def test_the_suite_form_consumes_by_id_in_killed_sessions_and_finds_nothing(tmp_path):
    """Issue 32 item 3: the trials whose directories lost writes a killed or closed store had
    made (a write-ahead log, a table file or sweepq's own file cut, zeroed, flipped or
    deleted), with the workload that gets messages by MsgId, CorrelId and GroupId under
    syncpoint and commits them in the session that is killed: no consumed message back, none
    named lost, FIFO kept (its quick form, every combination, runs as a long test above)."""
    v = damage.run_fuzz(str(tmp_path), 0, seed=20261124, numbers=damage.SUITE_TRIALS)
    bad = [(t.number, t.what, t.violations) for t in v.trials if t.violations]
    assert v.ok and not bad, bad
    killed = [t for t in v.trials if t.state == "killed"]
    assert sum(t.by_id_killed for t in killed) > 50  # the killed sessions did consume by id
    assert {t.kind for t in v.trials} == {"log", "sst", "sweepq", "none"}
    assert {t.damage for t in killed} == set(damage.DAMAGES)
    assert any(t.opened == "with repair" for t in v.trials)


def _trial_of(state: str, kind: str, how: str) -> int:
    return damage.COMBOS.index((state, kind, how)) + 1


def test_a_trial_that_delivers_a_consumed_message_is_a_violation(tmp_path, monkeypatch):
    """The judge catches what it looks for: a drain that gets a consumed message fails."""
    real = damage.build

    def forgetful(path, rng, run=1):
        traffic = real(path, rng, run)
        traffic.consumed |= set(list(traffic.put - traffic.consumed)[:1])  # claims a live message consumed
        return traffic

    monkeypatch.setattr(damage, "build", forgetful)
    t = damage.run_trial(str(tmp_path), seed=3, number=_trial_of("closed", "OPTIONS", "cut"))
    assert any(v.startswith("consumed back") for v in t.violations), t


def test_a_loss_nothing_reports_is_a_violation(tmp_path, monkeypatch):
    """A committed message that does not come back when the open said nothing: silent loss."""
    real = damage.build

    def boastful(path, rng, run=1):
        traffic = real(path, rng, run)
        traffic.put.add("1.999999")  # claims a message that was never put
        return traffic

    monkeypatch.setattr(damage, "build", boastful)
    t = damage.run_trial(str(tmp_path), seed=3, number=_trial_of("closed", "OPTIONS", "cut"))
    assert t.classes() >= {"silent loss"} and t.lost == 1, t


def test_a_message_named_lost_that_was_consumed_is_a_violation(tmp_path, monkeypatch):
    """The open names as lost a message that was consumed (an operator would send it again):
    false loss."""
    real_open = damage._open

    def accusing(path, repair=False):
        qm = real_open(path, repair)
        if "trial-" in str(path):  # the judge's open, not the build's
            traffic = next(iter(damage._BASES.values()))
            qm.recovery.damaged_msg_ids.append(damage.msg_id(min(traffic.consumed)))
        return qm

    monkeypatch.setattr(damage, "_open", accusing)
    t = damage.run_trial(str(tmp_path), seed=3, number=_trial_of("closed", "OPTIONS", "cut"))
    assert "false loss" in t.classes(), t


@pytest.mark.parametrize("how", damage.DAMAGES)
def test_damage_cuts_zeroes_flips_or_deletes_a_file_of_the_kind_asked(tmp_path, how):
    (tmp_path / "000012.sst").write_bytes(bytes(10_000))
    (tmp_path / "MANIFEST-000005").write_bytes(bytes(100))
    (tmp_path / "sweepq-changes").write_bytes(b"\xff" * 100)
    name, what = damage.damage(str(tmp_path), random.Random(1), "sst", how)
    assert name == "000012.sst" and damage.file_kind(name) == "sst" and name in what
    path = tmp_path / name
    if how == "delete":
        assert not path.exists()
    elif how == "cut":
        assert path.stat().st_size < 10_000
    elif how == "zero":
        assert path.read_bytes() == bytes(10_000) and "zeroed" in what  # zeros over zeros
    else:
        assert 1 <= sum(b != 0 for b in path.read_bytes()) <= 3
    assert damage.damage(str(tmp_path), random.Random(1), "sweepq", "zero")[0] == "sweepq-changes"
    assert (tmp_path / "sweepq-changes").read_bytes() == bytes(100)


def test_the_command_runs_and_says_how_to_replay(capsys):
    assert main(["damagetest", "--trials", "2", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "damage fuzz: PASS (seed 5): 2 trials" in out and "sweepq damagetest --trials 2 --seed 5" in out
