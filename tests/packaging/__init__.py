"""Tests of chunkwire as a package: the wheel and sdist, and a project of its own built on them."""
