"""Where ClusterShell's gathered `clush -b` block ends (issue #11: a block owns no later line
that is no output of its host).

From cea-hpc/clustershell @c09f82763b2b:
- lib/ClusterShell/CLI/Display.py _print_content writes format_header(nodeset) (SEP, the node
  set, SEP, each on its own line) + the gathered content + "\\n": nothing after a block, no blank
  line between blocks; the content is the remote output's lines as they came, its blank lines
  included (nvidia-smi's between its tables, Python's chained traceback's), so a blank line in a
  block is no end of it;
- lib/ClusterShell/CLI/Clush.py ttyloop: in interactive mode "Enter 'quit' to leave this
  interactive mode", "Working with nodes: %s", then raw_input("clush> ") each time a command's
  gathered output is written: the prompt, with or without the next command typed at it, is the
  tool's own line after the block, which ends there.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

H = "gpu-n07"
_SEP = "-" * 15
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
XID = (
    "[ 2345.678901] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off "
    "the bus.\n"
)
FAILURES = {"ecc": ECC, "xid": XID}
SESSION = (
    f"$ clush -b -w {H}\n"
    "Enter 'quit' to leave this interactive mode\n"
    f"Working with nodes: {H}\n"
    "clush> uptime\n"
)
BLOCK = f"{_SEP}\n{H}\n{_SEP}\n 10:00:01 up 3 days,  2:11,  0 users,  load average: 0.00\n"
# the prompt back after the block: bare (a paste drops its trailing space), with a command
PROMPTS = {
    "bare": "clush> \n",
    "bare_stripped": "clush>\n",
    "quit": "clush> quit\n",
    "next_command": "clush> cat /tmp/train.log\n",
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("prompt", sorted(PROMPTS))
def test_clushs_interactive_prompt_ends_the_gathered_block(prompt: str, failure: str) -> None:
    got = explain_text(SESSION + BLOCK + PROMPTS[prompt] + FAILURES[failure])
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None), got.explanation


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("prompt", sorted(PROMPTS))
def test_a_failure_in_the_block_above_clushs_prompt_keeps_its_host(
    prompt: str, failure: str
) -> None:
    got = explain_text(SESSION + BLOCK + FAILURES[failure] + PROMPTS[prompt])
    assert (got.blame, got.node) == ("node", H), got.explanation


# Python's chained traceback ("\nDuring handling of the above exception, another exception
# occurred:\n\n", Lib/traceback.py _context_message) puts blank lines inside the remote output
CHAINED = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 10, in <module>\n'
    "    step()\n"
    "KeyError: 'x'\n"
    "\n"
    "During handling of the above exception, another exception occurred:\n"
    "\n"
    "Traceback (most recent call last):\n"
    '  File "train.py", line 12, in <module>\n'
    "    loss.backward()\n"
)


def test_a_blank_line_of_the_remote_output_does_not_end_a_clush_block() -> None:
    got = explain_text(f"{_SEP}\n{H}\n{_SEP}\n" + CHAINED + ECC)
    assert (got.blame, got.node) == ("node", H), got.explanation
