"""The durable privacy ledger: a stream's lifetime budget survives restarts (DESIGN rule 8).

A continual release runs for months; a job restarted *from scratch* over the same stream starts
new releases over the same people, and under sequential composition the stream's guarantee
silently becomes 2ε, 3ε, ... With a secret noise key it is worse: a second run from scratch
redraws the *same* noise (same key, same addresses), so wherever its input differs from the
first run's (late data, a changed source, a shifted start) a difference of the two releases
cancels the noise. The ledger makes both visible and refuses them before the job starts.

Identity: a stream is named by its ``stream_id`` (the jobs' ``--stream_id``, the root of every
noise address, ``beam_dp.noise.NoiseKeyRef``). Every run of a stream writes one **run record**
(one JSON object, never modified) into the ledger before it is launched:

* when it was recorded, the job, a random run id, and ``resume_of`` (the run it continues, for a
  run restored from a savepoint/checkpoint or a Dataflow ``--update``; None for a run from
  scratch);
* the release schedule's event-time range (``start``, ``end``; None for an open end);
* its budget parts: per part (a disjoint share of the stream's privacy units, e.g. one dataset;
  most jobs have one) the part's budget and the transforms with their costs, from the
  ``BudgetAccountant`` ledger (``run_parts``);
* the lifetime budget the run was checked against;
* the noise key's fingerprint (``key_fingerprint``): a keyed BLAKE2b of the key under its own
  personalisation, never the key (nor anything that helps recover it: it is a PRF output under
  the 64-byte master key, like any noise draw).

``check_run`` is the rule (pure; refusals collected into one ``LedgerRefusedError``):

1. **Lifetime budget.** The costs of every counted run (every run that is not a resume) plus this
   run's, composed sequentially per part (``BudgetAccountant``), must fit the stream's lifetime
   budget; without an explicit lifetime budget it is this run's own budget per part, so a second
   run from scratch over the same stream is refused unless the lifetime budget is raised
   explicitly. A past run whose parts are not this run's parts is composed into every part
   (its split of the units is unknown, so nothing is assumed disjoint).
2. **Noise key reuse.** A run whose key fingerprint was recorded by a run with a different
   stream start is refused (the same step index would draw the same noise over another period);
   so is a run from scratch whose key was used before from the same start (the same noise
   redrawn over input that may differ). Rotate the key, or resume.
3. **Resumes** are not counted: a resume must name a recorded run (the stream's latest) with the
   same stream start and the same costs per part (the state, hence the spent budget, carries
   over; to change a budget, start a new, counted run).

``PrivacyLedger`` stores the records (through a ``LedgerStore``: ``LocalStore`` here, Beam's
FileSystems for gs:// in ``beam_dp.ledger_store``) and runs the check, the write and a re-check
(``begin_run``).

Races and their limits. Two runs launched at the same time each write their record and then
re-read the stream's records; each re-checks itself against *every* other record it now sees,
and withdraws (deletes) its record and refuses if that check fails. Whichever run writes last
sees the other's record, so at most one of two conflicting runs starts (both may refuse; launch
again). This needs a store whose listing is strongly consistent after a write (a local POSIX
file system; Google Cloud Storage) and writes that appear whole (``LocalStore`` writes a
temporary file and links it into place; a GCS object appears when its upload completes). A run
that crashes between its write and its re-check leaves its record, which counts (conservative:
remove it by hand only if the job never released anything). The ledger is a safeguard against
mistakes, not against someone with write access to it: whoever can delete records can reset a
stream's history, so only the job's worker identity should be able to write it (terraform
grants exactly that).
"""

import dataclasses
import datetime
import hashlib
import json
import math
import os
import re
import secrets
import tempfile
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from beam_dp.accounting.accountant import BudgetAccountant
from beam_dp.accounting.accountant import LedgerEntry
from beam_dp.accounting.budget import RELATIONS
from beam_dp.accounting.budget import PrivacyBudget
from beam_dp.accounting.budget import PrivacyCost
from beam_dp.errors import BeamDpError
from beam_dp.errors import BudgetExceededError
from beam_dp.errors import InvalidParamsError

__all__ = [
    'LEDGER_MARKER',
    'LedgerRefusedError',
    'LedgerStore',
    'LocalStore',
    'PrivacyLedger',
    'RunPart',
    'RunRecord',
    'check_run',
    'key_fingerprint',
    'record_from_json',
    'record_to_json',
    'run_parts',
]

#: The object that marks a directory as a ledger (``PrivacyLedger.init``); a ledger path without
#: it is refused, so a typo in a path never starts an empty ledger that forgot earlier runs.
LEDGER_MARKER = 'beam_dp_ledger.json'
_FORMAT = 'beam_dp.privacy_ledger'
_RUN_FORMAT = 'beam_dp.privacy_ledger.run'
_VERSION = 1
_FINGERPRINT_PERSON = b'beam_dp.keyfp.v1'       # 16 bytes: distinct from every noise derivation
_RUN_ID = re.compile(r'^[0-9a-f]{32}$')
_TOLERANCE = 1e-9


class LedgerRefusedError(BeamDpError, RuntimeError):
    """The privacy ledger refuses a run (or cannot vouch for the stream's history).

    ``reasons`` holds the kind of each refusal: 'missing', 'unreadable', 'lifetime_budget',
    'key_reuse_other_start', 'key_reuse_from_scratch', 'nothing_to_resume', 'resume_mismatch',
    'concurrent_run'. The message says what to do.
    """

    def __init__(self, message: str, reasons: Sequence[str]):
        super().__init__(message)
        self.reasons = tuple(reasons)


def key_fingerprint(master_key: bytes) -> str:
    """A public fingerprint of a noise key: BLAKE2b-128 keyed by the 64-byte master key
    (``NoiseKeyRef.master_key()``) under its own personalisation, over the empty message.

    Never the key: recovering the key from it is as hard as from any noise draw (a keyed PRF
    output); it only tells whether two runs used the same key.
    """
    if not isinstance(master_key, (bytes, bytearray)) or not 16 <= len(master_key) <= 64:
        raise InvalidParamsError('key_fingerprint: master_key must be 16 to 64 bytes '
                                 '(NoiseKeyRef.master_key()).')
    return hashlib.blake2b(b'', key=bytes(master_key), digest_size=16,
                           person=_FINGERPRINT_PERSON).hexdigest()


# -- records -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RunPart:
    """One budget part of a run: a disjoint share of the stream's privacy units (e.g. one
    dataset), its budget, and the transforms' costs spent from it."""
    name: str
    budget: PrivacyBudget
    entries: Tuple[LedgerEntry, ...]

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise InvalidParamsError(
                f'RunPart: name must be a non-empty string, got {self.name!r}.')
        if not isinstance(self.budget, PrivacyBudget):
            raise InvalidParamsError(
                f'RunPart: budget must be a PrivacyBudget, got {self.budget!r}.')
        object.__setattr__(self, 'entries', tuple(self.entries))

    def costs(self) -> List[PrivacyCost]:
        return [e.cost for e in self.entries]


def run_parts(accountants: Mapping[str, BudgetAccountant]) -> Tuple[RunPart, ...]:
    """The parts of a run from its accountants, keyed by part name (one accountant per disjoint
    share of the units; a job with one accountant has one part)."""
    if not accountants:
        raise InvalidParamsError('run_parts: a run needs at least one accountant.')
    return tuple(RunPart(name, acc.budget, acc.ledger) for name, acc in sorted(accountants.items()))


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """One run of a stream, as written to the ledger (see the module docstring)."""
    stream_id: str
    run_id: str
    job: str
    recorded_at: str
    start: Optional[float]
    end: Optional[float]
    parts: Tuple[RunPart, ...]
    key_fingerprint: Optional[str] = None
    lifetime_budget: Optional[PrivacyBudget] = None
    resume_of: Optional[str] = None

    def __post_init__(self):
        if not isinstance(self.stream_id, str) or not self.stream_id.strip():
            raise InvalidParamsError(f'RunRecord: stream_id must be a non-empty string, got '
                                     f'{self.stream_id!r}.')
        for name in ('run_id', 'resume_of'):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and _RUN_ID.match(value)):
                raise InvalidParamsError(f'RunRecord: {name} must be 32 hex digits, got {value!r}.')
        if self.run_id is None:
            raise InvalidParamsError('RunRecord: run_id is required.')
        for name in ('start', 'end'):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value)):
                raise InvalidParamsError(f'RunRecord: {name} must be a finite number of epoch '
                                         f'seconds or None, got {value!r}.')
        object.__setattr__(self, 'parts', tuple(self.parts))
        if not self.parts:
            raise InvalidParamsError('RunRecord: a run has at least one part.')
        if len({p.name for p in self.parts}) != len(self.parts):
            raise InvalidParamsError('RunRecord: part names must be distinct.')

    @classmethod
    def new(cls, stream_id: str, job: str, accountants: Mapping[str, BudgetAccountant], *,
            start: Optional[float], end: Optional[float],
            key_fingerprint: Optional[str] = None,  # pylint: disable=redefined-outer-name
            lifetime_budget: Optional[PrivacyBudget] = None,
            now: Optional[datetime.datetime] = None) -> 'RunRecord':
        """A fresh record (random run id, recorded now) of a run from scratch; ``as_resume_of``
        turns it into a resume."""
        now = now or datetime.datetime.now(datetime.timezone.utc)
        return cls(stream_id=stream_id, run_id=secrets.token_hex(16), job=job,
                   recorded_at=now.astimezone(datetime.timezone.utc).isoformat(
                       timespec='seconds').replace('+00:00', 'Z'),
                   start=start, end=end, parts=run_parts(accountants),
                   key_fingerprint=key_fingerprint, lifetime_budget=lifetime_budget)

    def as_resume_of(self, run_id: str) -> 'RunRecord':
        return dataclasses.replace(self, resume_of=run_id)

    @property
    def counted(self) -> bool:
        """Whether its costs count towards the stream's lifetime (every run but a resume)."""
        return self.resume_of is None


def _budget_json(budget: Optional[PrivacyBudget]):
    if budget is None:
        return None
    if budget.is_zcdp:
        return {'rho': budget.rho}
    return {'epsilon': budget.epsilon, 'delta': budget.delta}


def _cost_json(cost: PrivacyCost):
    return {'epsilon': cost.epsilon, 'delta': cost.delta, 'rho': cost.rho,
            'relation': cost.relation}


def record_to_json(record: RunRecord) -> bytes:
    """The record's JSON object (UTF-8, sorted keys)."""
    doc = {
        'format': _RUN_FORMAT, 'version': _VERSION,
        'stream_id': record.stream_id, 'run_id': record.run_id, 'job': record.job,
        'recorded_at': record.recorded_at, 'resume_of': record.resume_of,
        'schedule': {'start': record.start, 'end': record.end},
        'noise_key_fingerprint': record.key_fingerprint,
        'lifetime_budget': _budget_json(record.lifetime_budget),
        'parts': [{'name': p.name, 'budget': _budget_json(p.budget),
                   'transforms': [{'label': e.label, 'cost': _cost_json(e.cost)}
                                  for e in p.entries]} for p in record.parts],
    }
    return json.dumps(doc, sort_keys=True, indent=1, allow_nan=False).encode('utf-8')


def _number(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f'{what} must be a number, got {value!r}')
    return float(value)


def _budget_from(doc, what):
    if doc is None:
        return None
    if set(doc) == {'rho'}:
        return PrivacyBudget(rho=_number(doc['rho'], what))
    if set(doc) == {'epsilon', 'delta'}:
        return PrivacyBudget(epsilon=_number(doc['epsilon'], what),
                             delta=_number(doc['delta'], what))
    raise ValueError(f'{what} has unknown fields {sorted(doc)}')


def record_from_json(data: bytes) -> RunRecord:
    """Parses ``record_to_json``'s output. Raises ValueError (or InvalidParamsError) for
    anything else: an unknown format or version, a missing field, an invalid budget."""
    doc = json.loads(data.decode('utf-8'))
    if not isinstance(doc, dict) or doc.get('format') != _RUN_FORMAT:
        raise ValueError('not a beam_dp ledger run record')
    if doc.get('version') != _VERSION:
        raise ValueError(f'run record version {doc.get("version")!r} is not {_VERSION} (written '
                         f'by another beam_dp version?)')
    parts = []
    for p in doc['parts']:
        entries = []
        for t in p['transforms']:
            c = t['cost']
            if c['relation'] not in RELATIONS:
                raise ValueError(f'unknown relation {c["relation"]!r}')
            entries.append(LedgerEntry(str(t['label']), PrivacyCost(
                epsilon=_number(c['epsilon'], 'epsilon'), delta=_number(c['delta'], 'delta'),
                rho=_number(c['rho'], 'rho'), relation=c['relation'])))
        parts.append(RunPart(str(p['name']), _budget_from(p['budget'], 'part budget'), entries))
    schedule = doc['schedule']
    return RunRecord(stream_id=doc['stream_id'], run_id=doc['run_id'], job=str(doc['job']),
                     recorded_at=str(doc['recorded_at']), start=schedule['start'],
                     end=schedule['end'], parts=tuple(parts),
                     key_fingerprint=doc['noise_key_fingerprint'],
                     lifetime_budget=_budget_from(doc['lifetime_budget'], 'lifetime budget'),
                     resume_of=doc['resume_of'])


# -- the rule ----------------------------------------------------------------------------------


def _time(value: Optional[float]) -> str:
    if value is None:
        return 'none'
    try:
        return datetime.datetime.fromtimestamp(value, datetime.timezone.utc).isoformat().replace(
            '+00:00', 'Z')
    except (OverflowError, OSError, ValueError):
        return repr(value)


def _amount(budget_or_total) -> str:
    if getattr(budget_or_total, 'rho', None) is not None and getattr(
            budget_or_total, 'epsilon', None) is None:
        return f'rho={budget_or_total.rho:g}'
    text = f'epsilon={budget_or_total.epsilon:g}'
    return text + (f', delta={budget_or_total.delta:g}' if budget_or_total.delta else '')


def _run_name(record: RunRecord) -> str:
    return f'run {record.run_id[:8]} ({record.job}, recorded {record.recorded_at})'


def _part_costs(previous: RunRecord, run: RunRecord, part: RunPart) -> List[PrivacyCost]:
    """What ``previous`` spent from the units of ``run``'s ``part``: the same-named part when
    both runs split the units the same way, else everything (no disjointness assumed)."""
    if {p.name for p in previous.parts} == {p.name for p in run.parts}:
        return [c for p in previous.parts if p.name == part.name for c in p.costs()]
    return [c for p in previous.parts for c in p.costs()]


def _total(budget: PrivacyBudget, costs: Sequence[PrivacyCost]):
    """The sequential composition of ``costs`` in ``budget``'s notion (for messages)."""
    roomy = (PrivacyBudget(rho=1e300) if budget.is_zcdp
             else PrivacyBudget(epsilon=1e300, delta=budget.delta))
    scratch = BudgetAccountant(roomy)
    for i, cost in enumerate(costs):
        try:
            scratch.spend(f'cost {i}', cost)
        except BudgetExceededError:
            return None
    return scratch.spent()


def _check_lifetime(counted: Sequence[RunRecord], run: RunRecord, problems) -> None:
    for part in run.parts:
        lifetime = run.lifetime_budget or part.budget
        earlier = [c for r in counted for c in _part_costs(r, run, part)]
        accountant = BudgetAccountant(lifetime)
        try:
            for i, cost in enumerate(earlier + part.costs()):
                accountant.spend(f'cost {i}', cost)
            continue
        except BudgetExceededError:
            pass
        except InvalidParamsError as e:
            problems.append(('lifetime_budget', (
                f'part {part.name!r}: this run\'s costs do not compose with the earlier runs\' '
                f'({e}); a stream keeps one neighbouring relation over its lifetime. Use a new '
                f'--stream_id (and a new noise key) for a different privacy model.')))
            continue
        total = _total(lifetime, earlier + part.costs())
        total_text = _amount(total) if total is not None else 'more than a zCDP budget can hold'
        default = '' if run.lifetime_budget is not None else " (by default, this run's own budget)"
        runs = ', '.join(_run_name(r) for r in counted)
        problems.append(('lifetime_budget', (
            f'lifetime budget: part {part.name!r} of this run spends '
            f'{_amount(_total(lifetime, part.costs()) or part.budget)} on top of '
            f'{len(counted)} earlier counted run(s) of the stream ({runs}), {total_text} in all, '
            f'over the stream\'s lifetime budget {_amount(lifetime)}'
            f'{default}. A new run '
            f'from scratch starts new releases over the same people, so its cost adds up. If this '
            f'run continues an earlier one (restored from a savepoint or checkpoint, or a Dataflow '
            f'--update), pass --resume; otherwise raise the lifetime budget explicitly '
            f'(--lifetime_epsilon/--lifetime_delta or --lifetime_rho, at least {total_text}).')))


def _check_key(others: Sequence[RunRecord], run: RunRecord, problems) -> None:
    if run.key_fingerprint is None:
        return
    same_key = [r for r in others if r.key_fingerprint == run.key_fingerprint]
    other_start = [r for r in same_key if r.start != run.start]
    for r in other_start:
        problems.append(('key_reuse_other_start', (
            f'noise key reuse: this noise key (fingerprint {run.key_fingerprint[:12]}...) was '
            f'used by {_run_name(r)} with stream start {_time(r.start)}, and this run starts at '
            f'{_time(run.start)}. With one key, a step index draws the same noise whatever '
            f'period it covers, so a difference of the two runs\' releases cancels the noise. '
            f'Rotate the noise key (a new secret, or a new secret version) for a new start, or '
            f'keep the recorded start (--start) and resume (--resume).')))
    if run.counted and not other_start and same_key:
        problems.append(('key_reuse_from_scratch', (
            f'noise key reuse: {_run_name(same_key[-1])} already released this stream from the '
            f'same start with this noise key (fingerprint {run.key_fingerprint[:12]}...). A run '
            f'from scratch would redraw exactly the same noise over input that may differ, so '
            f'the differences of the releases would be exact. If this run continues that one '
            f'(savepoint, checkpoint, Dataflow --update, or a re-run of a run that failed before '
            f'releasing anything), pass --resume; otherwise rotate the noise key (and raise the '
            f'lifetime budget explicitly to spend more on this stream).')))


def _check_resume(others: Sequence[RunRecord], run: RunRecord, problems) -> None:
    by_id = {r.run_id: r for r in others}
    target = by_id.get(run.resume_of)
    if target is None:
        problems.append(('nothing_to_resume', (
            f'--resume, but the ledger holds no run {run.resume_of} of this stream to resume. '
            f'Start the stream\'s first run without --resume.')))
        return
    origin, seen = target, set()
    while origin.resume_of is not None and origin.resume_of in by_id and origin.run_id not in seen:
        seen.add(origin.run_id)
        origin = by_id[origin.resume_of]
    if target.start != run.start:
        problems.append(('resume_mismatch', (
            f'--resume of {_run_name(target)}, whose stream start is {_time(target.start)}, but '
            f'this run starts at {_time(run.start)}. A resumed run keeps its schedule: pass the '
            f'recorded start, or start a new run without --resume (it is counted).')))

    def signature(record):
        return {p.name: sorted((c.epsilon, c.delta, c.rho, c.relation) for c in p.costs())
                for p in record.parts}

    if signature(origin) != signature(run):
        problems.append(('resume_mismatch', (
            f'--resume of {_run_name(target)}, but this run declares other transforms or '
            f'budgets than the run it continues ({_run_name(origin)}): '
            f'{_describe(run)} instead of {_describe(origin)}. A resume keeps the spent budget '
            f'of the run it continues and is not counted, so it must keep its costs. To change '
            f'a budget, start a new run without --resume (it is counted against the lifetime '
            f'budget).')))


def _describe(record: RunRecord) -> str:
    return '; '.join(f'{p.name}: ' + ', '.join(f'{e.label} {e.cost}' for e in p.entries
                                                if not e.cost.is_zero)
                     for p in record.parts)


def check_run(history: Sequence[RunRecord], run: RunRecord) -> None:
    """Raises ``LedgerRefusedError`` (every problem in one message) unless ``run`` may start
    given the stream's ``history`` (its recorded runs in order; ``run`` itself is skipped)."""
    others = [r for r in history if r.run_id != run.run_id]
    foreign = [r for r in others if r.stream_id != run.stream_id]
    if foreign:
        raise LedgerRefusedError(
            f'stream {run.stream_id!r}: the ledger holds a record of stream '
            f'{foreign[0].stream_id!r} ({_run_name(foreign[0])}) among this stream\'s records; '
            f'the ledger is inconsistent. Check it by hand.', ['unreadable'])
    problems: List[Tuple[str, str]] = []
    _check_key(others, run, problems)
    if run.counted:
        _check_lifetime([r for r in others if r.counted], run, problems)
    else:
        _check_resume(others, run, problems)
    if problems:
        text = '\n  - '.join(p for _, p in problems)
        raise LedgerRefusedError(
            f'the privacy ledger refuses this run of stream {run.stream_id!r}:\n  - {text}',
            [kind for kind, _ in problems])


# -- storage -----------------------------------------------------------------------------------


class LedgerStore:
    """Where the records live: a directory-like namespace of whole objects.

    ``write`` makes an object appear whole or not at all; ``list`` is strongly consistent after a
    write and returns (path, modification time) pairs. Implementations: ``LocalStore`` (a local
    directory) and ``beam_dp.ledger_store.FileSystemsStore`` (Beam's FileSystems: gs://, ...).
    """

    def join(self, base: str, *parts: str) -> str:
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        raise NotImplementedError

    def list(self, directory: str) -> List[Tuple[str, float]]:
        raise NotImplementedError

    def read(self, path: str) -> bytes:
        raise NotImplementedError

    def write(self, path: str, data: bytes) -> None:
        raise NotImplementedError

    def delete(self, path: str) -> None:
        raise NotImplementedError


class LocalStore(LedgerStore):
    """A local directory. ``write`` writes a temporary file, fsyncs it and hard-links it into
    place (refusing to replace an existing record), so a reader never sees a partial record."""

    def join(self, base, *parts):
        return os.path.join(base, *parts)

    def exists(self, path):
        return os.path.exists(path)

    def list(self, directory):
        if not os.path.isdir(directory):
            return []
        out = []
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            if os.path.isfile(path):
                out.append((path, os.stat(path).st_mtime))
        return out

    def read(self, path):
        with open(path, 'rb') as f:
            return f.read()

    def write(self, path, data):
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix='.tmp-', dir=directory)
        try:
            with os.fdopen(fd, 'wb') as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.link(tmp, path)          # fails if the record exists: records are write-once
        finally:
            os.unlink(tmp)

    def delete(self, path):
        os.unlink(path)


def _unreadable_if_raises(action, message):
    """``action()``, or a ``LedgerRefusedError`` ('unreadable') with ``message(error)`` if the
    store raised (the store's own traceback is not chained: it may name private paths)."""
    try:
        return action()
    except Exception as e:  # pylint: disable=broad-except
        raise LedgerRefusedError(message(e), ['unreadable']) from None


def _stream_directory(stream_id: str) -> str:
    """A file-name-safe, collision-free directory name of a stream id: a readable prefix and a
    hash of the whole id."""
    slug = re.sub(r'[^A-Za-z0-9._-]+', '_', stream_id)[:48].strip('._') or 'stream'
    return f'{slug}-{hashlib.sha256(stream_id.encode("utf-8")).hexdigest()[:24]}'


class PrivacyLedger:
    """The ledger at ``root`` (a directory of a ``LedgerStore``).

    Layout: ``<root>/beam_dp_ledger.json`` (the marker, ``init``), and one object per run at
    ``<root>/streams/<stream directory>/<run id>.json``.
    """

    def __init__(self, store: LedgerStore, root: str):
        self._store = store
        self._root = root.rstrip('/') if '://' in root else root

    @property
    def root(self) -> str:
        return self._root

    @classmethod
    def init(cls, store: LedgerStore, root: str) -> 'PrivacyLedger':
        """Creates the ledger at ``root`` (writes the marker); an existing one is kept."""
        ledger = cls(store, root)
        marker = store.join(ledger.root, LEDGER_MARKER)
        if not store.exists(marker):
            store.write(marker, json.dumps({'format': _FORMAT, 'version': _VERSION}).encode())
        return ledger

    def _check_marker(self) -> None:
        marker = self._store.join(self._root, LEDGER_MARKER)
        present = _unreadable_if_raises(
            lambda: self._store.exists(marker),
            lambda e: f'cannot read the privacy ledger at {self._root}: {e}. The stream\'s '
                      f'lifetime budget cannot be checked without it; fix the path or its '
                      f'permissions.')
        if not present:
            raise LedgerRefusedError(
                f'there is no privacy ledger at {self._root} (no {LEDGER_MARKER}). A missing '
                f'ledger would forget the stream\'s earlier runs, so it is never created '
                f'implicitly: check the path, or create the ledger once with '
                f'`python -m beam_dp.ledger_store init {self._root}` (terraform creates the '
                f'deployed one).', ['missing'])
        try:
            doc = json.loads(self._store.read(marker).decode('utf-8'))
            if doc.get('format') != _FORMAT or doc.get('version') != _VERSION:
                raise ValueError(f'unknown ledger format {doc!r}')
        except Exception as e:  # pylint: disable=broad-except
            raise LedgerRefusedError(
                f'the privacy ledger marker {marker} is unreadable ({e}); check the ledger by '
                f'hand.', ['unreadable']) from None

    def _directory(self, stream_id: str) -> str:
        return self._store.join(self._root, 'streams', _stream_directory(stream_id))

    def history(self, stream_id: str) -> List[RunRecord]:
        """The stream's run records, oldest first (by the store's modification time, then run
        id). Raises ``LedgerRefusedError`` for a missing ledger or an unreadable record."""
        self._check_marker()
        directory = self._directory(stream_id)
        listed = _unreadable_if_raises(
            lambda: self._store.list(directory),
            lambda e: f'cannot list the privacy ledger {directory}: {e}. Fix its permissions; '
                      f'the stream\'s lifetime budget cannot be checked without it.')
        records = []
        for path, modified in listed:
            name = path.rstrip('/').rsplit('/', 1)[-1].rsplit(os.sep, 1)[-1]
            if name.startswith('.tmp-'):
                continue
            try:
                record = record_from_json(self._store.read(path))
                if name != f'{record.run_id}.json' or record.stream_id != stream_id:
                    raise ValueError(f'it holds run {record.run_id} of stream '
                                     f'{record.stream_id!r}')
            except Exception as e:  # pylint: disable=broad-except
                raise LedgerRefusedError(
                    f'the privacy ledger record {path} is unreadable ({type(e).__name__}: {e}). '
                    f'The stream\'s lifetime cost cannot be known without it, so no run of '
                    f'stream {stream_id!r} starts: restore the record (the ledger bucket keeps '
                    f'old versions), or, after checking by hand what that run released, remove '
                    f'it.', ['unreadable']) from None
            records.append((modified, record.run_id, record))
        return [r for _, _, r in sorted(records, key=lambda t: (t[0], t[1]))]

    def prepare(self, run: RunRecord, resume: bool) -> RunRecord:
        """``run``, as a resume of the stream's latest run when ``resume`` (unchanged otherwise;
        a resume of a stream with no run keeps a resume_of that ``check_run`` refuses)."""
        if not resume:
            return run
        history = self.history(run.stream_id)
        return run.as_resume_of(history[-1].run_id if history else '0' * 32)

    def check(self, run: RunRecord) -> List[RunRecord]:
        """Checks ``run`` against the stream's history without recording it (a dry run)."""
        history = self.history(run.stream_id)
        check_run(history, run)
        return history

    def begin_run(self, run: RunRecord) -> str:
        """Checks ``run``, writes its record, re-checks against every record now present (a
        concurrent launch) and withdraws it on a conflict. Returns the record's path.

        Raises:
          LedgerRefusedError: the run must not start (the message says what to do).
        """
        self.check(run)
        path = self._store.join(self._directory(run.stream_id), f'{run.run_id}.json')
        _unreadable_if_raises(
            lambda: self._store.write(path, record_to_json(run)),
            lambda e: f'cannot write to the privacy ledger ({path}): {e}. A run that is not '
                      f'recorded does not start; fix the ledger\'s permissions.')
        try:
            check_run(self.history(run.stream_id), run)
        except LedgerRefusedError as e:
            self._store.delete(path)
            raise LedgerRefusedError(
                f'{e}\n  (another run of this stream was recorded while this one was starting; '
                f'this run withdrew its record. Launch again once the other has started.)',
                e.reasons + ('concurrent_run',)) from None
        return path
