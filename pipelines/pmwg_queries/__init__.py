"""PMWG queries job: DP answers to a public stream of linear queries over a growing database.

``python -m pipelines.pmwg_queries`` with no arguments replays the embedded sample trips and queries
on the DirectRunner and prints a summary; see ``options.py`` for the options.
"""
