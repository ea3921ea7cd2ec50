"""``python -m frpd_cli``: the same as the ``frpd`` command."""

from .cli.app import main

if __name__ == "__main__":
    main()
