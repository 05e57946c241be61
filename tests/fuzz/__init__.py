"""Replays of the atheris corpus and of every fuzzer finding, without atheris."""
