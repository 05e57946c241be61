"""How-to: limits bound what a connection holds; constraints say what each position may contain."""

from framing import Decoder, Limits, dumps
from framing.slicing import ByteString, DictOf, Integer, ListOf, Text

# Limits apply to everything a decoder receives; a body too long is refused at its header.
small = Limits(max_bytes_length=1024, max_depth=8)
decoder = Decoder(small)
for result in decoder.feed(dumps(b"x" * 4096) + dumps(b"ok")[9:]):  # one stream: preamble once
    print(type(result).__name__, getattr(result, "code", result))

# A constraint checks the shape, again before any refused body byte is kept.
order = DictOf(Text(20), ListOf(Integer(0, 100), max_items=3))
checked = Decoder(constraint=order)
print(checked.feed(dumps({"qty": [1, 2, 3]})))
[refused] = Decoder(constraint=order).feed(dumps({"qty": [1, 2, 300]}))
print(refused.code, refused.where)
ByteString(16).validate(b"short enough")  # the same check on an object in memory
