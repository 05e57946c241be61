"""Tests of framing.rpc."""
