# -*- test-case-name: tests.test_exports,tests.protocols.serving.test_service,tests.protocols.serving.test_workers -*-
"""Running chunkwire services in production: drain on stop, worker processes, metrics.

L{DrainingService} listens and drains on stop (GOAWAY, then the calls in
flight finish; see C{protocols/rpc/_drain.py}); C{protocols/serving/_workers.py}
binds a port once and runs several worker processes on it, and
L{serveWorkers} runs a service of your own there (a function of yours,
named C{"package.module:function"}, called in each worker), on plain and
TLS listeners alike;
L{protocols.serving.metrics} (the C{chunkwire[metrics]} extra) counts calls
for Prometheus.
"""

from .._guard import DEFAULT_GUARD, GuardedFactory, GuardPolicy, addGuardArguments, connectionOf, policyFromArguments
from .._proxyheader import BadEndpointDescription, serverEndpoint
from ._service import AdoptedEndpoint, DrainingService, adoptedEndpoint, watchParent
from ._workers import Supervisor, serveWorkers

__all__ = [
    "AdoptedEndpoint",
    "DrainingService",
    "Supervisor",
    "adoptedEndpoint",
    "serveWorkers",
    "watchParent",
    "BadEndpointDescription",
    "GuardPolicy",
    "GuardedFactory",
    "addGuardArguments",
    "connectionOf",
    "policyFromArguments",
    "serverEndpoint",
    "DEFAULT_GUARD",
]
