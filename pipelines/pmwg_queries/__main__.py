"""``python -m pipelines.pmwg_queries [options]``."""

from pipelines.pmwg_queries import main

if __name__ == '__main__':
    main.main()
