"""The generic YAML job's graph (``build_pipeline``, as the other jobs' ``pipeline`` modules:
pipelines/common/state_manifest.py builds it): the config loaded (``launcher.load_spec``), built
under the job's noise key, every beam_dp transform charged to the pipeline's budget."""

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_dp.errors import BudgetExceededError
from beam_dp.errors import InvalidParamsError
from beam_dp.transforms import shell
from pipelines.common.launch import noise_key_scope

__all__ = ['build_pipeline', 'build_spec']


def build_spec(args, spec, options: PipelineOptions) -> beam.Pipeline:
    """The pipeline of the loaded ``spec`` with ``options`` and the spec's options (its budget
    and e.g. ``streaming``). Exits with the refusal of an over-spending or malformed config."""
    from apache_beam.yaml import yaml_transform  # pylint: disable=import-outside-toplevel
    from pipelines.yaml import launcher  # pylint: disable=import-outside-toplevel,cyclic-import
    merged = PipelineOptions.from_dictionary({
        'pickle_library': 'cloudpickle', **options.get_all_options(drop_default=True),
        **spec['options']})
    pipeline = beam.Pipeline(options=merged)
    try:
        with noise_key_scope(args):
            yaml_transform.expand_pipeline(pipeline, spec, validate_schema='generic',
                                           pipeline_path=args.config)
    except Exception as e:  # pylint: disable=broad-except
        cause = e
        while cause is not None and not isinstance(cause, (BudgetExceededError,
                                                           InvalidParamsError)):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        raise SystemExit(f'error: the config is refused: {cause}') from None
    if shell.pipeline_accountant(pipeline) is None or not launcher.dp_transforms(spec):
        raise SystemExit('error: the config applies no beam_dp transform.')
    return pipeline


def build_pipeline(args, options: PipelineOptions) -> beam.Pipeline:
    from pipelines.yaml import launcher  # pylint: disable=import-outside-toplevel,cyclic-import
    spec = launcher.load_spec(args)
    launcher.check_noise_keys(spec, args)
    return build_spec(args, spec, options)
