"""The interfaces of the pluggable layer.

Contract: an L{ISlicer} turns one Python object into tokens written through an
encoder; an L{IUnslicer} builds one object from the tokens between an OPEN and
its CLOSE, and may refuse a token at its header (L{IUnslicer.check_token})
before any of its body is buffered.  An unslicer may also offer the optional
hooks of L{IReportsViolations} (to describe a refusal of its object) and of
L{IStreamsBodies} (to take a BYTES body piece by piece as it arrives); the
decoder looks each up once per class and works without them.
"""

from __future__ import annotations

from zope.interface import Attribute, Interface


class ISlicer(Interface):  # type: ignore[misc]
    """Writes one object of a registered type as tokens."""

    def slice(obj, encoder):  # type: ignore[no-untyped-def]
        """
        Write C{obj} through C{encoder}, normally with one call to
        C{encoder.write_container(name, obj, parts)}: OPEN C{name}, each of
        C{parts} written as an object (anything the encoder can send), CLOSE.
        """


class IUnslicer(Interface):  # type: ignore[misc]
    """
    Builds one object from the tokens inside an OPEN ... CLOSE.

    The decoder charges the object it builds to its per-object budget: an
    optional C{open_cost} attribute (bytes; 64 if absent) at its OPEN, and
    56 bytes and one item for each child on its way in (the built-in
    containers keep that count themselves, at no cost per item).

    A L{framing.slicing.builtin.BudgetedUnslicer} class may declare a
    C{record_builder}: a function C{builder(children)} that returns the
    object C{finish} would, had C{receive_child} taken each of C{children}
    (a list of built-in values), or C{None} wherever the unslicer would
    refuse them or look further.  C{record_extra_items} says how many
    children it takes beyond C{Limits.max_items} (0 if absent).  The
    compiled core then parses such objects itself and calls the builder
    once per object (L{framing._core}); it must not raise.  The RPC
    message's unslicer also declares C{record_rpc}, its message type and
    longest method name: the compiled core then builds an ANSWER and a CALL
    without keyword arguments itself, with L{framing.rpc.wire.buildMessage}'s
    checks, and calls the builder for the other shapes.

    An unslicer class that is not budgeted and takes no streamed bodies may
    declare C{rebuildable = True}: building its object does nothing but
    build it (no count, no registration, no I/O).  The compiled core then
    runs it where its type sits inside an object it decodes (the built-ins
    around and inside stay compiled), and may run it again for the same
    tokens when that object turns out to need the pure decoder (which
    words a refusal further on).  The unslicer that C{Registry.register}
    makes from C{from_wire} is rebuildable.

    An unslicer may define C{child_factory(name, factory)}: the unslicer
    factory for its next child, an OPEN of open-type C{name} (bytes), given
    C{factory}, the registry's for that name; it returns C{factory} or one
    of its own (the RPC message builds a CALL's call context and metadata
    with unslicers of its own, which refuse oversized metadata at its
    headers).  The pure decoder asks it at each nested OPEN; the compiled
    core never reads such a child itself (the RPC message's record builder
    hands a CALL with a context back to the pure decoder).

    Optional methods (declared in L{IReportsViolations} and
    L{IStreamsBodies}, so that an unslicer without them still provides this
    interface): C{report_violation(violation)}, C{begin_body(length)},
    C{body_piece(data)} and C{end_body()}.
    """

    open_type = Attribute("The open-type name this unslicer builds, e.g. 'list'.")

    def check_token(kind, size):  # type: ignore[no-untyped-def]
        """
        Called at the header of every body token and every nested OPEN,
        before the body arrives; raise a L{framing.Violation} to refuse it.
        """

    def receive_child(obj):  # type: ignore[no-untyped-def]
        """Accept one finished child object; raise L{framing.Violation} to refuse it."""

    def finish():  # type: ignore[misc, no-untyped-def]
        """
        Return the finished object once its CLOSE arrives, or L{NOTHING}
        for an object that completes nothing worth passing on.
        """

    def child_where():  # type: ignore[misc, no-untyped-def]
        """Describe where the next child goes, e.g. C{"[3]"} or C{"['name']"}."""


class IReportsViolations(IUnslicer):
    """An unslicer that describes the refusals of the object it opened at the top level."""

    def report_violation(violation):  # type: ignore[no-untyped-def]
        """
        The top-level object this unslicer opened was refused: by itself or
        by anything inside it (a token refused at its header, a child or a
        C{finish} refused, the object's budget, an ABORT, an unknown type
        nested inside...).  Called on the unslicer opened at depth 0 only,
        with C{violation.where} already filled in, and never for a
        L{framing.ProtocolError}.

        @return: the L{framing.Violation} that the decoder delivers in the
            refused object's place: C{violation} itself (perhaps with
            fields added, e.g. a request id) or another one.
        """


class IStreamsBodies(IUnslicer):
    """An unslicer that takes a BYTES body piece by piece instead of whole."""

    def begin_body(length):  # type: ignore[no-untyped-def]
        """
        A BYTES body of C{length} bytes was accepted (after L{check_token})
        for this, the innermost open unslicer.  Return true to have it
        streamed through L{body_piece} and L{end_body}; false to receive it
        whole through C{receive_child} as usual.  Raise a
        L{framing.Violation} to refuse the object.
        """

    def body_piece(data):  # type: ignore[no-untyped-def]
        """
        The next piece of the body, in order, as it came off the wire: a
        C{bytes} or a C{memoryview} of one (valid only during the call:
        copy what must be kept).  Pieces are never empty.
        """

    def end_body():  # type: ignore[misc, no-untyped-def]
        """The whole body has arrived (called once, also for an empty body)."""


class _Nothing:
    """The type of L{NOTHING}."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOTHING"


NOTHING = _Nothing()
"""What an unslicer's C{finish} returns for an object that completes
nothing: the decoder then neither hands it to the parent's C{receive_child}
nor puts it in C{feed}'s results (a streamed bulk frame whose body has
already gone to its destination)."""
