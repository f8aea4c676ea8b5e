"""``python -m erasure_receipts``: the ``receipt`` command line."""

from ._cli import main

if __name__ == "__main__":
    main()
