"""``sweepkit serve``: a local what-if explorer on the serving engine and the decode cost model.

Modules: :mod:`~sweepkit.serve.whatif` (before/after runs, timelines, capacity jobs),
:mod:`~sweepkit.serve.decode` (the decode explorer, one compiled program), :mod:`~sweepkit.serve.api`
(request validation and the JSON answers), :mod:`~sweepkit.serve.app` (the Starlette app; pages and scripts
under ``static/``, nothing fetched from the network). The JSON API: docs/serve.md.
"""
