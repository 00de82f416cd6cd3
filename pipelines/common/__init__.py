"""What the beam_dp jobs share: Avro file sinks and their file naming, the Pub/Sub codec and
publishing, and the launcher helpers (runner detection, logging, local tidying).

No job imports another job's modules: anything two jobs need lives here. Nothing here is DP
logic; the jobs hand every privacy parameter to beam_dp.
"""
