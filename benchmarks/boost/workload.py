"""The Covid-shaped workload of the Boost benchmark (spec 002 §6.2, §6.4, §6.9), shared by our
runner and the authors' artifact runner. The generator lives in
``pipelines/boost_queries/sample_data.py`` (numpy only, so it runs in either virtualenv); this
module re-exports it and keeps the command line ``python workload.py DIR [QUERIES]``.
"""

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))

from pipelines.boost_queries.sample_data import *  # noqa: E402,F401,F403  pylint: disable=wildcard-import,wrong-import-position
from pipelines.boost_queries.sample_data import SETTINGS  # noqa: E402  pylint: disable=wrong-import-position
from pipelines.boost_queries.sample_data import blocks  # noqa: E402  pylint: disable=wrong-import-position
from pipelines.boost_queries.sample_data import query_pool  # noqa: E402  pylint: disable=wrong-import-position
from pipelines.boost_queries.sample_data import workload  # noqa: E402  pylint: disable=wrong-import-position

def write(directory: str, k_values=(0, 1), queries: int = 20000, seed: int = 1) -> None:
    """Writes blocks.npy, pool.json, pool.npy and workload_<setting>_k<k>.json."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    np.save(path / 'blocks.npy', blocks(seed))
    subsets, dense = query_pool()
    np.save(path / 'pool.npy', dense)
    (path / 'pool.json').write_text(json.dumps(subsets))
    for setting in SETTINGS:
        for k in k_values:
            rows = workload(setting, k, queries, seed)
            (path / f'workload_{setting}_k{k}.json').write_text(json.dumps(rows))


if __name__ == '__main__':
    import sys
    write(sys.argv[1] if len(sys.argv) > 1 else '/tmp/boost_bench',
          queries=int(sys.argv[2]) if len(sys.argv) > 2 else 20000)
