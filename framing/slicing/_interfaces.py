# -*- test-case-name: tests.framing.test_slicing,tests.framing.test_late_slicers,tests.framing.test_outgoing -*-
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
    """Builds one object from the tokens inside an OPEN ... CLOSE.

    What a class may declare (each optional; Design: docs/design/c-fast-path.md):
     - C{open_cost}: bytes charged to the per-object budget at its OPEN (64 if
       absent); each child costs 56 bytes and one item.
     - C{record_builder}, C{record_extra_items}, C{record_rpc} (a
       L{framing.slicing._builtin.BudgetedUnslicer}): the compiled core parses
       the object itself and calls the builder once, which returns the object or
       C{None} to hand it back, and must not raise.
     - C{rebuildable = True} (not budgeted, no streamed bodies): building does
       nothing but build, so the compiled core may run it, and run it again.
     - C{child_factory(name, factory)}: the unslicer factory for its next
       nested OPEN; the compiled core leaves such children to the pure decoder.
     - C{frame_values = N} with C{begin_frame} (L{IStreamsBodies}, not
       budgeted): its object is a frame, OPEN, N INTs, a BYTES body, CLOSE;
       the decoder takes the next top-level ones whose headers lie whole in a
       read in one call.

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

    def begin_frame(values, length):  # type: ignore[no-untyped-def]
        """
        Optional, with the class attribute C{frame_values} (N, at most 4):
        the N INT C{values} and the header of a BYTES body of C{length}
        bytes of a frame at the top level, at once.  It must do exactly
        what C{receive_child} for each value, C{check_token(BYTES, length)}
        and L{begin_body} would, and return what L{begin_body} would (it may
        raise what they would).  The decoder learns the type at its first
        frame, read token by token; every later frame whose headers lie
        whole in one read comes here (C{framing._scanner.FrameHeaders}),
        the others still token by token.  Its factory must make unslicers
        of one class (one of another class is read token by token).
        """


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
