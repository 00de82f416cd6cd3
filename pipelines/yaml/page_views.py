"""The page-views job of docs/configuration.md in Python, both ways: by callables over tuples
and by field names over the Avro records. ``pipelines/yaml/page_views.yaml`` is the same job in
Beam YAML; under the same noise key and labels all three release the same values
(tests/pipelines/test_yaml_pipelines.py).

    python -m pipelines.yaml.page_views --input views.avro --output out/ [--callables]

(``BEAM_DP_NOISE_KEY`` set: the secret noise key, read by reference.) ``write_example_input``
writes the example input (``python -m pipelines.yaml.page_views --write-example views.avro``).
"""

import argparse
import json
import os

import apache_beam as beam
import fastavro
from apache_beam.transforms.window import TimestampedValue

import beam_dp
from beam_dp.noise import NoiseKeyRef

PAGES = ['home', 'search', 'cart']
SCHEMA = {'type': 'record', 'name': 'View', 'fields': [
    {'name': 'user', 'type': 'string'}, {'name': 'page', 'type': 'string'},
    {'name': 'seconds', 'type': 'double'}, {'name': 'ts', 'type': 'double'}]}
#: The privacy unit, the bounds and the clock of both transforms.
UNIT = dict(max_keys_per_unit=2, max_contributions_per_step=1, max_steps_per_unit=3)
CLOCK = dict(start=0, step=60, end=300)


def write_example_input(path: str) -> None:
    """40 users, each viewing 2 pages over 3 minutes (within the bounds), and one record of a
    page outside the public keys (a dead letter)."""
    rows = [{'user': f'u{i}', 'page': PAGES[(i + s % 2) % 3],
             'seconds': float((i * 7 + s) % 70), 'ts': 60.0 * s + i % 50}
            for i in range(40) for s in range(3)]
    rows.append({'user': 'x', 'page': 'checkout', 'seconds': 1.0, 'ts': 10.0})
    with open(path, 'wb') as f:
        fastavro.writer(f, fastavro.parse_schema(SCHEMA), rows)


def _noise_key():
    return NoiseKeyRef('env:BEAM_DP_NOISE_KEY', stream_id='page_views')


def by_fields(records):
    """The job by field names: ``records`` are the Avro records (dicts)."""
    unit = beam_dp.UserLevel(privacy_unit_field='user', **UNIT)
    views = records | 'Views' >> beam_dp.ContinualCountPerKey(
        public_keys=PAGES, key_field='page', timestamp_field='ts', privacy_unit=unit,
        budget=beam_dp.PrivacyBudget(epsilon=1.0), noise_key=_noise_key(), **CLOCK)
    seconds = records | 'Seconds' >> beam_dp.ContinualSumPerKey(
        public_keys=PAGES, key_field='page', value_field='seconds', lower=0, upper=60,
        timestamp_field='ts', privacy_unit=unit, budget=beam_dp.PrivacyBudget(epsilon=1.0),
        noise_key=_noise_key(), **CLOCK)
    return views, seconds


def by_callables(records):
    """The same job by callables: the records as (page, seconds, user) tuples stamped at ts."""
    tuples = records | 'AsTuples' >> beam.Map(
        lambda r: TimestampedValue((r['page'], r['seconds'], r['user']), r['ts']))
    unit = beam_dp.UserLevel(unit_fn=lambda r: r[2], **UNIT)
    views = tuples | 'Views' >> beam_dp.ContinualCountPerKey(
        public_keys=PAGES, key_fn=lambda r: r[0], privacy_unit=unit,
        budget=beam_dp.PrivacyBudget(epsilon=1.0), noise_key=_noise_key(), **CLOCK)
    seconds = tuples | 'Seconds' >> beam_dp.ContinualSumPerKey(
        public_keys=PAGES, key_fn=lambda r: r[0], value_fn=lambda r: r[1], lower=0, upper=60,
        privacy_unit=unit, budget=beam_dp.PrivacyBudget(epsilon=1.0), noise_key=_noise_key(),
        **CLOCK)
    return views, seconds


def _json(release) -> str:
    return json.dumps(release._asdict(), sort_keys=True)


def run(input_path: str, output: str, callables: bool = False, argv=None) -> None:
    """Reads ``input_path`` (Avro), writes ``<output>views*`` / ``<output>seconds*`` (JSON
    lines of the releases) and ``<output>dead_letters*``."""
    options = beam.options.pipeline_options.PipelineOptions(
        argv or ['--runner=FnApiRunner'], beam_dp_epsilon=2.0)
    with beam.Pipeline(options=options) as p:
        records = p | 'Read' >> beam.io.ReadFromAvro(input_path)
        views, seconds = (by_callables if callables else by_fields)(records)
        _ = views.releases | 'JsonViews' >> beam.Map(_json) | 'WriteViews' >> \
            beam.io.WriteToText(output + 'views')
        _ = seconds.releases | 'JsonSeconds' >> beam.Map(_json) | 'WriteSeconds' >> \
            beam.io.WriteToText(output + 'seconds')
        _ = ((views.dead_letter, seconds.dead_letter) | 'DeadLetters' >> beam.Flatten()
             | 'JsonDead' >> beam.Map(_json) | 'WriteDeadLetters' >> beam.io.WriteToText(
                 output + 'dead_letters'))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--input')
    parser.add_argument('--output')
    parser.add_argument('--callables', action='store_true')
    parser.add_argument('--write-example', metavar='PATH')
    args, rest = parser.parse_known_args(argv)
    if args.write_example:
        write_example_input(args.write_example)
        return
    os.makedirs(os.path.dirname(args.output) or '.', exist_ok=True)
    run(args.input, args.output, args.callables, rest or None)


if __name__ == '__main__':
    main()
