"""A byte-level tokenizer: token i < 256 is byte i, then BOS and EOS.

Byte-level vocabularies need no trained merges and no tokenizer dependency, and every string
round-trips exactly, which is what the reference engine needs to check outputs token for token.
"""

from typing import List

BOS = 256
EOS = 257


def encode(text: str, bos: bool = True) -> List[int]:
    """UTF-8 bytes of `text`, after BOS unless told otherwise."""
    return ([BOS] if bos else []) + list(text.encode("utf-8"))


def decode(tokens: List[int]) -> str:
    """The text of the byte tokens; BOS, EOS and invalid UTF-8 sequences are dropped."""
    return bytes(t for t in tokens if t < 256).decode("utf-8", errors="ignore")
