"""Reading a finished job's metrics at any number of bundles (issue 29).

Beam 2.77's FnApiRunner (``fn_runner.FnApiRunner.run_stages``) keeps each stage's monitoring
infos, and the whole pipeline's under '', as ``monitoring_infos.consolidate(chain(new, old))``:
a LAZY generator wrapping the previous one, one level per bundle. A continual release runs one
bundle round per step (a release follows the watermark), so after ~1,000 steps the first
``result.metrics()`` recurses through ~1,000 nested generators and raises ``RecursionError:
maximum recursion depth exceeded`` (in ``monitoring_infos.consolidate`` / ``to_key``). The
nesting is per bundle, not per metric: fewer metric names do not help. A minimal reproduction,
with no beam_dp, is in docs/runners.md.

``query_metrics`` consumes those generators once, in a thread with a deep stack and a high
recursion limit, stores the lists back, and then queries as usual. Other runners' results (no
such attribute) are queried directly.
"""

import sys
import threading
from typing import Optional

from apache_beam.metrics.metric import MetricsFilter

__all__ = ['materialize_metrics', 'query_metrics']

_STACK_BYTES = 512 << 20
_RECURSION_LIMIT = 1_000_000


def materialize_metrics(result) -> None:
    """Turns an FnApiRunner result's nested per-stage generators into lists (idempotent);
    does nothing for other results."""
    stages = getattr(result, '_monitoring_infos_by_stage', None)
    if not isinstance(stages, dict) or all(isinstance(v, list) for v in stages.values()):
        return
    failure = []

    def consume():
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
        try:
            for name in list(stages):
                stages[name] = list(stages[name])
        except BaseException as e:  # pylint: disable=broad-except
            failure.append(e)
        finally:
            sys.setrecursionlimit(limit)

    old = threading.stack_size()
    threading.stack_size(_STACK_BYTES)
    try:
        worker = threading.Thread(target=consume, name='beam_dp-materialize-metrics')
        worker.start()
    finally:
        threading.stack_size(old)
    worker.join()
    if failure:
        raise failure[0]


def query_metrics(result, metrics_filter: Optional[MetricsFilter] = None):
    """``result.metrics().query(metrics_filter)``, safe after any number of bundles."""
    materialize_metrics(result)
    return result.metrics().query(metrics_filter or MetricsFilter())
