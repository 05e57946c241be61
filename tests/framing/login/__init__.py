"""Tests of framing.login."""
