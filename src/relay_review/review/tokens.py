"""The token estimate a chunk is packed by, deliberately conservative across BPE tokenizers.

Per line, ``ceil(ascii_chars / 3) + 2 * non_ascii_chars + 1`` (cl100k/o200k, Llama 3, Qwen,
Mistral's 32k SentencePiece): code averages 3.5-4.5 characters per token on these tokenizers;
numbered line prefixes and symbols cost more, hence 3 and the +1 per line. Non-ASCII characters
can cost 1-3 tokens each, hence 2. No tokenizer library is used: routes run many different
models, and tokenizer packages fetch their vocabularies at run time, which an offline runner
cannot do; an estimate that errs large is the safe side.
"""

from __future__ import annotations


def line_tokens(line: str) -> int:
    """Estimated tokens of one rendered line, newline included (see the module doc)."""
    if line.isascii():
        return -(-len(line) // 3) + 1
    ascii_chars = len(line.encode("ascii", errors="ignore"))
    return -(-ascii_chars // 3) + 2 * (len(line) - ascii_chars) + 1


def estimate_tokens(text: str) -> int:
    """Estimated tokens of a text: :func:`line_tokens` summed over its ``\\n``-separated lines."""
    if not text:
        return 0
    return sum(line_tokens(line) for line in text.split("\n"))
