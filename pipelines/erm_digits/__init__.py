"""ERM job: continual and sliding-window private models of a stream of labelled examples.

``python -m pipelines.erm_digits`` with no arguments streams scikit-learn's bundled digits and a
synthetic drifting stream through ``ContinualERM`` and ``SlidingWindowERM`` on the DirectRunner,
prints each release's test accuracy next to the non-private model and plots accuracy over time
(evaluation: on by default on the embedded data only, ``--evaluate`` elsewhere); see
``options.py`` for the options.
"""
