"""The stateful-transform manifest of each job: what a Dataflow in-place update (``--update``)
must find again in the new graph.

Dataflow matches the running job's stateful steps to the new graph by their full transform names
and refuses (or, worse, starts a step with empty state) when a stateful transform is renamed or
its state changes shape without ``--transform_name_mapping``. This module reads, from the job's
graph as deployed (Pub/Sub in and out, streaming), every stateful ParDo: its full name, its state
cells (kind and coder) and its timer families (time domain). ``pipelines/<job>/state_manifest.json``
records it; ``tests/pipelines/test_state_manifest.py`` fails when the graph no longer matches the
manifest and the job's ``pipelines/<job>/transform_name_mapping.json`` does not explain the
difference. Regenerate after an intended change (and say in the release notes that a running
job needs the mapping, or a drain and a ``--resume`` relaunch) with::

    python -m pipelines.common.state_manifest --write
    python -m pipelines.common.state_manifest --check      # what the test checks

Usage with Dataflow: pass the job's mapping file's entries as
``--transform_name_mapping='{"Old/Name": "New/Name"}'`` with ``--update``.
"""

import argparse
import importlib
import json
import pathlib
import sys
from typing import Dict, List, Mapping, Optional

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2

__all__ = ['JOB_ARGS', 'build_manifest', 'compare', 'load_mapping', 'manifest_path', 'main']

ROOT = pathlib.Path(__file__).resolve().parents[2]
_PROJECT = 'projects/state-manifest'
#: Only the graph is built (never run), so no runner or cloud option is needed (a gs:// temp
#: location would make Beam probe the bucket over the network).
_DATAFLOW = ['--streaming']

#: Each job's arguments as deployed by terraform/envs/example (Pub/Sub in and out).
JOB_ARGS: Dict[str, List[str]] = {
    'continual_counts': [
        f'--input_subscription={_PROJECT}/subscriptions/rides',
        f'--output_topic={_PROJECT}/topics/releases',
        f'--dead_letter_topic={_PROJECT}/topics/dead-letters', '--epsilon=1'],
    'pmwg_queries': [
        f'--data_subscription={_PROJECT}/subscriptions/data',
        f'--query_subscription={_PROJECT}/subscriptions/queries',
        f'--output_topic={_PROJECT}/topics/answers',
        f'--dead_letter_topic={_PROJECT}/topics/dead-letters', '--start=2026-01-01T00:00:00Z'],
    'boost_queries': [
        f'--data_subscription={_PROJECT}/subscriptions/rows',
        f'--query_subscription={_PROJECT}/subscriptions/queries',
        f'--output_topic={_PROJECT}/topics/answers',
        f'--dead_letter_topic={_PROJECT}/topics/dead-letters', '--epsilon=10'],
    'erm_digits': [
        f'--input_subscription={_PROJECT}/subscriptions/examples',
        f'--output_topic={_PROJECT}/topics/models',
        f'--dead_letter_topic={_PROJECT}/topics/dead-letters', '--epsilon=10'],
    # The generic job with its streaming Pub/Sub example config (one representative graph: the
    # state of another config is that config's own).
    'yaml': [
        f'--config={ROOT}/pipelines/yaml/configs/pubsub_counts.yaml',
        '--jinja_variables={"subscription": "' + _PROJECT + '/subscriptions/views", '
        '"output_topic": "' + _PROJECT + '/topics/releases", "dead_letter_topic": "'
        + _PROJECT + '/topics/dead-letters", "start": "2026-01-01T00:00:00Z", '
        '"end": "2026-01-08T00:00:00Z"}', '--epsilon=1', '--ledger=none'],
}


def manifest_path(job: str) -> pathlib.Path:
    return ROOT / 'pipelines' / job / 'state_manifest.json'


def mapping_path(job: str) -> pathlib.Path:
    return ROOT / 'pipelines' / job / 'transform_name_mapping.json'


def _coder(components, coder_id: str) -> str:
    """A coder as its URN and its components' (recursively), e.g. 'kv(bytes,varint)'."""
    coder = components.coders[coder_id]
    urn = coder.spec.urn.rsplit(':', 2)
    name = urn[-2] if urn[-1].startswith('v') else urn[-1]
    if name == 'pickled_python':
        # A Python coder: beam_dp's state coder shows its name and state-format version
        # ('beam_dp_state_v1'), any other pickled coder stays 'pickled_python'.
        from apache_beam.coders.coders import deserialize_coder
        name = getattr(deserialize_coder(coder.spec.payload), 'manifest_name', name)
    if coder.component_coder_ids:
        inner = ','.join(_coder(components, c) for c in coder.component_coder_ids)
        return f'{name}({inner})'
    return name


def _state(components, spec) -> str:
    kind = spec.WhichOneof('spec')
    body = getattr(spec, kind)
    coders = [getattr(body, field) for field in ('coder_id', 'element_coder_id',
                                                  'accumulator_coder_id', 'key_coder_id',
                                                  'value_coder_id') if hasattr(body, field)]
    coders = [c for c in coders if c]
    return f"{kind.replace('_spec', '')}[{','.join(_coder(components, c) for c in coders)}]"


def manifest_of(pipeline) -> Dict[str, dict]:
    """{full transform name: {'state': {cell: kind[coder]}, 'timers': {family: domain}}} for
    every stateful ParDo of a built (not run) pipeline."""
    proto = pipeline.to_runner_api()
    components = proto.components
    out = {}
    for transform in components.transforms.values():
        if transform.spec.urn != common_urns.primitives.PAR_DO.urn:
            continue
        payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
        if not payload.state_specs and not payload.timer_family_specs:
            continue
        out[transform.unique_name] = {
            'state': {name: _state(components, spec)
                      for name, spec in sorted(payload.state_specs.items())},
            'timers': {name: beam_runner_api_pb2.TimeDomain.Enum.Name(spec.time_domain)
                       for name, spec in sorted(payload.timer_family_specs.items())},
        }
    return dict(sorted(out.items()))


def build_manifest(job: str) -> Dict[str, dict]:
    """The manifest of ``job``'s graph as deployed (JOB_ARGS)."""
    options_module = importlib.import_module(f'pipelines.{job}.options')
    pipeline_module = importlib.import_module(f'pipelines.{job}.pipeline')
    args, beam_args = options_module.parse_args(JOB_ARGS[job] + _DATAFLOW)
    pipeline = pipeline_module.build_pipeline(args, PipelineOptions(beam_args))
    return manifest_of(pipeline)


def load_mapping(job: str) -> Dict[str, str]:
    path = mapping_path(job)
    return json.loads(path.read_text()) if path.exists() else {}


def compare(recorded: Mapping[str, dict], current: Mapping[str, dict],
            mapping: Optional[Mapping[str, str]] = None) -> List[str]:
    """What would break a Dataflow ``--update`` from a job running ``recorded`` to ``current``:
    a recorded stateful transform that is gone (and not mapped to a current one), or whose
    state cells or timer families changed. New stateful transforms are fine (they start empty)."""
    mapping = dict(mapping or {})
    problems = []
    for name, spec in recorded.items():
        target = mapping.get(name, name)
        if target not in current:
            problems.append(
                f'stateful transform {name!r} is not in the new graph'
                + (f' (mapped to {target!r}, which is not either)' if target != name else '')
                + ': a renamed transform needs an entry in transform_name_mapping.json '
                  '(and --transform_name_mapping on --update)')
            continue
        now = current[target]
        for part in ('state', 'timers'):
            if spec[part] != now[part]:
                problems.append(f'{name!r}: its {part} changed from {spec[part]} to {now[part]}: '
                                f'a running job cannot be updated in place (drain it and '
                                f'relaunch with --resume, docs/deploy.md)')
    return problems


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument('--write', action='store_true', help='regenerate every manifest')
    action.add_argument('--check', action='store_true', help='compare with the manifests')
    parser.add_argument('--job', action='append', choices=sorted(JOB_ARGS),
                        help='only this job (repeatable; default: every job)')
    args = parser.parse_args(argv)
    failed = False
    for job in args.job or sorted(JOB_ARGS):
        current = build_manifest(job)
        path = manifest_path(job)
        if args.write:
            path.write_text(json.dumps(current, indent=1, sort_keys=True) + '\n')
            print(f'{path.relative_to(ROOT)}: {len(current)} stateful transforms')
            continue
        recorded = json.loads(path.read_text()) if path.exists() else {}
        problems = compare(recorded, current, load_mapping(job))
        for problem in problems:
            print(f'{job}: {problem}')
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
