"""`python -m surreal`."""

from surreal.cli import main

# Guarded: multiprocessing's spawn (the DataFetcher's workers) re-imports the main module.
if __name__ == "__main__":
    main()
