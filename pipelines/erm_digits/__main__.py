"""``python -m pipelines.erm_digits [options]``."""

from pipelines.erm_digits import main

if __name__ == '__main__':
    main.main()
