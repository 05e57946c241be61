"""Tests for protocols.bulk: streamed bulk transfer."""
