"""Runnable beam_dp jobs (``python -m pipelines.<name>``) and their Flex Template entrypoints.

Pipelines hold no DP logic: they parse options, read sources, apply ``beam_dp`` transforms and
write sinks.
"""
