"""``python -m pipelines.continual_counts [options]``."""

from pipelines.continual_counts import main

if __name__ == '__main__':
    main.main()
