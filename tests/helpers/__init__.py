"""Helpers shared by the tests of several packages (tests/ is on the path: ``from helpers.classify import ...``)."""
