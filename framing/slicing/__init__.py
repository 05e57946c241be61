# -*- test-case-name: tests.framing.test_arrays,tests.framing.test_hooks,tests.framing.test_constraints -*-
"""The pluggable slicer/unslicer layer: objects to tokens and back."""
