"""What a job's plot draws, recorded in the PNG itself.

``save_png`` writes a figure with a 'Description' text chunk listing the labels of the series
drawn (read back from the figure's axes, not from the caller's intent), and ``series_in_png``
reads them back, so that a test or a reviewer can check that a plot made without evaluation holds
no series computed from the raw input (``pipelines.common.evaluation``).
"""

import io
import zlib
from typing import List

__all__ = ['SERIES_KEY', 'drawn_series', 'png_bytes', 'series_in_png']

#: PNG text key holding the labels of the series drawn, one per line after ``_PREFIX``.
SERIES_KEY = 'Description'
_PREFIX = 'series drawn:'


def drawn_series(fig) -> List[str]:
    """Sorted labels of every line and filled area on ``fig``'s axes (unlabelled ones skipped)."""
    return sorted({artist.get_label() for ax in fig.axes
                   for artist in (*ax.get_lines(), *ax.collections)
                   if not str(artist.get_label()).startswith('_')})


def png_bytes(fig, dpi: int = 100) -> bytes:
    """``fig`` as PNG bytes, with the labels of its series in the 'Description' chunk."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png', dpi=dpi,
                metadata={SERIES_KEY: '\n'.join([_PREFIX, *drawn_series(fig)])})
    return buffer.getvalue()


def series_in_png(data: bytes) -> List[str]:
    """The series labels recorded by ``png_bytes`` in a PNG ([] if it has none)."""
    pos, found = 8, []
    while pos + 8 <= len(data):
        length = int.from_bytes(data[pos:pos + 4], 'big')
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b'tEXt':                     # latin-1 text
            key, _, raw = body.partition(b'\0')
            text = raw.decode('latin-1')
        elif kind == b'zTXt':                   # compressed latin-1 text
            key, _, rest = body.partition(b'\0')
            text = zlib.decompress(rest[1:]).decode('latin-1')
        elif kind == b'iTXt':                   # UTF-8 text, optionally compressed
            key, _, rest = body.partition(b'\0')
            flag, rest = rest[0], rest[2:]
            rest = rest.split(b'\0', 2)[2]
            text = (zlib.decompress(rest) if flag else rest).decode('utf-8', 'replace')
        else:
            continue
        if key.decode('latin-1') == SERIES_KEY:
            lines = text.splitlines()
            if lines and lines[0] == _PREFIX:
                found.extend(lines[1:])
    return found
