"""Benchmarks (not tests): each module has ``main(argv)`` and prints a table.

``python -m benchmarks`` runs them all.
"""
