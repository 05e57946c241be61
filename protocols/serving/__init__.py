"""Running chunkwire services in production: drain on stop, worker processes, metrics.

L{DrainingService} listens and drains on stop (GOAWAY, then the calls in
flight finish; see L{protocols.rpc.drain}); L{protocols.serving.workers}
binds a port once and runs several worker processes on it
(L{protocols.serving.workers.serveWorkers});
L{protocols.serving.metrics} (the C{chunkwire[metrics]} extra) counts calls
for Prometheus.
"""

from .service import AdoptedEndpoint, DrainingService, adoptedEndpoint, watchParent

__all__ = ["AdoptedEndpoint", "DrainingService", "adoptedEndpoint", "watchParent"]
