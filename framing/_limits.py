# -*- test-case-name: tests.protocols.rpc.test_limits,tests.protocols.kv.test_limits,tests.framing.test_arrays -*-
"""Per-decoder resource limits.

Contract: a L{Limits} value is immutable and is consulted when a header
announces a size, before any body byte is kept, so the memory one stream can
pin is bounded by these numbers and never by what a peer claims.  The wire
format itself fixes none of them (AMP's 64 KiB and PB's 640 KiB hard caps are
the limits their users complain about most): every one is a constructor
argument.
"""

from __future__ import annotations

from dataclasses import dataclass

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class Limits:
    """
    How much one decoder accepts.  The defaults suit an RPC or bulk service on
    a trusted-but-buggy network; tighten them for services exposed to the
    internet.

    @ivar max_header_length: longest header accepted, in bytes (1..9).  The
        format never needs more than 9; lowering it forbids the wide length
        encodings, e.g. 5 caps every announced size at 2**32 - 1.
    @ivar max_bytes_length: longest byte-string body (and array body).
        256 MiB: large enough for bulk values sent whole; anything larger
        should be streamed.
    @ivar max_string_length: longest UTF-8 text body.  16 MiB: text is decoded
        whole into a C{str} of up to 4x that size.
    @ivar max_bigint_length: longest big-integer magnitude, in bytes.  1 KiB
        (about 2466 decimal digits): arithmetic on huge ints is a CPU hazard.
    @ivar max_open_name_length: longest open-type name.  64 bytes: names are
        identifiers, not data.
    @ivar max_error_length: longest ERROR message body.  4 KiB.
    @ivar max_buffered_bytes: most unprocessed bytes held in the receive chain
        once a C{feed} returns.  Headers are at most 9 bytes and bodies go to
        their own buffer, so an unpaused decoder holds a few bytes; this
        bounds what a paused one may keep.  1 MiB.
    @ivar max_depth: deepest nesting of containers.  64: deep enough for any
        real schema, shallow enough that recursion stays cheap.
    @ivar max_items: most items in one container (a dict counts keys).
        1 Mi items: a list of that many small ints is about 8 MiB.
    @ivar max_object_items: most values in one top-level object, counted
        across all its containers as it is built, exactly (a dict entry
        counts once, as for C{max_items}; see C{docs/costs.md}).  1 Mi, the same as one full container: decoding
        costs a bounded number of operations per value (see
        C{docs/costs.md}), so this bounds the CPU one object can take, about
        a quarter of a second in pure Python, whatever its shape.
    @ivar max_object_memory: most memory, in bytes, that one top-level object
        may take beyond the bytes its bodies carried on the wire, as the
        decoder estimates it while building (each container's own size, a
        slot per item, a small allowance per value, the hash-collision
        tracker of sets and dict keys).  Body bytes are held one for one
        with the wire (text up to four for one, as for C{max_string_length})
        and are bounded by the body limits and by the connection's cap on
        wire bytes per object, so an object holds at most four times its
        wire bytes plus this.  32 MiB: about
        670,000 values in lists (estimated at 50 bytes each), 230,000 dict
        entries; a peer that sends 5-byte empty sets (224 bytes held each) is
        refused after about 125,000 of them, 0.6 MB of input.  Raise it
        with C{max_items} for services that take larger objects.
    @ivar max_hash_collisions: most equality probes one set, frozenset or
        dict may need for members or keys whose hashes collide (the count
        of earlier members with the same full hash, summed over members).
        128: honest data almost never collides, and the probes are capped at
        about sqrt(128 / 2) = 8 comparisons per wire byte, where an
        attacker's set of ints sharing one hash would otherwise cost time
        quadratic in its size.
    @ivar send_high_water: the most bytes that may wait to be sent to the
        peer (encoded but not yet taken by the socket) before the connection
        stops reading from it; C{None} turns the rule off.  4 MiB: a server's
        answers are caused by what it reads, so once this much waits for a
        peer that does not read, reading more would only make the server
        hold more for it; a few MiB keep any RPC connection busy.
    @ivar send_low_water: reading resumes once the bytes waiting to be sent
        fall to this many.  1 MiB: far enough below the high-water mark that
        a connection near it does not flap between reading and not reading
        on every message.  (A connection raises either mark to its
        transport's own buffer size, 64 KiB on Twisted's TCP, if it is below:
        the transport reports a drain only past that size.)
    @ivar max_call_metadata: most entries in one RPC call's metadata
        (L{protocols.rpc._context}).  64: request ids and trace context need
        a few; metadata is for labels, not data.
    @ivar max_call_metadata_length: most characters of one call's metadata,
        keys and values together.  8 KiB: a W3C C{traceparent} and
        C{tracestate} take at most about 600.
    @ivar max_connection_memory: the budget of one connection's
        L{framing._ledger.Ledger}: the most bytes it may hold on its peer's
        behalf beyond the one object being decoded (decoded objects and
        stream items waiting to be taken, answers, calls and notifications
        waiting to be sent, a client's outbox and automatic replies, the
        arguments of the peer's calls running here),
        counted by the bytes actually held.  Past it the connection stops
        reading, and what its peer's reading does not pace (a stream
        producer, a watch notification) waits or is refused; C{None} turns
        the budget off (holdings are still counted).  64 MiB: a few full
        stream windows and send buffers, far below what a server with
        thousands of connections can afford to lose to one peer.
    """

    max_header_length: int = 9
    max_bytes_length: int = 256 * MiB
    max_string_length: int = 16 * MiB
    max_bigint_length: int = 1 * KiB
    max_open_name_length: int = 64
    max_error_length: int = 4 * KiB
    max_buffered_bytes: int = 1 * MiB
    max_depth: int = 64
    max_items: int = 1024 * 1024
    max_object_items: int = 1024 * 1024
    max_object_memory: int = 32 * MiB
    max_hash_collisions: int = 128
    send_high_water: int | None = 4 * MiB
    send_low_water: int = 1 * MiB
    max_call_metadata: int = 64
    max_call_metadata_length: int = 8 * KiB
    max_connection_memory: int | None = 64 * MiB

    def __post_init__(self) -> None:
        if not 1 <= self.max_header_length <= 9:
            raise ValueError("max_header_length must be between 1 and 9")
        for name in (
            "max_bytes_length",
            "max_string_length",
            "max_bigint_length",
            "max_open_name_length",
            "max_error_length",
            "max_buffered_bytes",
            "max_depth",
            "max_items",
            "max_object_items",
            "max_object_memory",
            "max_hash_collisions",
            "max_call_metadata",
            "max_call_metadata_length",
            "send_low_water",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        if self.max_connection_memory is not None and self.max_connection_memory < 0:
            raise ValueError("max_connection_memory must not be negative")
        if self.send_high_water is not None and self.send_high_water < self.send_low_water:
            raise ValueError("send_high_water must not be below send_low_water")


DEFAULT_LIMITS = Limits()
