"""Fault injection against real servers over real sockets: failing disks, cut connections, restarts."""
