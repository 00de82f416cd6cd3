"""The generic YAML job: reads the config (local or gs://), expands its Jinja variables, adds
beam_dp's provider, sets the pipeline budget from the command line, builds the graph under the
job's noise key (every beam_dp transform charges the one pipeline accountant: an over-spending
config is refused here), records the run in the privacy ledger, then runs or submits it."""

import datetime
import logging
import os
from typing import Any, Dict, Iterator, List, Optional, Tuple

import apache_beam as beam
import yaml
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from beam_dp.transforms import shell
from beam_dp.transforms import yaml_provider
from pipelines.common.launch import is_dry_run
from pipelines.common.launch import run_pipeline
from pipelines.common.launch import runner_name
from pipelines.common.launch import waits_for_job
from pipelines.common.launch import with_default_runner
from pipelines.common.ledger import guard_stream
from pipelines.yaml.options import parse_args

__all__ = ['JOB', 'build', 'check_noise_keys', 'dp_transforms', 'load_spec', 'release_schedule',
           'run']

_LOG = logging.getLogger(__name__)
JOB = 'yaml'
_BUDGET_OPTIONS = ('beam_dp_epsilon', 'beam_dp_delta', 'beam_dp_rho')


def _read(path: str) -> str:
    with FileSystems.open(path) as f:
        return f.read().decode('utf-8')


def load_spec(args) -> Dict[str, Any]:
    """The config as a pipeline spec: Jinja expanded, beam_dp's provider included (any include
    of a beam_dp providers.yaml replaced by the installed one), the budget flags in its
    options."""
    from apache_beam.yaml import yaml_transform  # pylint: disable=import-outside-toplevel
    try:
        template = _read(args.config)
    except Exception as e:  # pylint: disable=broad-except
        raise SystemExit(f'error: --config: cannot read {args.config}: {e}') from None
    text = yaml_transform.expand_jinja(template, args.jinja_variables or {},
                                       [FileSystems.split(args.config)[0]])
    spec = yaml.load(text, Loader=yaml_transform.SafeLineLoader)
    if not isinstance(spec, dict) or 'pipeline' not in spec:
        raise SystemExit(f'error: --config: {args.config} is not a Beam YAML pipeline (no '
                         f'pipeline: section).')
    providers = [p for p in spec.get('providers') or []
                 if not (isinstance(p, dict) and str(p.get('include', '')).endswith(
                     os.path.join('beam_dp', 'transforms', 'providers.yaml')))]
    spec['providers'] = providers + [{'include': yaml_provider.PROVIDERS_PATH}]
    options = dict(yaml_transform.SafeLineLoader.strip_metadata(spec.get('options') or {}))
    flags = {'beam_dp_epsilon': args.epsilon, 'beam_dp_delta': args.delta,
             'beam_dp_rho': args.rho}
    if any(v is not None for v in flags.values()):
        for name in _BUDGET_OPTIONS:
            options.pop(name, None)
        options.update({k: v for k, v in flags.items() if v is not None})
    if not any(options.get(name) is not None for name in _BUDGET_OPTIONS):
        raise SystemExit('error: the pipeline has no budget: give --epsilon (and --delta) or '
                         '--rho, or options.beam_dp_epsilon in the config.')
    spec['options'] = options
    return spec


def _transforms(node) -> Iterator[Dict[str, Any]]:
    """Every transform spec of the pipeline, composites included."""
    if isinstance(node, dict):
        if 'type' in node:
            yield node
        for key in ('pipeline', 'transforms'):
            yield from _transforms(node.get(key))
    elif isinstance(node, list):
        for item in node:
            yield from _transforms(item)


def dp_transforms(spec) -> List[Dict[str, Any]]:
    return [t for t in _transforms(spec.get('pipeline'))
            if t.get('type') in yaml_provider.TRANSFORMS]


def _seconds(value) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    if isinstance(value, str):
        return datetime.datetime.fromisoformat(value.replace('Z', '+00:00')).timestamp()
    return float(value)


def release_schedule(spec) -> Tuple[Optional[float], Optional[float]]:
    """The public schedule recorded in the ledger: the earliest ``start`` and the latest ``end``
    of the beam_dp transforms (None if one has no end: an open-ended stream)."""
    configs = [t.get('config') or {} for t in dp_transforms(spec)]
    starts = [_seconds(c['start']) for c in configs if c.get('start') is not None]
    ends = [_seconds(c.get('end')) for c in configs if 'start' in c or 'end' in c]
    start = min(starts) if starts else None
    end = max(ends) if ends and None not in ends else None
    return start, end


def check_noise_keys(spec, args) -> None:
    """The job's --noise_key/--stream_id are the noise key of every beam_dp transform (the one
    the ledger fingerprints): a config may only repeat them."""
    for t in dp_transforms(spec):
        given = (t.get('config') or {}).get('noise_key')
        if given is None:
            continue
        given = given if isinstance(given, dict) else {'reference': given}
        if given.get('reference') != args.noise_key or given.get('stream_id') != args.stream_id:
            raise SystemExit(
                f"error: transform {t.get('name', t['type'])!r} sets its own noise_key; the job's "
                f'noise key is --noise_key/--stream_id (recorded in the privacy ledger): remove '
                f'it from the config, or give the same reference and stream id on the command '
                f'line.')


def build(args, beam_args: List[str]) -> Tuple[beam.Pipeline, Dict[str, Any]]:
    """The pipeline, built (every beam_dp transform has charged the pipeline's accountant), and
    the spec. Exits with the refusal of an over-spending or malformed config."""
    from pipelines.yaml import pipeline as job  # pylint: disable=import-outside-toplevel
    spec = load_spec(args)
    check_noise_keys(spec, args)
    return job.build_spec(args, spec, PipelineOptions(with_default_runner(beam_args))), spec


def run(argv=None) -> None:
    args, beam_args = parse_args(argv)
    pipeline, spec = build(args, beam_args)
    accountant = shell.pipeline_accountant(pipeline)
    runner = runner_name(pipeline.options)
    start, end = release_schedule(spec)
    guard_stream(args, beam_args, job=JOB, accountants={'pipeline': accountant}, start=start,
                 end=end, dry_run=is_dry_run(pipeline.options)
                 and not waits_for_job(pipeline.options, runner))
    spent = accountant.spent()
    _LOG.info('Pipeline budget %s; the config\'s beam_dp transforms charge %s (%s).',
              accountant.budget, spent, ', '.join(t.get('name', t['type'])
                                                  for t in dp_transforms(spec)))
    run_pipeline(pipeline, runner)
