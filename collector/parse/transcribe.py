"""What copying a log through a web page, issue tracker, chat or word processor did to its text,
undone for matching only: the rules read `transcribed(line)`, evidence keeps the line as it was.

Folded (each is what a renderer or an editor puts in place of the ASCII a program printed):
- typographic quotes and primes for ' and " (smart quotes), dashes and the minus sign for -,
  the ellipsis for "...", non-breaking / thin / ideographic and other wide spaces for " ";
- zero-width characters, the byte-order mark, bidi marks and the soft hyphen, dropped;
- full-width ASCII forms (U+FF01-FF5E: the colon and brackets of a Chinese or Japanese input
  method), to the ASCII they stand for, as NFKC does for that block and nothing else. Blanket
  NFKC is not used: it also rewrites what a log means as written ("m²", "µs", ligatures, "½",
  "℃", circled and super/subscript digits) and costs a normalisation pass on every non-ASCII line;
- HTML character references (&gt; &amp; &#39; &#x27; &nbsp;) as a scraped page or a JSON API
  body leaves them, one level only and only where the semicolon ends them: "&alpha," in a
  cuBLAS call stays (html.unescape alone would read legacy names without it);
- markdown: emphasis markers around words (_x_, *x*, **x**, __two words__), backslash escapes
  (\\_ \\* \\[), a whole line put in inline code (`line`), and a link whose text is its own
  target ("[10.0.0.7](http://10.0.0.7/)", "[x.cc:101](http://x.cc:101/)": an editor's or a
  tracker's autolink of a host or file name that a copy then wrote out as a CommonMark inline
  link, "[text](destination)"), to its text.

Deliberately left: a backtick inside a line (PyTorch prints "Assertion `t >= 0` failed" and
"Compile with `TORCH_USE_CUDA_DSA`", and rules read them), a marker touching a word or path
character (CUDA_ERROR_X, a_b_c, /tmp/*, 2*3*4), a dunder or macro (__init__, __CUDACC__), a star
run followed by a space (glog's "*** Check failure stack trace: ***", **kwargs), line ends
(the parsers already take "\\r\\n" and "\\r" off: common.clean_line, str.splitlines).

Every pattern is bounded and scans a line once; lines of plain ASCII with no "&", "\\", "*",
"_", "`" or "](" are returned as they are, without any regex work.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

__all__ = ["transcribed"]


def _table() -> dict[int, str | None]:
    table: dict[int, str | None] = {c: chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)}
    for chars, ascii_ in (
        (
            "\u2018\u2019\u201a\u201b\u2032\u00b4",
            "'",
        ),  # single quotes, low-9, reversed-9, prime, acute
        ("\u201c\u201d\u201e\u201f\u2033", '"'),  # double quotes, low-9, reversed-9, double prime
        ("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),  # hyphens, en and em dash, bar, minus
        ("\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a", " "),
        ("\u202f\u205f\u3000", " "),  # narrow no-break, medium math, ideographic space
    ):
        table.update({ord(c): ascii_ for c in chars})
    table[0x2026] = "..."  # …
    # zero-width space / non-joiner / joiner, LRM, RLM, word joiner, BOM, soft hyphen
    table.update({ord(c): None for c in "\u200b\u200c\u200d\u200e\u200f\u2060\ufeff\u00ad"})
    return table


_TABLE = _table()
# A character reference with its semicolon: named (bounded), decimal or hex.
_ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")
# A markdown backslash escape of a character markdown would otherwise read; "\\\\" is matched
# (and kept) so that its second backslash never escapes what follows.
_ESCAPE = re.compile(r"\\(\\|[_*\[\]`#<>~|])")
# An emphasis marker opens after the line's edge, a space, an opening bracket or a quote, and
# closes before one of those or sentence punctuation; never next to a word, path or operator
# character. The marker leads each pattern (then a look behind it), so that the regex engine
# skips to the next "*" or "_" instead of trying every position of the line.
_CLOSE = r"(?=[.,;:!?)\]}\"']{0,3}(?:\s|$))"
# *x*, **x**, ***x***: the text starts with a letter or digit (a star run then a space is
# glog's "*** ... ***" or a list bullet; "'*' or '*'" is code), ends with neither a space nor a
# star, and holds no star; bounded length.
_STARS = re.compile(
    r"\*(?<![^\s(\[{\"']\*)(\*{0,2})([^\W_](?:[^*\n]{0,240}[^\s*\\])?)\*\1" + _CLOSE
)
# _x_ and __x y__ alike, but never "__name__": one word between double underscores is a Python
# dunder or a C macro (__init__, __CUDACC__), not bold.
_UNDERS = re.compile(
    r"_(?<![^\s(\[{\"']_)(_(?![A-Za-z0-9]{1,64}__)|)([^\W_](?:[^_\n]{0,240}[^\s_\\])?)_\1" + _CLOSE
)
# A whole line in inline code (or a one-line fence): "`RuntimeError: CUDA error: ...`".
_CODE_LINE = re.compile(
    r"^([ \t]*)(`{1,3})([^`\s](?:[^`\n]{0,8190}[^`\s])?)\2([ \t]*)$", re.MULTILINE
)


# An inline link (CommonMark's "[text](destination)") whose destination is the text itself,
# with an http(s) scheme and a "/" an autolinker adds: only then was the link made from the
# printed word, not written by a person; bounded, one scan of the line.
_AUTOLINK = re.compile(r"\[([^\[\]\s()]{1,253})\]\((?:https?://)?\1/?\)")


def _escape(m: re.Match[str]) -> str:
    return m.group() if m[1] == "\\" else m[1]


_MARKDOWN: tuple[tuple[str, re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    ("*", _STARS, r"\2"),
    ("_", _UNDERS, r"\2"),
    ("\\", _ESCAPE, _escape),  # after emphasis: an escaped marker is no marker
    ("`", _CODE_LINE, r"\1\3\4"),
    ("](", _AUTOLINK, r"\1"),
)


def _entity(m: re.Match[str]) -> str:
    return html.unescape(m.group())


def _markdown(text: str) -> str:
    """Emphasis, escapes and whole-line inline code taken off (see the module's notes)."""
    # search before sub: most lines with a "*" or "_" have no emphasis, and a search that
    # finds nothing costs a third of a sub that replaces nothing
    for marker, pattern, repl in _MARKDOWN:
        if marker in text and pattern.search(text):
            text = pattern.sub(repl, text)
    return text


def transcribed(text: str) -> str:
    """`text` (a line, or lines) with transcription artifacts folded to what was printed."""
    if "&" in text:  # first: an entity may name a smart quote or a no-break space
        text = _ENTITY.sub(_entity, text)
    if not text.isascii():
        text = text.translate(_TABLE)
    return _markdown(text)
