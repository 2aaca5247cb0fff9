"""The kill -9 crash harness (issue 10, §6): proof that persistent messages survive crashes.

One job per module:

* ``worker.py``: the process that works a data directory (puts and gets persistent
  messages, mostly under syncpoint, with the sweeper at a short interval) and logs every
  call as started and as returned; the final drain; the harness's message ids and payloads;
* ``driver.py``: starts a worker, kills it with SIGKILL at a chosen moment, restarts it on
  the same directory, repeats, then drains (:func:`~.driver.run_crashtest`);
* ``verdict.py``: from the logs alone, what was committed, consumed, lost, duplicated,
  reordered (:func:`~.verdict.judge` over :func:`~.verdict.parse_logs`);
* ``trials.py``: damage to the files of a data directory the harness built, judged with
  damage allowed (:func:`~.trials.corruption_trial`).

``python -m sweepq.bench.crash worker|drain ...`` runs one worker or the final drain as a
process of its own (the driver starts them so); ``sweepq crashtest`` is the command line
(cli/harness.py).
"""
