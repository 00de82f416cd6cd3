"""The privacy ledger (beam_dp.accounting.ledger): every refusal and every accepted case, on a
local directory; the FileSystems store once (beam_dp.ledger_store)."""

import datetime
import hashlib
import json
import os
import threading

import pytest

from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting.ledger import LEDGER_MARKER
from beam_dp.accounting.ledger import LedgerRefusedError
from beam_dp.accounting.ledger import LocalStore
from beam_dp.accounting.ledger import PrivacyLedger
from beam_dp.accounting.ledger import RunRecord
from beam_dp.accounting.ledger import check_run
from beam_dp.accounting.ledger import key_fingerprint
from beam_dp.accounting.ledger import record_from_json
from beam_dp.accounting.ledger import record_to_json
from beam_dp.ledger_store import FileSystemsStore
from beam_dp.ledger_store import main as ledger_main
from beam_dp.ledger_store import open_ledger
from beam_dp.noise import NoiseKeyRef

STREAM = 'rides-eu'
START = 1_717_286_400.0
KEY_A = key_fingerprint(hashlib.blake2b(b'a' * 32, digest_size=64).digest())
KEY_B = key_fingerprint(hashlib.blake2b(b'b' * 32, digest_size=64).digest())


def _accountants(epsilon=1.0, spend=(0.5, 0.5), rho=None):
    budget = PrivacyBudget(rho=rho) if rho else PrivacyBudget(epsilon=epsilon)
    acc = BudgetAccountant(budget)
    for i, e in enumerate(spend):
        acc.spend(f'T{i}', PrivacyCost(rho=e) if rho else PrivacyCost(epsilon=e))
    return {'all': acc}


def _run_record(start=START, key=KEY_A, lifetime=None, stream=STREAM, **kw):
    return RunRecord.new(stream, 'test_job', kw.pop('accountants', None) or _accountants(**kw),
                         start=start, end=None, key_fingerprint=key, lifetime_budget=lifetime)


@pytest.fixture
def ledger(tmp_path):
    return PrivacyLedger.init(LocalStore(), str(tmp_path / 'ledger'))


def _refused(ledger, run, resume=False):
    with pytest.raises(LedgerRefusedError) as info:
        ledger.begin_run(ledger.prepare(run, resume))
    return info.value


# -- accepted ----------------------------------------------------------------------------------

def test_first_run_is_recorded(ledger):
    run = _run_record()
    path = ledger.begin_run(ledger.prepare(run, resume=False))
    assert os.path.basename(path) == f'{run.run_id}.json'
    (recorded,) = ledger.history(STREAM)
    assert recorded == run
    doc = json.loads(open(path, 'rb').read())
    assert doc['schedule'] == {'start': START, 'end': None}
    assert doc['noise_key_fingerprint'] == KEY_A
    assert [t['label'] for t in doc['parts'][0]['transforms']] == ['T0', 'T1']
    assert doc['parts'][0]['transforms'][0]['cost'] == {
        'epsilon': 0.5, 'delta': 0.0, 'rho': 0.0, 'relation': 'add_remove'}


def test_resume_is_recorded_and_not_counted(ledger):
    first = _run_record()
    ledger.begin_run(first)
    resumed = ledger.prepare(_run_record(), resume=True)
    assert resumed.resume_of == first.run_id
    ledger.begin_run(resumed)
    # A resume of the resume is fine too, and still counts nothing.
    again = ledger.prepare(_run_record(), resume=True)
    assert again.resume_of == resumed.run_id
    ledger.begin_run(again)
    assert [r.counted for r in ledger.history(STREAM)] == [True, False, False]
    # ... so the lifetime still holds exactly one run's budget: a new run from scratch (new key)
    # is refused.
    assert 'lifetime_budget' in _refused(ledger, _run_record(key=KEY_B)).reasons


def test_raised_lifetime_budget_accepts_a_second_run_with_a_new_key(ledger):
    ledger.begin_run(_run_record())
    ledger.begin_run(_run_record(key=KEY_B, lifetime=PrivacyBudget(epsilon=2.0)))
    # A third needs 3.
    error = _refused(ledger, _run_record(key=None, lifetime=PrivacyBudget(epsilon=2.5)))
    assert error.reasons == ('lifetime_budget',)
    assert 'epsilon=3 in all' in str(error) and 'at least epsilon=3' in str(error)
    ledger.begin_run(_run_record(key=None, lifetime=PrivacyBudget(epsilon=3.0)))


def test_runs_without_a_key_compose_too(ledger):
    ledger.begin_run(_run_record(key=None))
    assert _refused(ledger, _run_record(key=None)).reasons == ('lifetime_budget',)


def test_other_streams_are_independent(ledger):
    ledger.begin_run(_run_record())
    ledger.begin_run(_run_record(stream='rides-us', start=START + 3600))   # same key, other stream


def test_zcdp_lifetime(ledger):
    ledger.begin_run(_run_record(rho=0.5, spend=(0.25, 0.25), key=None))
    error = _refused(ledger, _run_record(rho=0.5, spend=(0.25, 0.25), key=None))
    assert 'rho=1 in all' in str(error) and 'lifetime budget rho=0.5' in str(error)
    ledger.begin_run(_run_record(rho=0.5, spend=(0.25, 0.25), key=None,
                          lifetime=PrivacyBudget(rho=1.0)))


def test_parts_compose_in_parallel_when_the_split_is_the_same(ledger):
    def parts():
        accs = {}
        for name in ('a', 'b'):
            accs[name] = BudgetAccountant(PrivacyBudget(epsilon=1.0))
            accs[name].spend('T', PrivacyCost(epsilon=1.0))
        return accs
    ledger.begin_run(_run_record(accountants=parts(), key=None))
    error = _refused(ledger, _run_record(accountants=parts(), key=None,
                                  lifetime=PrivacyBudget(epsilon=1.5)))
    assert 'lifetime_budget' in error.reasons
    ledger.begin_run(_run_record(accountants=parts(), key=None, lifetime=PrivacyBudget(epsilon=2.0)))


def test_a_run_split_differently_counts_everything_in_every_part(ledger):
    accs = {n: BudgetAccountant(PrivacyBudget(epsilon=1.0)) for n in ('a', 'b')}
    for acc in accs.values():
        acc.spend('T', PrivacyCost(epsilon=1.0))
    ledger.begin_run(_run_record(accountants=accs, key=None, lifetime=PrivacyBudget(epsilon=1.0)))
    # One part now: the earlier a and b both fall on its units (2) + its own 1 = 3 > 2.5.
    error = _refused(ledger, _run_record(key=None, lifetime=PrivacyBudget(epsilon=2.5)))
    assert 'epsilon=3 in all' in str(error)
    ledger.begin_run(_run_record(key=None, lifetime=PrivacyBudget(epsilon=3.0)))


# -- refused -----------------------------------------------------------------------------------

def test_second_run_from_scratch_is_refused_with_what_to_do(ledger):
    ledger.begin_run(_run_record(key=None))
    error = _refused(ledger, _run_record(key=None))
    text = str(error)
    assert "refuses this run of stream 'rides-eu'" in text
    assert 'epsilon=1 on top of 1 earlier counted run(s)' in text
    assert 'epsilon=2 in all' in text and "lifetime budget epsilon=1 (by default" in text
    assert '--resume' in text and '--lifetime_epsilon' in text
    assert len(ledger.history(STREAM)) == 1              # nothing recorded


def test_key_reuse_with_another_start_is_refused_even_with_a_raised_lifetime(ledger):
    ledger.begin_run(_run_record())
    error = _refused(ledger, _run_record(start=START + 3600, lifetime=PrivacyBudget(epsilon=10)))
    assert error.reasons == ('key_reuse_other_start',)
    text = str(error)
    assert 'stream start 2024-06-02T00:00:00Z' in text and '2024-06-02T01:00:00Z' in text
    assert 'Rotate the noise key' in text and KEY_A[:12] in text and KEY_A not in text
    # ... and with --resume (the schedule must be the recorded one).
    error = _refused(ledger, _run_record(start=START + 3600), resume=True)
    assert set(error.reasons) == {'key_reuse_other_start', 'resume_mismatch'}
    # A rotated key may start elsewhere (with the lifetime raised for the second run).
    ledger.begin_run(_run_record(start=START + 3600, key=KEY_B, lifetime=PrivacyBudget(epsilon=2)))


def test_key_reuse_from_scratch_from_the_same_start_is_refused(ledger):
    ledger.begin_run(_run_record())
    # Even with the lifetime raised: the same key redraws the same noise over other input.
    error = _refused(ledger, _run_record(lifetime=PrivacyBudget(epsilon=2.0)))
    assert error.reasons == ('key_reuse_from_scratch',)
    assert 'redraw exactly the same noise' in str(error) and 'rotate the noise key' in str(error)


def test_default_second_run_with_the_same_key_lists_both_problems(ledger):
    ledger.begin_run(_run_record())
    assert set(_refused(ledger, _run_record()).reasons) == {'key_reuse_from_scratch',
                                                     'lifetime_budget'}


def test_resume_with_nothing_to_resume_is_refused(ledger):
    error = _refused(ledger, _run_record(), resume=True)
    assert error.reasons == ('nothing_to_resume',)
    assert 'without --resume' in str(error)


def test_resume_with_other_costs_is_refused(ledger):
    ledger.begin_run(_run_record())
    error = _refused(ledger, _run_record(epsilon=2.0, spend=(1.0, 1.0)), resume=True)
    assert error.reasons == ('resume_mismatch',)
    assert 'must keep its costs' in str(error) and 'T0 epsilon=1' in str(error)


def test_lifetime_smaller_than_the_run_is_refused_on_a_first_run(ledger):
    assert _refused(ledger, _run_record(lifetime=PrivacyBudget(epsilon=0.5))).reasons == (
        'lifetime_budget',)


def test_relation_change_is_refused(ledger):
    ledger.begin_run(_run_record(key=None))
    acc = BudgetAccountant(PrivacyBudget(epsilon=1.0))
    acc.spend('T', PrivacyCost(epsilon=1.0, relation='swap_one'))
    error = _refused(ledger, _run_record(accountants={'all': acc}, key=None,
                                  lifetime=PrivacyBudget(epsilon=5)))
    assert 'one neighbouring relation' in str(error)


def test_missing_ledger_is_refused(tmp_path):
    ledger = PrivacyLedger(LocalStore(), str(tmp_path / 'typo'))
    error = _refused(ledger, _run_record())
    assert error.reasons == ('missing',)
    assert 'python -m beam_dp.ledger_store init' in str(error)
    assert not (tmp_path / 'typo').exists()


def test_unreadable_record_is_refused(ledger, tmp_path):
    run = _run_record()
    path = ledger.begin_run(run)
    with open(path, 'wb') as f:
        f.write(b'{"format": "beam_dp.privacy_ledger.run", "version": 1, "parts": [')
    error = _refused(ledger, _run_record(key=KEY_B, lifetime=PrivacyBudget(epsilon=5)))
    assert error.reasons == ('unreadable',)
    assert path in str(error) and 'restore the record' in str(error)


def test_record_of_another_version_or_moved_is_unreadable(ledger):
    run = _run_record()
    path = ledger.begin_run(run)
    doc = json.loads(open(path, 'rb').read())
    doc['version'] = 2
    with open(path, 'w') as f:
        json.dump(doc, f)
    assert _refused(ledger, _run_record(key=KEY_B)).reasons == ('unreadable',)
    doc['version'] = 1
    os.unlink(path)
    other = os.path.join(os.path.dirname(path), 'f' * 32 + '.json')   # renamed record
    with open(other, 'w') as f:
        json.dump(doc, f)
    assert _refused(ledger, _run_record(key=KEY_B)).reasons == ('unreadable',)


@pytest.mark.skipif(os.geteuid() == 0, reason='root reads everything')
def test_unreadable_ledger_directory_is_refused(ledger):
    ledger.begin_run(_run_record())
    directory = os.path.dirname(ledger._directory(STREAM))  # pylint: disable=protected-access
    os.chmod(directory, 0)
    try:
        assert _refused(ledger, _run_record(key=KEY_B)).reasons == ('unreadable',)
    finally:
        os.chmod(directory, 0o755)


def test_unlistable_ledger_is_refused(tmp_path):
    class Forbidden(LocalStore):
        def list(self, directory):
            raise PermissionError('403 storage.objects.list denied')
    ledger = PrivacyLedger.init(Forbidden(), str(tmp_path / 'l'))
    error = _refused(ledger, _run_record())
    assert error.reasons == ('unreadable',) and 'storage.objects.list' in str(error)


def test_unwritable_ledger_is_refused(tmp_path):
    class ReadOnly(LocalStore):
        def write(self, path, data):
            if path.endswith(LEDGER_MARKER):
                return super().write(path, data)
            raise PermissionError('403 Forbidden')
    ledger = PrivacyLedger.init(ReadOnly(), str(tmp_path / 'l'))
    error = _refused(ledger, _run_record())
    assert error.reasons == ('unreadable',) and '403 Forbidden' in str(error)


# -- races -------------------------------------------------------------------------------------

def test_concurrent_runs_do_not_both_start(tmp_path):
    """Two first runs whose pre-checks both passed: the one that writes second sees the other
    and withdraws; if each sees the other, both withdraw. Never both recorded."""

    class Interleaved(LocalStore):
        """Lets both runs pass their pre-check before either writes."""
        barrier = threading.Barrier(2)

        def write(self, path, data):
            if not path.endswith(LEDGER_MARKER):
                self.barrier.wait(timeout=10)
            super().write(path, data)

    ledger = PrivacyLedger.init(Interleaved(), str(tmp_path / 'l'))
    outcomes = []

    def launch():
        try:
            ledger.begin_run(_run_record(key=None))
            outcomes.append('started')
        except LedgerRefusedError as e:
            outcomes.append(e.reasons)

    threads = [threading.Thread(target=launch) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count('started') <= 1, outcomes
    refused = [o for o in outcomes if o != 'started']
    assert refused and all('concurrent_run' in o for o in refused), outcomes
    assert len(ledger.history(STREAM)) == outcomes.count('started')


def test_post_write_recheck_withdraws_the_record(tmp_path):
    """The record written by a concurrent launch between this run's check and its write."""
    rival = _run_record(key=None)

    class RivalWritesFirst(LocalStore):
        def write(self, path, data):
            if not path.endswith(LEDGER_MARKER) and not rival_written:
                rival_written.append(True)
                super().write(path.replace(os.path.basename(path), f'{rival.run_id}.json'),
                              record_to_json(rival))
            super().write(path, data)

    rival_written = []
    ledger = PrivacyLedger.init(RivalWritesFirst(), str(tmp_path / 'l'))
    error = _refused(ledger, _run_record(key=None))
    assert set(error.reasons) == {'lifetime_budget', 'concurrent_run'}
    assert [r.run_id for r in ledger.history(STREAM)] == [rival.run_id]


# -- records and fingerprints ------------------------------------------------------------------

def test_record_round_trips():
    run = _run_record(lifetime=PrivacyBudget(epsilon=3, delta=1e-6)).as_resume_of('a' * 32)
    assert record_from_json(record_to_json(run)) == run
    zcdp = _run_record(rho=0.5, spend=(0.25,))
    assert record_from_json(record_to_json(zcdp)) == zcdp


def test_recorded_at_is_utc_rfc3339():
    run = RunRecord.new(STREAM, 'j', _accountants(), start=None, end=None,
                        now=datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc))
    assert run.recorded_at == '2026-01-02T03:04:05Z'
    assert len(run.run_id) == 32


def test_fingerprint_is_keyed_distinct_and_not_the_key(monkeypatch):
    monkeypatch.setenv('BDP_LEDGER_KEY', 'k' * 40)
    master = NoiseKeyRef('env:BDP_LEDGER_KEY', 'x').master_key()
    fp = key_fingerprint(master)
    assert len(fp) == 32 and fp == key_fingerprint(master)
    assert fp not in master.hex() and ('6b' * 16) not in fp
    # Not the unkeyed hash, nor the keyed hash under another personalisation.
    assert fp != hashlib.blake2b(master, digest_size=16).hexdigest()
    assert fp != hashlib.blake2b(b'', key=master, digest_size=16,
                                 person=b'beam_dp.noise.v1').hexdigest()
    flipped = bytes([master[0] ^ 1]) + master[1:]
    assert key_fingerprint(flipped) != fp


def test_check_run_ignores_the_run_itself():
    run = _run_record()
    check_run([run], run)


# -- FileSystems store and command line --------------------------------------------------------

def test_filesystems_store_runs_the_same_rules(tmp_path):
    root = str(tmp_path / 'fs')
    ledger = PrivacyLedger.init(FileSystemsStore(), root)
    ledger.begin_run(_run_record())
    with pytest.raises(LedgerRefusedError):
        ledger.begin_run(_run_record())
    assert len(open_ledger(root).history(STREAM)) == 1
    assert FileSystemsStore().list(str(tmp_path / 'nothing')) == []


def test_command_line_init_and_show(tmp_path, capsys):
    root = str(tmp_path / 'cli')
    assert ledger_main(['show', root, '--stream_id', STREAM]) == 2
    assert 'no privacy ledger' in capsys.readouterr().err
    assert ledger_main(['init', root]) == 0
    open_ledger(root).begin_run(_run_record())
    assert ledger_main(['show', root, '--stream_id', STREAM]) == 0
    out = capsys.readouterr().out
    assert "stream 'rides-eu': 1 run(s)" in out and 'counted' in out and KEY_A in out
