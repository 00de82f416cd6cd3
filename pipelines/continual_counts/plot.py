"""The job's plot: released cumulative counts of a few stations; with evaluation, the truth too.

Without evaluation (private, the default on the user's input) each panel shows only released
values: the DP releases with a ±2 noise-std band around them (the noise std is public), and
optionally the post-processed releases; the stations shown are picked by their released final
value. With evaluation (NOT private: ``pipelines.common.evaluation``) it adds, for each station,
the raw truth (every valid ride) and the truth after contribution bounding (what the transform
counts), with the ±2 noise-std band around the bounded truth (where the releases should fall);
the gap between the two truths is the bias of the bounds, not noise.

The PNG's 'Description' text chunk lists the series drawn (``pipelines.common.plots``), so what
a plot shows can be checked without looking at it.
"""

from typing import Optional, Sequence

import numpy as np
from apache_beam.io.filesystems import FileSystems

from pipelines.common.plots import png_bytes

__all__ = ['plot_series']


def _picks(order_by: np.ndarray, num_plots: int):
    """Busiest, two in the middle, quietest (by the final value of ``order_by``)."""
    final = np.nan_to_num(order_by[:, -1], nan=-np.inf)
    order = np.argsort(-final, kind='stable')
    return sorted({int(order[int(round(q * (len(order) - 1)))])
                   for q in np.linspace(0, 1, num_plots)}, key=lambda i: -final[i])


def plot_series(path: str, keys: Sequence[str], released: np.ndarray, stddev: np.ndarray,
                step_hours: float, title: str, *, truth: Optional[np.ndarray] = None,
                bounded: Optional[np.ndarray] = None, processed: Optional[np.ndarray] = None,
                processed_label: str = '', num_plots: int = 4) -> str:
    """Writes the PNG to ``path`` (local or gs://) and returns ``path``.

    Args:
      released, stddev: (keys, steps) arrays of released values and their noise std.
      truth, bounded: EVALUATION only (not private): raw and bounded cumulative truth; when
        given, the stations are picked by the truth and both truths are drawn.
      processed: optional post-processed releases (``processed_label`` names the method).
    """
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    evaluate = truth is not None
    picks = _picks(truth if evaluate else released, num_plots)
    fig, axes = plt.subplots(1, len(picks), figsize=(4.2 * len(picks), 3.8), squeeze=False)
    hours = (np.arange(released.shape[1]) + 1) * step_hours
    for ax, i in zip(axes[0], picks):
        if evaluate:
            ax.plot(hours, truth[i], color='black', lw=1.5, label='true, all rides')
            ax.plot(hours, bounded[i], color='black', lw=1.2, ls='--',
                    label='true after bounding (what is counted)')
            ax.fill_between(hours, bounded[i] - 2 * stddev[i], bounded[i] + 2 * stddev[i],
                            color='tab:blue', alpha=0.12, label='bounded truth ± 2 noise std')
        else:
            ax.fill_between(hours, released[i] - 2 * stddev[i], released[i] + 2 * stddev[i],
                            color='tab:blue', alpha=0.12, label='released ± 2 noise std')
        ax.plot(hours, released[i], color='tab:blue', lw=1.2, marker='.', ms=3,
                label='released (DP)')
        if processed is not None:
            ax.plot(hours, processed[i], color='tab:orange', lw=1.2,
                    label=f'released, {processed_label}')
        ax.axhline(0, color='grey', lw=0.6)
        ax.set_title(keys[i], fontsize=9)
        ax.set_xlabel('hours since start')
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel('rides from station (cumulative)')
    axes[0][0].legend(fontsize=6.5, loc='upper left')
    fig.suptitle(title + ('' if evaluate else ' — released values only'), fontsize=10)
    fig.tight_layout()
    data = png_bytes(fig, dpi=110)
    plt.close(fig)
    with FileSystems.create(path) as f:
        f.write(data)
    return path
