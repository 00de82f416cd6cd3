"""jax_privacy's BLT optimiser side by side with beam_dp's tables (dev-only; never a dependency).

Runs in a separate venv that has jax-privacy (``pip install jax-privacy``), not beam_dp:

    python -m venv /tmp/jaxp && /tmp/jaxp/bin/pip install jax-privacy
    /tmp/jaxp/bin/python benchmarks/counters/jax_privacy_blt.py

For T = 2^4, 2^8, 2^12, 2^16, 2^20 it records, at ρ = 0.5 and sensitivity 1 (σ = 1): the max std of
``buffered_toeplitz.optimize(n=T)`` (buffers chosen by jax_privacy, ≤ 10), of the same optimiser
limited to 4 buffers, and of beam_dp's 4-buffer table entry evaluated by jax_privacy's own
``max_loss`` (an independent check of beam_dp's closed forms). Writes
results/jax_privacy_blt.json.
"""

import importlib.util
import json
import math
import pathlib
import time

import jax

jax.config.update('jax_enable_x64', True)

from jax_privacy.matrix_factorization import buffered_toeplitz as bt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
TABLES = HERE.parents[1] / 'beam_dp' / 'mechanisms' / 'blt_tables.py'
#: Each horizon costs ~40 s of jax compilation and optimisation on 2 shared cores.
EXPONENTS = (4, 8, 12, 16, 20)


def _tables():
    spec = importlib.util.spec_from_file_location('blt_tables', TABLES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    tables = _tables()
    out = {'rho': 0.5, 'jax_privacy_version': __import__('jax_privacy').__version__
           if hasattr(__import__('jax_privacy'), '__version__') else 'unknown', 'horizons': {}}
    for e in EXPONENTS:
        n = 2 ** e
        start = time.time()
        best = bt.optimize(n=n, max_buffers=10)
        four = bt.optimize(n=n, min_buffers=4, max_buffers=4)
        theta, w = tables.FINITE[e]
        ours = bt.BufferedToeplitz.build(buf_decay=theta, output_scale=w)
        row = {
            'max_std': math.sqrt(float(bt.max_loss(best, n))),
            'buffers': int(best.buf_decay.shape[0]),
            'max_std_4_buffers': math.sqrt(float(bt.max_loss(four, n))),
            'beam_dp_table_max_std_by_jax_privacy': math.sqrt(float(bt.max_loss(ours, n))),
            'seconds': time.time() - start,
        }
        out['horizons'][n] = row
        print(n, row, flush=True)
        (HERE / 'results' / 'jax_privacy_blt.json').write_text(json.dumps(out, indent=1))


if __name__ == '__main__':
    main()
