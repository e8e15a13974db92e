"""A real S3-compatible endpoint on loopback for tests: moto's server mode, on a free port.

``with MotoS3() as s3:`` starts ``moto_server`` as a process of its own, waits until it answers,
creates ``s3.bucket`` and gives ``s3.environ()`` (``AWS_ENDPOINT_URL`` and test credentials), which
botocore (and so s3fs) reads. The process is stopped by its PID on exit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

__all__ = ["MotoS3"]

MOTO_SERVER = Path(sys.executable).with_name("moto_server")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class MotoS3:
    def __init__(self, bucket: str = "runs") -> None:
        self.bucket = bucket
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environ(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def url(self, *parts: str) -> str:
        return "/".join([f"s3://{self.bucket}", *parts])

    def filesystem(self) -> object:
        import s3fs

        return s3fs.S3FileSystem(
            key="testing", secret="testing", endpoint_url=self.endpoint, skip_instance_cache=True
        )

    def start(self) -> MotoS3:
        self.process = subprocess.Popen(
            [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 240
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.process.returncode}")
            try:
                urllib.request.urlopen(self.endpoint, timeout=2).close()
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("moto_server did not answer within 240 s") from None
                time.sleep(0.1)
        request = urllib.request.Request(f"{self.endpoint}/{self.bucket}", method="PUT")
        urllib.request.urlopen(request, timeout=10).close()
        return self

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()

    def __enter__(self) -> MotoS3:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
