"""The pluggable slicer/unslicer layer: objects to tokens and back."""
