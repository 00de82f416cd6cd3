"""Flex Template entry point of the Beam YAML jobs (docs/deploy.md "YAML pipelines"): runs
``apache_beam.yaml.main`` with the template's parameters (``--yaml_pipeline_file``,
``--jinja_variables``, the pipeline options), in the image that has beam_dp installed, so that
the YAML file's ``providers: [{include: ...}]`` finds beam_dp's provider
(``python -m beam_dp.transforms.yaml_provider --path`` prints its path in the image)."""

from apache_beam.yaml import main as yaml_main

if __name__ == '__main__':
    yaml_main.run()
