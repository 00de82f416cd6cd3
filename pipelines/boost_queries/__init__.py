"""Boost queries job: cached DP answers to a Zipf stream of linear queries over weekly blocks of a
Covid-shaped table (beam_dp BoostQueries).

``python -m pipelines.boost_queries`` with no arguments runs the embedded sample on the
DirectRunner and prints the budget consumed per path and per block, with the baselines; see
``options.py`` for the options. (No imports here: ``sample_data`` is numpy only.)
"""
