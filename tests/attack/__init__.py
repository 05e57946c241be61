"""The attack suite: hostile clients against the example servers, honest clients measured beside them.

PYTHONPATH=. python -m tests.attack                 # every attack, both servers, 4 s each
PYTHONPATH=. python -m tests.attack --duration 8 --json attack.json
"""
