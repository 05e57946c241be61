"""Tests of framing.bulk."""
