"""A log a terminal or an editor wrapped at one width, its long lines joined again.

A terminal (tmux/screen copy mode, a serial console, a web shell) cuts a long line every W
characters, mid-word; an editor or a mail client wraps words at about W. Either way the lines of
a wrapped text are no longer than W and the cut ones are (about) W long, so a rule that reads
one line sees only a piece of it. explain reads such a text again, joined (a terminal's cut
first, then a word wrap), only when the text as it came shows nothing it recognises: joining
lines that were never cut could hide what a line means alone, so a joined reading is a
fallback, never a second opinion.
"""

from __future__ import annotations

MIN_WIDTH = 60  # narrower than any terminal or editor wrap; shorter lines were not cut
_WORD_SLACK = 20  # a word wrap leaves its cut lines up to about one long word short of W


def _width(lines: list[str]) -> int | None:
    """W, the width the lines may have been wrapped at, or None when they show no wrap."""
    sizes = [len(ln) for ln in lines if ln.strip()]
    if len(sizes) < 2 or max(sizes) < MIN_WIDTH:
        return None
    return max(sizes)


def rewrapped(text: str, *, hard: bool) -> tuple[str, dict[str, str]] | None:
    """The text with each wrapped line joined to its rest: `hard`, a line exactly W long runs
    on into the next (a terminal's cut, mid-word); else a line within a word of W goes on after
    a space (a word wrap). With each joined line's original lines (newline-separated, for
    quoting); None when no wrap shows or nothing was joined."""
    lines = text.splitlines()
    width = _width(lines)
    if width is None:
        return None
    out: list[str] = []
    pieces: list[list[str]] = []
    last = 0  # length of the physical line last added
    for line in lines:
        cut = last == width if hard else last >= width - _WORD_SLACK
        if out and cut and line.strip():
            out[-1] += line if hard else " " + line.lstrip()
            pieces[-1].append(line)
        else:
            out.append(line)
            pieces.append([line])
        last = len(line)
    chunks = {joined: "\n".join(p) for joined, p in zip(out, pieces, strict=True) if len(p) > 1}
    return ("\n".join(out), chunks) if chunks else None
