"""Benchmarks (not tests): each module has ``main(argv)`` and prints a table.

``python -m benchmarks`` runs them all; ``--tiny`` (every module takes it) runs each at a toy size, which CI
does so that none can rot. A missing peer (PyTorch) is skipped with a note.
"""
