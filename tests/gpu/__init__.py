"""The GPU tests (a package, so that its conftest.py does not shadow tests/conftest.py, whose helpers
the tests import as `conftest`)."""
