"""Output file names of the jobs' Avro sinks."""

import datetime
import uuid

from apache_beam.transforms import window
from apache_beam.utils.timestamp import Timestamp

__all__ = ['avro_file_naming', 'file_naming']


def _iso(ts: Timestamp) -> str:
    return ts.to_utc_datetime().strftime('%Y%m%dT%H%M%SZ')


def file_naming(prefix: str, suffix: str, unique: bool):
    """File names: prefix[-window][-pane N | -written-at+uuid]-SSSSS-of-NNNNN + suffix.

    ``unique`` adds the processing time and a random token, for outputs whose window fires
    repeatedly (fileio's default naming would overwrite the earlier firings' files).
    """

    def _inner(win, pane, shard_index, total_shards, compression, destination):
        del compression, destination
        parts = [prefix]
        if win is not None and win != window.GlobalWindow():
            parts.append(f'{_iso(win.start)}--{_iso(win.end)}')
        if unique:
            stamp = datetime.datetime.now(datetime.timezone.utc).strftime('%Y%m%dT%H%M%S')
            parts.append(f'{stamp}-{uuid.uuid4().hex[:8]}')
        elif pane is not None and not (pane.is_first and pane.is_last):
            parts.append(f'pane{pane.index}')
        if shard_index is not None and total_shards is not None:
            parts.append(f'{int(shard_index):05d}-of-{int(total_shards):05d}')
        return '-'.join(parts) + suffix

    return _inner


def avro_file_naming(prefix: str, unique: bool):
    """``file_naming`` with the '.avro' suffix."""
    return file_naming(prefix, '.avro', unique)
