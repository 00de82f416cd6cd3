"""``python -m pipelines.boost_queries [options]``."""

from pipelines.boost_queries import main

if __name__ == '__main__':
    main.main()
