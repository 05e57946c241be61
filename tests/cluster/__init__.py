"""The cluster run (C{python3 dev.py cluster}): network namespaces, a workload, faults, checks."""
