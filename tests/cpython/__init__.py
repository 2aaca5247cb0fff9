"""Copies of CPython's queue tests (PSF licence, see each file), for interpreters without
their ``test`` package."""
