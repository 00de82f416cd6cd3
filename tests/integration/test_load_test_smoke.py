"""Smoke test of the load-test script (benchmarks/load_test/run.py) on Prism: a short paced run
(20 000 events, about 5 s of stream) must finish, count releases and dead letters, and record
memory samples of the Python SDK harness and of Prism. The real measurement (10^7 events) is
recorded in benchmarks/load_test/README.md, not run here."""

import csv
import json
import os
import subprocess
import sys

import pytest

from tests import runners

pytestmark = [pytest.mark.integration, pytest.mark.prism, runners.requires_prism]

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), 'benchmarks', 'load_test', 'run.py')


def test_load_test_script_runs_and_samples_memory(tmp_path):
    cmd = [sys.executable, SCRIPT, '--runner', 'prism', '--events', '20000',
           '--events_per_impulse', '2000', '--impulse_seconds', '0.5', '--lead_seconds', '8',
           '--keys', '200', '--units', '2000', '--sample_seconds', '1',
           '--results_dir', str(tmp_path), '--tag', 'smoke']
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=170, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(tmp_path / 'summary_smoke.json', encoding='utf-8') as f:
        summary = json.load(f)
    assert summary['returncode'] == 0, (tmp_path / 'worker_smoke.log').read_text()[-3000:]
    assert summary['events'] == 20000
    counters = summary['result']['counters']
    assert counters.get('releases', 0) > 0, counters
    # K = 4 keys per unit over 200 Zipf keys with 10 records per unit: some units exceed K.
    assert counters.get('dead_letters', 0) > 0, counters
    assert all(name == 'dead_letters' or 'max_keys_per_unit' in name
               for name in counters if name.startswith('dead_letters')), counters
    with open(tmp_path / 'samples_smoke.csv', encoding='utf-8') as f:
        rows = list(csv.DictReader(f))
    assert max(float(r['rss_mb_python']) for r in rows) > 50
    assert max(float(r['rss_mb_prism']) for r in rows) > 5
    assert max(int(r['events_done']) for r in rows) == 20000
    assert (tmp_path / 'memory_smoke.png').stat().st_size > 0
