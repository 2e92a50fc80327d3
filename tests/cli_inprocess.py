"""Run a ``neuronet`` command line in this process and return its exit status (0, 2 for a user error)."""


def cli(*args: str) -> int:
    from neuronet.cli import main

    try:
        main(list(args))
    except SystemExit as stop:
        return int(stop.code or 0)
    return 0
