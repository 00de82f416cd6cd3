"""The demo's plot: released vs true cumulative counts of a few stations.

For each station: the raw truth (every valid ride), the truth after contribution bounding (what
the transform counts: the rides it keeps), the DP releases with a ±2 noise-std band around the
bounded truth (where the releases should fall), and optionally the post-processed releases.
The gap between the two truths is the bias of the bounds, not noise.
"""

import io
from typing import Optional, Sequence

import numpy as np
from apache_beam.io.filesystems import FileSystems

__all__ = ['plot_series']


def _picks(truth: np.ndarray, num_plots: int):
    """Busiest, two in the middle, quietest (by the final raw count)."""
    order = np.argsort(-truth[:, -1], kind='stable')
    return sorted({int(order[int(round(q * (len(order) - 1)))])
                   for q in np.linspace(0, 1, num_plots)}, key=lambda i: -truth[i, -1])


def plot_series(path: str, keys: Sequence[str], released: np.ndarray, truth: np.ndarray,
                bounded: np.ndarray, stddev: np.ndarray, step_hours: float, title: str,
                processed: Optional[np.ndarray] = None, processed_label: str = '',
                num_plots: int = 4) -> str:
    """Writes the PNG to ``path`` (local or gs://) and returns ``path``.

    Args:
      released, truth, bounded, stddev: (keys, steps) arrays of released values, raw and
        bounded cumulative truth, and the releases' noise std.
      processed: optional post-processed releases (``processed_label`` names the method).
    """
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    picks = _picks(truth, num_plots)
    fig, axes = plt.subplots(1, len(picks), figsize=(4.2 * len(picks), 3.8), squeeze=False)
    hours = (np.arange(truth.shape[1]) + 1) * step_hours
    for ax, i in zip(axes[0], picks):
        ax.plot(hours, truth[i], color='black', lw=1.5, label='true, all rides')
        ax.plot(hours, bounded[i], color='black', lw=1.2, ls='--',
                label='true after bounding (what is counted)')
        ax.fill_between(hours, bounded[i] - 2 * stddev[i], bounded[i] + 2 * stddev[i],
                        color='tab:blue', alpha=0.12, label='bounded truth ± 2 noise std')
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
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png', dpi=110)
    plt.close(fig)
    with FileSystems.create(path) as f:
        f.write(buffer.getvalue())
    return path
