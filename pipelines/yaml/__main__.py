"""``python -m pipelines.yaml --config=<pipeline.yaml> [options]``: the generic job."""

from pipelines.yaml import main

if __name__ == '__main__':
    main.main()
