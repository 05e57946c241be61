"""Tests of the example programs that the README and the docs show, beyond tests/protocols/."""
