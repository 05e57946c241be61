"""chunkwire's Twisted layer: protocols, transports and services on top of L{framing}."""
