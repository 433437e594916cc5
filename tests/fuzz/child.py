"""A worker.py child of the mutation fuzzer (run.py): sends it "MODE PATH" lines and reads the
stage it reached and its result; a crash or a hang is an Outcome too, and the child restarts."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@dataclass
class Outcome:
    status: str  # "done", "crashed" (the child died) or "hung" (no result in time)
    result: dict[str, Any] = field(default_factory=dict)
    stage: str = ""  # the stage a crash or hang happened in
    detail: str = ""  # exit code and the end of stderr


class Worker:
    """One worker.py child; restarted after a crash or hang. Its stdout is read unbuffered
    (os.read): a buffered reader would hold lines that select() no longer sees."""

    def __init__(self, runtime: str, env: dict[str, str]) -> None:
        self.runtime, self.env = runtime, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.pending = b""

    def _start(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, str(HERE / "worker.py"), self.runtime],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
            )
            self.pending = b""
        return self.proc

    def _line(self, deadline: float) -> bytes | None:
        """The next line; b"" at EOF, None at the deadline."""
        assert self.proc and self.proc.stdout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line + b"\n"

    def run(self, mode: str, path: Path, timeout: float) -> Outcome:
        p = self._start()
        assert p.stdin and p.stderr
        try:
            p.stdin.write(f"{mode} {path}\n".encode())
            p.stdin.flush()
        except BrokenPipeError:
            pass  # it died starting: the read below sees the EOF
        stage, deadline = "", time.monotonic() + timeout
        while True:
            line = self._line(deadline)
            if line is None:
                self.stop()
                return Outcome("hung", stage=stage, detail=f"no result in {timeout:.0f} s")
            if not line:
                code = p.wait()
                err = p.stderr.read()[-2000:].decode(errors="replace")
                self.proc = None
                return Outcome("crashed", stage=stage, detail=f"exit {code}\n{err}")
            text = line.decode(errors="replace")
            if text.startswith("BEGIN "):
                stage = text.split()[1]
            elif text.startswith("RESULT "):
                return Outcome("done", json.loads(text[7:]))

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()  # our own child, by its handle
            self.proc.wait()
            self.proc = None
