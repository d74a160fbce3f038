"""Command runners for the Slurm source: a real one (subprocess, timeouts) and a replay of
recorded real output for tests. Neither raises for a failed command: the result says so."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class CommandResult:
    """What one command did. `error` is set when it did not run to a zero exit."""

    argv: tuple[str, ...]
    rc: int | None  # None when it never finished (timeout, not found)
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str | None = None  # 'timeout', 'not_found', 'exit_<rc>', 'os_error'

    @property
    def ok(self) -> bool:
        """True when the command ran and exited 0."""
        return self.error is None


class CommandRunner(Protocol):
    """Runs one command with a timeout and never raises for the command's own failure."""

    def __call__(self, argv: Sequence[str], timeout: float) -> CommandResult:
        """Run argv; the result carries rc, output and what went wrong."""
        ...


@dataclass
class SubprocessRunner:
    """Runs Slurm client commands for real; `bin_dir` and `slurm_conf` are optional overrides."""

    bin_dir: str | None = None
    slurm_conf: str | None = None
    env: Mapping[str, str] | None = None

    def _env(self) -> dict[str, str]:
        env = dict(os.environ if self.env is None else self.env)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        # Times in sacct -P / scontrol are local; the source parses them in this process's TZ.
        return env

    def __call__(self, argv: Sequence[str], timeout: float) -> CommandResult:
        """Run argv with a timeout; kill it when it hangs."""
        args = list(argv)
        if self.bin_dir:
            args[0] = str(Path(self.bin_dir) / args[0])
        try:
            proc = subprocess.run(
                args,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                env=self._env(),
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
            return CommandResult(tuple(args), None, out, "", True, "timeout")
        except FileNotFoundError as exc:
            return CommandResult(tuple(args), None, "", str(exc), False, "not_found")
        except OSError as exc:
            return CommandResult(tuple(args), None, "", str(exc), False, "os_error")
        error = None if proc.returncode == 0 else f"exit_{proc.returncode}"
        return CommandResult(tuple(args), proc.returncode, proc.stdout, proc.stderr, False, error)


Reply = str | CommandResult | Callable[[Sequence[str]], str | CommandResult]


@dataclass
class RecordedRunner:
    """Replays recorded real output keyed by command prefix ('sacct --json', 'scontrol show job').

    The longest key whose words start the argv wins. A key with no reply behaves like a command
    that failed (exit 1), as a missing binary would. Every call is kept in `calls`.
    """

    replies: dict[str, Reply] = field(default_factory=dict)
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str], timeout: float) -> CommandResult:
        """Return the recorded reply for argv."""
        args = tuple(argv)
        self.calls.append(args)
        best: str | None = None
        for key in self.replies:
            words = tuple(key.split())
            if args[: len(words)] == words and (best is None or len(key) > len(best)):
                best = key
        if best is None:
            return CommandResult(args, 1, "", f"no recording for {' '.join(args)}", False, "exit_1")
        reply = self.replies[best]
        if callable(reply):
            reply = reply(args)
        if isinstance(reply, CommandResult):
            return reply
        return CommandResult(args, 0, reply, "")

    def commands(self) -> list[str]:
        """The first two words of each call, in order, for assertions."""
        return [" ".join(c[:2]) for c in self.calls]
