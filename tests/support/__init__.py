"""What the test folders share: fixtures as pytest plugins, helpers as plain modules.

``tests/conftest.py`` registers the plugins (``pytest_plugins``); a test imports helper
functions and builders from here, never from a conftest. See ``tests/README.md``.
"""
