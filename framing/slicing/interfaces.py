"""The two interfaces of the pluggable layer.

Contract: an L{ISlicer} turns one Python object into tokens written through an
encoder; an L{IUnslicer} builds one object from the tokens between an OPEN and
its CLOSE, and may refuse a token at its header (L{IUnslicer.check_token})
before any of its body is buffered.
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
        """Return the finished object once its CLOSE arrives."""

    def child_where():  # type: ignore[misc, no-untyped-def]
        """Describe where the next child goes, e.g. C{"[3]"} or C{"['name']"}."""
