"""The privacy ledger on Beam's FileSystems (local paths, gs://, any registered file system),
and its command line.

The ledger's rules are pure (``beam_dp.accounting.ledger``); this module only stores its records
where a job can reach them, e.g. ``gs://<bucket>/ledger`` on Dataflow::

    python -m beam_dp.ledger_store init gs://my-ledger-bucket/ledger    # once
    python -m beam_dp.ledger_store show gs://my-ledger-bucket/ledger --stream_id=rides-eu

A Google Cloud Storage object appears only when its upload completes, and listings are strongly
consistent, which is what ``PrivacyLedger.begin_run`` needs against two launches racing.
"""

import argparse
import os
import sys
from typing import List, Optional, Tuple

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from beam_dp.accounting.ledger import LedgerRefusedError
from beam_dp.accounting.ledger import LedgerStore
from beam_dp.accounting.ledger import LocalStore
from beam_dp.accounting.ledger import PrivacyLedger

__all__ = [
    'FileSystemsStore',
    'main',
    'open_ledger',
]


class FileSystemsStore(LedgerStore):
    """A ``LedgerStore`` on ``apache_beam.io.filesystems.FileSystems`` (for gs:// and other
    remote paths; local paths use ``LocalStore``, whose write is atomic on POSIX)."""

    def join(self, base, *parts):
        return FileSystems.join(base, *parts)

    def exists(self, path):
        return FileSystems.exists(path)

    def list(self, directory) -> List[Tuple[str, float]]:
        pattern = FileSystems.join(directory, '*.json')
        try:
            (result,) = FileSystems.match([pattern])
        except BeamIOError as e:
            # Nothing matched is an empty stream, anything else an error.
            if all(not isinstance(x, Exception) or 'No files found' in str(x)
                   for x in getattr(e, 'exception_details', {}).values()):
                return []
            raise
        return [(m.path, m.last_updated_in_seconds) for m in result.metadata_list]

    def read(self, path):
        with FileSystems.open(path) as f:
            return f.read()

    def write(self, path, data):
        # One upload: a GCS object becomes visible only once it is complete.
        with FileSystems.create(path) as f:
            f.write(data)

    def delete(self, path):
        FileSystems.delete([path])


def open_ledger(path: str) -> PrivacyLedger:
    """The ledger at ``path``: a local directory, or a gs:// (or other FileSystems) prefix."""
    if '://' in path:
        return PrivacyLedger(FileSystemsStore(), path)
    return PrivacyLedger(LocalStore(), os.path.abspath(path))


def init_ledger(path: str) -> PrivacyLedger:
    """Creates the ledger at ``path`` (once; an existing ledger is kept)."""
    if '://' in path:
        return PrivacyLedger.init(FileSystemsStore(), path)
    return PrivacyLedger.init(LocalStore(), os.path.abspath(path))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog='python -m beam_dp.ledger_store',
        description='The durable privacy ledger of beam_dp jobs (docs/privacy_model.md, '
                    '"The privacy ledger").')
    sub = parser.add_subparsers(dest='command', required=True)
    init = sub.add_parser('init', help='create a ledger (a local directory or a gs:// prefix)')
    init.add_argument('path')
    show = sub.add_parser('show', help="list a stream's recorded runs")
    show.add_argument('path')
    show.add_argument('--stream_id', required=True)
    args = parser.parse_args(argv)
    if args.command == 'init':
        ledger = init_ledger(args.path)
        print(f'privacy ledger ready at {ledger.root}')
        return 0
    try:
        history = open_ledger(args.path).history(args.stream_id)
    except LedgerRefusedError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    print(f'stream {args.stream_id!r}: {len(history)} run(s)')
    for r in history:
        kind = f'resume of {r.resume_of[:8]}' if r.resume_of else 'counted'
        costs = '; '.join(f'{p.name}: {p.budget}' for p in r.parts)
        print(f'  {r.recorded_at} run {r.run_id[:8]} {r.job} {kind}; start={r.start} '
              f'end={r.end}; {costs}; key={r.key_fingerprint or "none"}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
