"""Safe serialization for pages: JSON inside <script>, Plotly figures, times no clock shows."""

from __future__ import annotations

import json
import re

import plotly.graph_objects as go
from hypothesis import given
from hypothesis import strategies as st

from web.pages.templating import clock, plot_text, plotly_figure, script_json, script_safe

HOSTILE = "</script><script>alert(1)</script><!--<script>]]>&amp;\u2028'\""


def test_script_json_cannot_end_or_corrupt_its_script_and_keeps_the_value() -> None:
    value = {"node": HOSTILE, "list": [HOSTILE, 1.5, None]}
    text = str(script_json(value))
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == value


def test_plotly_figure_serializes_hostile_labels_inside_its_script_safely() -> None:
    fig = go.Figure(go.Heatmap(z=[[1]], y=[plot_text(HOSTILE)], text=[[plot_text(HOSTILE)]]))
    html = str(plotly_figure(fig, "util-heatmap"))
    script = re.search(r"<script>(.*)</script>$", html, re.S)
    assert script is not None and "</script" not in script.group(1).lower()
    assert "<!--" not in script.group(1) and html.count("<script>") == 1
    # Plotly reads tags in labels; escaped, the label shows the text as written.
    assert plot_text("<b>x</b>") == "&lt;b&gt;x&lt;/b&gt;"


def test_a_time_no_clock_can_show_renders_as_a_question_mark() -> None:
    assert clock(7e16) == "?" and clock(float("nan")) == "?" and clock(0.0).startswith("1970")


_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


@given(st.text(alphabet=st.sampled_from(list('<>&\u2028\u2029\\u/0a"')), max_size=40) | st.text())
def test_script_safe_escapes_each_character_on_its_own(text: str) -> None:
    assert script_safe(text) == "".join(_ESCAPES.get(c, c) for c in text)
    assert json.loads(script_safe(json.dumps(text))) == text
