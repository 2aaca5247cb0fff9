"""The web console of a served queue manager (``sweepq serve --console HOST:PORT``,
``qm.serve(console=...)``; docs/console.md): every queue with the seed's rule as the sweeper
sees it, the memory budget, charts of depths and sweeps, channels and connections, browsing,
and, with the admin token, define, delete, clear, start and stop.

* ``app.py`` — the web server (aiohttp, on a thread and event loop of its own): the page,
  the JSON API, the event stream, who may read and who may act;
* ``snapshot.py`` — what the page shows, built from the engine's public views;
* ``actions.py`` — browse, describe a message, clear a queue: one implementation for the
  console and the command line;
* ``static/`` — the page (HTML, JavaScript, CSS) and the vendored chart library (uPlot, MIT:
  ``static/vendor/uPlot.LICENSE``), shipped in the package: nothing is fetched from a CDN.
"""

from .app import Console

__all__ = ["Console"]
