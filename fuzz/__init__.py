"""Coverage-guided fuzzing of the framing core with atheris (see fuzz/README.md)."""
