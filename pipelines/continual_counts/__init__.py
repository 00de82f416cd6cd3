"""Continual counts per station over a stream of bike-ride events (``ContinualCountPerKey``).

``python -m pipelines.continual_counts`` with no arguments runs the job on the embedded sample
data on the DirectRunner and prints a summary; see ``options.py`` for the options.
"""
