"""The ``--fuzz-long[=N]`` option of tests/test_fuzz.py (registered there through ``pytest_plugins``).

pytest parses the command line before it imports test modules, so the option is only known when
this plugin is loaded early, from the repository root::

    python -m pytest -p tests.conftest_fuzz tests/test_fuzz.py --fuzz-long=2000

The environment variable does the same without a plugin flag::

    FXREMAT_FUZZ_LONG=2000 python -m pytest tests/test_fuzz.py
"""

from __future__ import annotations

DEFAULT_LONG = 2000


def pytest_addoption(parser) -> None:
    try:
        parser.addoption(
            "--fuzz-long", action="store", nargs="?", const=str(DEFAULT_LONG), default=None, metavar="N",
            help=f"run fxremat's long fuzz profile over N random graphs (default {DEFAULT_LONG})",
        )
    except ValueError:  # loaded twice (as tests.conftest_fuzz by -p, then as conftest_fuzz)
        pass

